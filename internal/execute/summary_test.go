package execute

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

func TestSummarizeWork(t *testing.T) {
	applied := func(s metav1.ConditionStatus, reason string, gen int64) []metav1.Condition {
		return []metav1.Condition{{Type: workv1alpha1.ConditionApplied, Status: s, Reason: reason, ObservedGeneration: gen}}
	}
	for _, tc := range []struct {
		name                        string
		status                      workv1alpha1.WorkStatus
		ready, reconciling, stalled string
	}{
		{"new", workv1alpha1.WorkStatus{}, "False", "True", ""},
		{"applied, healthy", workv1alpha1.WorkStatus{Conditions: applied(metav1.ConditionTrue, "Applied", 2), Health: workv1alpha1.HealthHealthy}, "True", "", ""},
		{"applied an older generation", workv1alpha1.WorkStatus{Conditions: applied(metav1.ConditionTrue, "Applied", 1), Health: workv1alpha1.HealthHealthy}, "False", "True", ""},
		{"applied, progressing", workv1alpha1.WorkStatus{Conditions: applied(metav1.ConditionTrue, "Applied", 2), Health: workv1alpha1.HealthProgressing}, "False", "True", ""},
		{"member not ready", workv1alpha1.WorkStatus{Conditions: applied(metav1.ConditionFalse, "ClusterNotReady", 2)}, "False", "True", ""},
		{"conflict", workv1alpha1.WorkStatus{Conditions: applied(metav1.ConditionFalse, "Conflict", 2)}, "False", "", "True"},
		{"customization fails", workv1alpha1.WorkStatus{Conditions: append(applied(metav1.ConditionTrue, "Applied", 2),
			metav1.Condition{Type: workv1alpha1.ConditionInterpreted, Status: metav1.ConditionFalse, Reason: "InterpreterError"})}, "False", "", "True"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.status.DeepCopy()
			summarize(st, 2)
			for typ, want := range map[string]string{workv1alpha1.ConditionReady: tc.ready, workv1alpha1.ConditionReconciling: tc.reconciling, workv1alpha1.ConditionStalled: tc.stalled} {
				got := ""
				if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
					got = string(c.Status)
				}
				if got != want {
					t.Errorf("%s = %q, want %q", typ, got, want)
				}
			}
		})
	}
}
