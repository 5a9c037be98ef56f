package analysis

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

func TestSummarizeRun(t *testing.T) {
	for phase, want := range map[rolloutv1alpha1.AnalysisPhase][3]string{ // Ready, Reconciling, Stalled
		"":                                   {"False", "True", ""},
		rolloutv1alpha1.AnalysisRunning:      {"False", "True", ""},
		rolloutv1alpha1.AnalysisSuccessful:   {"True", "", ""},
		rolloutv1alpha1.AnalysisFailed:       {"False", "", "True"},
		rolloutv1alpha1.AnalysisError:        {"False", "", "True"},
		rolloutv1alpha1.AnalysisInconclusive: {"False", "", "True"},
	} {
		st := &rolloutv1alpha1.AnalysisRunStatus{Phase: rolloutv1alpha1.AnalysisRunning}
		Summarize(st, 1) // an earlier pass while running
		st.Phase = phase
		Summarize(st, 1)
		for i, typ := range []string{rolloutv1alpha1.ConditionReady, rolloutv1alpha1.ConditionReconciling, rolloutv1alpha1.ConditionStalled} {
			got := ""
			if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
				got = string(c.Status)
			}
			if got != want[i] {
				t.Errorf("phase %q: %s = %q, want %q", phase, typ, got, want[i])
			}
		}
	}
}
