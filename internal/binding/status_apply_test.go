package binding

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// The typed status apply of a binding sends exactly the object the untyped one (the status
// struct converted to a map) sent, for namespaced and cluster-scoped bindings alike: the
// fields the binding controller's field manager claims are unchanged by the switch.
func TestBindingStatusApplySendsWhatTheStatusStructDid(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	status := &workv1alpha1.ResourceBindingStatus{
		ObservedGeneration: 7, Health: workv1alpha1.HealthDegraded,
		Conditions: []metav1.Condition{
			{Type: workv1alpha1.ConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied", Message: "applied in every target cluster", ObservedGeneration: 7, LastTransitionTime: at},
			{Type: workv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Degraded", LastTransitionTime: at},
		},
		Clusters: []workv1alpha1.ClusterStatus{
			{Cluster: "east", Applied: true, Health: workv1alpha1.HealthHealthy, Revision: 3,
				Status:      &runtime.RawExtension{Raw: []byte(`{"replicas":2,"readyReplicas":2}`)},
				LastApplied: &workv1alpha1.LastApplied{Hash: "abc", Replicas: ptr.To[int64](2), Objects: []workv1alpha1.AppliedObject{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}}},
				Drift:       &workv1alpha1.DriftStatus{Corrections: 1, LastCorrectionTime: &at}},
			{Cluster: "west", Health: workv1alpha1.HealthDegraded, Message: "Available=False", Lost: true},
		},
	}
	for _, b := range []workv1alpha1.Binding{
		&workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment"}},
		&workv1alpha1.ClusterResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader-clusterrole"}},
	} {
		gvk := workv1alpha1.BindingGVK(b)
		t.Run(gvk.Kind, func(t *testing.T) {
			st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
			if err != nil {
				t.Fatal(err)
			}
			meta := map[string]any{"name": b.GetName()}
			if b.GetNamespace() != "" {
				meta["namespace"] = b.GetNamespace()
			}
			want := roundTrip(t, map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "metadata": meta, "status": st})
			ac, err := statusApply(b, status)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, roundTrip(t, ac)); diff != "" {
				t.Errorf("the typed apply sends another object (-untyped +typed):\n%s", diff)
			}
		})
	}
}

func roundTrip(t *testing.T, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
