package execute

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// The member informers keep only part of an object's managedFields (kube.TrimMemberObject):
// what the executor reads of them must read the same from the trimmed object.
func TestTrimmedMemberObjectsReadTheSame(t *testing.T) {
	statusWriter := func(m map[string]any) {
		u := &unstructured.Unstructured{Object: m}
		u.SetManagedFields(append(u.GetManagedFields(), metav1.ManagedFieldsEntry{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
			Subresource: "status", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:replicas":{}}}`)}}))
	}
	handEdit := func(m map[string]any) {
		u := &unstructured.Unstructured{Object: m}
		u.SetManagedFields(append(u.GetManagedFields(), metav1.ManagedFieldsEntry{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}}))
	}
	handedBack := func(m map[string]any) {
		(&unstructured.Unstructured{Object: m}).SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}})
	}
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-es-east", Name: "web", UID: "u", Generation: 2}}
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
	}{
		{"applied by flotilla", nil},
		{"status written by the member", statusWriter},
		{"scaled by an HPA", scaledBy("hpa", "scale")},
		{"scaled by flotilla through scale", scaledBy("flotilla", "scale")},
		{"replicas edited by hand", handEdit},
		{"handed back", handedBack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := member(t, tc.edit)
			out, err := kube.TrimMemberObject(live.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			trimmed := out.(*unstructured.Unstructured)
			if a, b := appliedByFlotilla(live), appliedByFlotilla(trimmed); a != b {
				t.Errorf("appliedByFlotilla: %v from the object, %v trimmed", a, b)
			}
			if a, b := liveState(w, live), liveState(w, trimmed); a != b {
				t.Errorf("liveState: %s from the object, %s trimmed", a, b)
			}
			d1, d2 := mustObject(t, rendered), mustObject(t, rendered)
			retainScaledReplicas(live, d1)
			retainScaledReplicas(trimmed, d2)
			_, a, _ := unstructured.NestedInt64(d1.Object, "spec", "replicas")
			_, b, _ := unstructured.NestedInt64(d2.Object, "spec", "replicas")
			if a != b {
				t.Errorf("retainScaledReplicas keeps spec.replicas: %v from the object, %v trimmed", a, b)
			}
		})
	}
}
