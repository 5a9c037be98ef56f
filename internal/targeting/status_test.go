package targeting

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
)

// The typed status applies claim exactly the fields the untyped ones (the status struct
// converted to a map) claimed: the same object is sent, empty lists left out the same way, so the
// field manager's ownership is unchanged by the switch.
func TestStatusAppliesSendWhatTheStatusStructsDid(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	placed := metav1.Condition{Type: ConditionPlaced, Status: metav1.ConditionTrue, Reason: appsv1alpha1.ReasonPlaced, Message: "on east", ObservedGeneration: 2, LastTransitionTime: at}
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	for name, st := range map[string]placedStatus{
		"placed":      {Conditions: []metav1.Condition{placed}, Clusters: []string{"east", "west"}, TargetPolicies: []string{"platform", "shop/web"}},
		"placed none": {Conditions: []metav1.Condition{placed}},
	} {
		t.Run("Application "+name, func(t *testing.T) {
			want := untypedStatusApply(t, "Application", app, &st)
			if diff := cmp.Diff(want, jsonMap(t, st.apply(app))); diff != "" {
				t.Errorf("the typed apply sends another object (-untyped +typed):\n%s", diff)
			}
		})
	}

	ready := metav1.Condition{Type: appsv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: appsv1alpha1.ReasonPlaced, Message: "selects 1 applications and 0 clusters", ObservedGeneration: 1, LastTransitionTime: at}
	for name, p := range map[string]client.Object{
		"TargetPolicy":        &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}},
		"ClusterTargetPolicy": &appsv1alpha1.ClusterTargetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "platform"}},
	} {
		for what, st := range map[string]appsv1alpha1.TargetStatus{
			"selecting": {ObservedGeneration: 1, Conditions: []metav1.Condition{ready}, Applications: []string{"shop/web"}, Clusters: []string{"east"}},
			"empty":     {Conditions: []metav1.Condition{ready}},
		} {
			t.Run(name+" "+what, func(t *testing.T) {
				want := untypedStatusApply(t, name, p, &st)
				if diff := cmp.Diff(want, jsonMap(t, targetStatusApply(p, &st))); diff != "" {
					t.Errorf("the typed apply sends another object (-untyped +typed):\n%s", diff)
				}
			})
		}
	}
}

// untypedStatusApply is the object the untyped status apply sent for status.
func untypedStatusApply(t *testing.T, kind string, o client.Object, status any) map[string]any {
	t.Helper()
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]any{"name": o.GetName()}
	if o.GetNamespace() != "" {
		meta["namespace"] = o.GetNamespace()
	}
	return jsonMap(t, map[string]any{"apiVersion": appsv1alpha1.GroupVersion.String(), "kind": kind, "metadata": meta, "status": st})
}

func jsonMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
