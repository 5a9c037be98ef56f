package kube

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A condition's apply configuration serializes as the condition does, so applying it claims
// the same fields the untyped status apply claimed for it.
func TestConditionsSerializeAsTheConditions(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	conds := []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Placed", Message: "selects 2", ObservedGeneration: 3, LastTransitionTime: at},
		{Type: "Stalled", Status: metav1.ConditionFalse, Reason: "Placed", LastTransitionTime: at},
	}
	want := jsonOf(t, conds)
	if got := jsonOf(t, Conditions(conds)); !cmp.Equal(got, want) {
		t.Errorf("apply configurations differ from the conditions (-got +want):\n%s", cmp.Diff(got, want))
	}
	if got := Conditions(nil); len(got) != 0 {
		t.Errorf("no conditions gave %d apply configurations", len(got))
	}
}

func jsonOf(t *testing.T, v any) any {
	t.Helper()
	if m, ok := v.([]metav1.Condition); ok { // as the untyped status apply sent them
		var out []any
		for i := range m {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&m[i])
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, u)
		}
		v = out
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
