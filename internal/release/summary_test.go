package release

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// Every phase maps to the kstatus contract: Ready only once succeeded, Reconciling while it
// moves, Stalled when it needs someone, neither for a superseded release.
func TestSummarizeFollowsThePhase(t *testing.T) {
	waves := func(phases ...rolloutv1alpha1.WavePhase) []rolloutv1alpha1.WaveStatus {
		var out []rolloutv1alpha1.WaveStatus
		for _, p := range phases {
			out = append(out, rolloutv1alpha1.WaveStatus{Name: "w", Phase: p})
		}
		return out
	}
	invalid := []metav1.Condition{{Type: ConditionValid, Status: metav1.ConditionFalse, Reason: "InvalidStrategy", Message: "no such template"}}
	for _, tc := range []struct {
		name                        string
		status                      rolloutv1alpha1.ReleaseStatus
		ready, reconciling, stalled string // condition status, "" when absent
		reason                      string // of Ready
	}{
		{"progressing", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Waves: waves(rolloutv1alpha1.WaveUpdating)}, "False", "True", "", "Progressing"},
		{"waiting for approval", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Waves: waves(rolloutv1alpha1.WaveSucceeded, rolloutv1alpha1.WaveWaitingForApproval)}, "False", "True", "", "WaitingForApproval"},
		{"paused", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleasePaused}, "False", "True", "", "Paused"},
		{"a failed wave held", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Waves: waves(rolloutv1alpha1.WaveFailed)}, "False", "", "True", "WaveFailed"},
		{"succeeded", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseSucceeded}, "True", "", "", "Succeeded"},
		{"rolled back", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseRolledBack}, "False", "", "True", "RolledBack"},
		{"aborted", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseAborted}, "False", "", "True", "Aborted"},
		{"superseded", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseSuperseded}, "False", "", "", "Superseded"},
		{"invalid", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Conditions: invalid}, "False", "", "True", "Invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.status.DeepCopy()
			// A stale summary from an earlier phase must be replaced, not kept.
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: rolloutv1alpha1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: "Old"})
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: rolloutv1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "Old"})
			Summarize(st, 3)
			for typ, want := range map[string]string{rolloutv1alpha1.ConditionReady: tc.ready, rolloutv1alpha1.ConditionReconciling: tc.reconciling, rolloutv1alpha1.ConditionStalled: tc.stalled} {
				c := meta.FindStatusCondition(st.Conditions, typ)
				got := ""
				if c != nil {
					got = string(c.Status)
					if c.ObservedGeneration != 3 {
						t.Errorf("%s observedGeneration %d, want 3", typ, c.ObservedGeneration)
					}
				}
				if got != want {
					t.Errorf("%s = %q, want %q", typ, got, want)
				}
			}
			if r := meta.FindStatusCondition(st.Conditions, rolloutv1alpha1.ConditionReady); r.Reason != tc.reason {
				t.Errorf("Ready reason %q, want %q", r.Reason, tc.reason)
			}
		})
	}
}
