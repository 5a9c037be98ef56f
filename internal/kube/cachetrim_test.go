package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// deployment is a member or template Deployment as the API server sends it: applied by
// Flotilla, scaled by an HPA, its status written by the kube-controller-manager.
func deployment(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(`{
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "web", "namespace": "shop",
    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"kind\":\"Deployment\"}", "team": "shop"},
    "managedFields": [
      {"manager": "flotilla", "operation": "Apply", "apiVersion": "apps/v1", "time": "2026-11-27T10:00:00Z", "fieldsType": "FieldsV1",
       "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {}}}}}},
      {"manager": "hpa", "operation": "Update", "apiVersion": "autoscaling/v1", "time": "2026-11-27T10:01:00Z", "fieldsType": "FieldsV1",
       "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"},
      {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1", "time": "2026-11-27T10:02:00Z", "fieldsType": "FieldsV1",
       "fieldsV1": {"f:status": {"f:replicas": {}}}, "subresource": "status"},
      {"manager": "kubectl", "operation": "Update", "apiVersion": "apps/v1", "time": "2026-11-27T10:03:00Z", "fieldsType": "FieldsV1",
       "fieldsV1": {"f:metadata": {"f:labels": {}}}}
    ]},
  "spec": {"replicas": 3}, "status": {"replicas": 3}}`)); err != nil {
		t.Fatal(err)
	}
	return u
}

type entry struct {
	Manager, Operation, Subresource string
	Fields                          bool
}

func entries(u *unstructured.Unstructured) []entry {
	var out []entry
	for _, mf := range u.GetManagedFields() {
		out = append(out, entry{mf.Manager, string(mf.Operation), mf.Subresource, mf.FieldsV1 != nil})
	}
	return out
}

// A template keeps one line per writer (history names the newest) without its fields, loses
// kubectl's copy of itself, and keeps everything else.
func TestTrimControlPlaneTemplate(t *testing.T) {
	u := deployment(t)
	out, err := TrimControlPlaneObject(u)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	want := []entry{{"flotilla", "Apply", "", false}, {"hpa", "Update", "scale", false},
		{"kube-controller-manager", "Update", "status", false}, {"kubectl", "Update", "", false}}
	if d := cmp.Diff(want, entries(got)); d != "" {
		t.Errorf("managedFields (-want +got):\n%s", d)
	}
	if mf := got.GetManagedFields(); mf[3].Time == nil || mf[3].Time.UTC().Hour() != 10 || mf[3].Time.Minute() != 3 {
		t.Errorf("the newest writer's time is lost: %v", mf[3].Time)
	}
	if d := cmp.Diff(map[string]string{"team": "shop"}, got.GetAnnotations()); d != "" {
		t.Errorf("annotations (-want +got):\n%s", d)
	}
	if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 3 {
		t.Errorf("spec.replicas = %d, want 3", r)
	}
}

// Typed objects lose managedFields entirely: nothing reads them, and an Update of such an
// object keeps the live ones.
func TestTrimControlPlaneTyped(t *testing.T) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "flotilla", Operation: metav1.ManagedFieldsOperationApply}}}}
	out, err := TrimControlPlaneObject(s)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Secret)
	if got.ManagedFields != nil || got.Labels["a"] != "b" {
		t.Errorf("got managedFields %v, labels %v; want none and the labels kept", got.ManagedFields, got.Labels)
	}
	// Not an object (a deleted-final-state marker, say): passed through.
	if out, err := TrimControlPlaneObject("x"); err != nil || out != "x" {
		t.Errorf("non-object: %v, %v", out, err)
	}
}

// A member object keeps what the executor reads: Flotilla's apply (without fields) and the
// scale writer with its fields (does it own spec.replicas?); the rest goes.
func TestTrimMemberObject(t *testing.T) {
	out, err := TrimMemberObject(deployment(t))
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	want := []entry{{"flotilla", "Apply", "", false}, {"hpa", "Update", "scale", true}}
	if d := cmp.Diff(want, entries(got)); d != "" {
		t.Errorf("managedFields (-want +got):\n%s", d)
	}
	if raw := string(got.GetManagedFields()[1].FieldsV1.Raw); raw != `{"f:spec":{"f:replicas":{}}}` {
		t.Errorf("scale entry's fields = %s", raw)
	}
	if _, ok := got.GetAnnotations()[LastAppliedAnnotation]; !ok {
		t.Error("a member object's annotations are compared for drift: they stay as they are")
	}

	// An object nobody but the controllers wrote has no entry left, and no empty list.
	u := deployment(t)
	mf := u.Object["metadata"].(map[string]any)["managedFields"].([]any)
	u.Object["metadata"].(map[string]any)["managedFields"] = mf[2:3]
	out, _ = TrimMemberObject(u)
	if _, has := out.(*unstructured.Unstructured).Object["metadata"].(map[string]any)["managedFields"]; has {
		t.Error("managedFields left behind with no entry")
	}
}
