package analysis

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// Summarize sets a run's Ready, Reconciling and Stalled conditions from its phase (the
// kstatus contract): Ready once successful, Reconciling while measuring, Stalled once it
// failed, errored or came out inconclusive.
func Summarize(st *rolloutv1alpha1.AnalysisRunStatus, generation int64) {
	phase := st.Phase
	if phase == "" {
		phase = rolloutv1alpha1.AnalysisPending
	}
	msg := st.Message
	if msg == "" {
		msg = string(phase)
	}
	set := func(typ string, s metav1.ConditionStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: string(phase), Message: msg, ObservedGeneration: generation})
	}
	switch phase {
	case rolloutv1alpha1.AnalysisSuccessful:
		set(rolloutv1alpha1.ConditionReady, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&st.Conditions, rolloutv1alpha1.ConditionReconciling)
		meta.RemoveStatusCondition(&st.Conditions, rolloutv1alpha1.ConditionStalled)
	case rolloutv1alpha1.AnalysisFailed, rolloutv1alpha1.AnalysisError, rolloutv1alpha1.AnalysisInconclusive:
		set(rolloutv1alpha1.ConditionReady, metav1.ConditionFalse)
		set(rolloutv1alpha1.ConditionStalled, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&st.Conditions, rolloutv1alpha1.ConditionReconciling)
	default:
		set(rolloutv1alpha1.ConditionReady, metav1.ConditionFalse)
		set(rolloutv1alpha1.ConditionReconciling, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&st.Conditions, rolloutv1alpha1.ConditionStalled)
	}
}
