package analysis

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/conditions"
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
	s := conditions.Summary{Conditions: &st.Conditions, Generation: generation}
	switch phase {
	case rolloutv1alpha1.AnalysisSuccessful:
		s.Done(metav1.ConditionTrue, string(phase), msg)
	case rolloutv1alpha1.AnalysisFailed, rolloutv1alpha1.AnalysisError, rolloutv1alpha1.AnalysisInconclusive:
		s.Stall(string(phase), msg)
	default:
		s.Progressing(string(phase), msg)
	}
}
