package detector

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestTemplateChangedIgnoresStatusWrites(t *testing.T) {
	template := func(generation int64, edit func(*unstructured.Unstructured)) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "shop", "generation": generation, "labels": map[string]any{"app": "web"}},
			"spec":     map[string]any{"replicas": int64(3)}}}
		if edit != nil {
			edit(u)
		}
		return u
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name   string
		before *unstructured.Unstructured
		after  *unstructured.Unstructured
		want   bool
	}{
		{"status written", template(2, nil), template(2, func(u *unstructured.Unstructured) {
			u.Object["status"] = map[string]any{"readyReplicas": int64(3)}
			u.SetResourceVersion("9")
		}), false},
		{"spec changed", template(2, nil), template(3, nil), true},
		{"label changed", template(2, nil), template(2, func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"app": "shop"}) }), true},
		{"switch annotation set", template(2, nil), template(2, func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"flotilla.dev/suspend": "true"})
		}), true},
		{"deleting", template(2, nil), template(2, func(u *unstructured.Unstructured) { u.SetDeletionTimestamp(&now) }), true},
		{"a kind without generation (ConfigMap data)", template(0, nil), template(0, func(u *unstructured.Unstructured) { u.Object["data"] = map[string]any{"k": "v"} }), true},
	} {
		got := templateChanged.Update(event.TypedUpdateEvent[*unstructured.Unstructured]{ObjectOld: tc.before, ObjectNew: tc.after})
		if got != tc.want {
			t.Errorf("%s: templateChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}
