package binding

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

func TestSummarizeBinding(t *testing.T) {
	cond := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: reason}
	}
	applied := cond(workv1alpha1.ConditionApplied, metav1.ConditionTrue, "Applied")
	healthy := cond(workv1alpha1.ConditionHealthy, metav1.ConditionTrue, "Healthy")
	for _, tc := range []struct {
		name                        string
		placed                      bool
		conds                       []metav1.Condition
		ready, reconciling, stalled string
		reason                      string
	}{
		{"applied and healthy", true, []metav1.Condition{applied, healthy}, "True", "", "", workv1alpha1.ReasonReady},
		{"not scheduled", false, nil, "False", "True", "", workv1alpha1.ReasonNotScheduled},
		{"applying", true, []metav1.Condition{cond(workv1alpha1.ConditionApplied, metav1.ConditionFalse, "NotApplied")}, "False", "True", "", workv1alpha1.ReasonProgressing},
		{"apply failed", true, []metav1.Condition{cond(workv1alpha1.ConditionApplied, metav1.ConditionFalse, "ApplyFailed")}, "False", "True", "", workv1alpha1.ReasonApplyFailed},
		{"progressing", true, []metav1.Condition{applied, cond(workv1alpha1.ConditionHealthy, metav1.ConditionFalse, "Progressing")}, "False", "True", "", workv1alpha1.ReasonProgressing},
		{"degraded", true, []metav1.Condition{applied, cond(workv1alpha1.ConditionHealthy, metav1.ConditionFalse, "Degraded")}, "False", "True", "", workv1alpha1.ReasonDegraded},
		{"customization fails", true, []metav1.Condition{applied, healthy, cond(workv1alpha1.ConditionInterpreted, metav1.ConditionFalse, "InterpreterError")}, "False", "", "True", workv1alpha1.ReasonInterpreterError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &workv1alpha1.ResourceBindingStatus{Conditions: tc.conds}
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: workv1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "Old"})
			summarize(st, tc.placed, 7)
			for typ, want := range map[string]string{workv1alpha1.ConditionReady: tc.ready, workv1alpha1.ConditionReconciling: tc.reconciling, workv1alpha1.ConditionStalled: tc.stalled} {
				got := ""
				if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
					got = string(c.Status)
				}
				if got != want {
					t.Errorf("%s = %q, want %q", typ, got, want)
				}
			}
			if r := meta.FindStatusCondition(st.Conditions, workv1alpha1.ConditionReady); r.Reason != tc.reason || r.ObservedGeneration != 7 {
				t.Errorf("Ready %s gen %d, want %s gen 7", r.Reason, r.ObservedGeneration, tc.reason)
			}
		})
	}
}

// A Degraded member says why, from its failing conditions.
func TestFailingConditionsSayWhyAMemberIsDegraded(t *testing.T) {
	raw := &runtime.RawExtension{Raw: []byte(`{"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable"},
		{"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded","message":"ReplicaSet \"web-1\" has timed out progressing."}]}`)}
	if got := failingConditions(raw); got != `Progressing=False ProgressDeadlineExceeded: ReplicaSet "web-1" has timed out progressing.` {
		t.Errorf("got %q", got)
	}
	if got := failingConditions(nil); got != "" {
		t.Errorf("no status: %q", got)
	}
}
