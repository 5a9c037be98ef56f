package release

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// Summarize sets a release's Ready, Reconciling and Stalled conditions from its phase, its
// waves and its Valid condition: the kstatus contract every status write keeps.
func Summarize(st *rolloutv1alpha1.ReleaseStatus, generation int64) {
	set := func(typ string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation})
	}
	ready := func(s metav1.ConditionStatus, reason string) {
		set(rolloutv1alpha1.ConditionReady, s, reason, orText(st.Message, reason))
	}
	progress := func(reason string) {
		ready(metav1.ConditionFalse, reason)
		set(rolloutv1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, orText(st.Message, reason))
		meta.RemoveStatusCondition(&st.Conditions, rolloutv1alpha1.ConditionStalled)
	}
	stall := func(reason, msg string) {
		ready(metav1.ConditionFalse, reason)
		set(rolloutv1alpha1.ConditionStalled, metav1.ConditionTrue, reason, msg)
		meta.RemoveStatusCondition(&st.Conditions, rolloutv1alpha1.ConditionReconciling)
	}
	done := func(s metav1.ConditionStatus, reason string) {
		ready(s, reason)
		meta.RemoveStatusCondition(&st.Conditions, rolloutv1alpha1.ConditionReconciling)
		meta.RemoveStatusCondition(&st.Conditions, rolloutv1alpha1.ConditionStalled)
	}
	if v := meta.FindStatusCondition(st.Conditions, ConditionValid); v != nil && v.Status == metav1.ConditionFalse && !Final(st.Phase) {
		stall(rolloutv1alpha1.ReasonInvalid, v.Message)
		return
	}
	switch st.Phase {
	case rolloutv1alpha1.ReleaseSucceeded:
		done(metav1.ConditionTrue, string(st.Phase))
		return
	case rolloutv1alpha1.ReleaseSuperseded:
		done(metav1.ConditionFalse, string(st.Phase))
		return
	case rolloutv1alpha1.ReleaseAborted, rolloutv1alpha1.ReleaseRolledBack:
		stall(string(st.Phase), orText(st.Message, string(st.Phase)))
		return
	case rolloutv1alpha1.ReleasePaused:
		progress(string(st.Phase))
		return
	}
	for i, w := range st.Waves {
		switch w.Phase {
		case rolloutv1alpha1.WaveFailed:
			stall(rolloutv1alpha1.ReasonWaveFailed, fmt.Sprintf("wave %d/%d (%s) failed: %s; abort or retry the release", i+1, len(st.Waves), w.Name, orText(w.Message, "no message")))
			return
		case rolloutv1alpha1.WaveWaitingForApproval:
			progress(rolloutv1alpha1.ReasonWaitingForApproval)
			return
		}
	}
	progress(string(rolloutv1alpha1.ReleaseProgressing))
}
