package conditions

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Each outcome leaves exactly the kstatus conditions it means, for the generation given,
// whatever was there before.
func TestSummaryKeepsTheKstatusContract(t *testing.T) {
	var conds []metav1.Condition
	s := Summary{Conditions: &conds, Generation: 3}
	has := func(typ string) metav1.ConditionStatus {
		if c := meta.FindStatusCondition(conds, typ); c != nil {
			if c.ObservedGeneration != 3 {
				t.Errorf("%s observed generation %d, want 3", typ, c.ObservedGeneration)
			}
			return c.Status
		}
		return ""
	}
	check := func(step string, ready, reconciling, stalled metav1.ConditionStatus) {
		t.Helper()
		if got := [3]metav1.ConditionStatus{has(Ready), has(Reconciling), has(Stalled)}; got != [3]metav1.ConditionStatus{ready, reconciling, stalled} {
			t.Errorf("%s: Ready/Reconciling/Stalled = %v", step, got)
		}
	}
	s.Progressing("Progressing", "applying")
	check("progressing", metav1.ConditionFalse, metav1.ConditionTrue, "")
	s.Stall("Conflict", "owned by someone else")
	check("stalled", metav1.ConditionFalse, "", metav1.ConditionTrue)
	s.Done(metav1.ConditionTrue, "Ready", "applied")
	check("done", metav1.ConditionTrue, "", "")
	if c := s.Get(Ready); c == nil || c.Reason != "Ready" || c.Message != "applied" {
		t.Errorf("Ready = %+v", c)
	}
	s.Progressing("Progressing", "a new generation")
	s.Done(metav1.ConditionFalse, "Superseded", "a newer release took over")
	check("done, not ready", metav1.ConditionFalse, "", "")
}
