package historian

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/internal/kube"
)

// The control-plane cache keeps a template's field managers without their fields
// (kube.TrimControlPlaneObject): the writer history names is the same.
func TestActorOfTrimmedTemplate(t *testing.T) {
	at := func(m int) *metav1.Time { return &metav1.Time{Time: time.Date(2026, 11, 27, 10, m, 0, 0, time.UTC)} }
	fields := &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apps/v1")
	u.SetKind("Deployment")
	u.SetName("web")
	u.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, Time: at(1), FieldsType: "FieldsV1", FieldsV1: fields},
		{Manager: "ci", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(3), FieldsType: "FieldsV1", FieldsV1: fields},
		{Manager: "flotilla", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: at(5), FieldsType: "FieldsV1", FieldsV1: fields},
	})
	want := actorOf(u)
	out, err := kube.TrimControlPlaneObject(u.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if got := actorOf(out.(*unstructured.Unstructured)); got != want || want != "manager ci" {
		t.Errorf("actorOf trimmed = %q, untrimmed %q; want both %q", got, want, "manager ci")
	}
}
