package clustercache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/internal/kube"
)

// A member object read from the cache is the object the informer decoded, with the
// managedFields kube.TrimMemberObject drops gone: the same numbers (integers stay int64), the
// same nesting, the same metadata.
func TestCompactMemberObjectReadsAsDecoded(t *testing.T) {
	const member = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop",
		"resourceVersion":"42","generation":3,"uid":"u-1",
		"labels":{"work.flotilla.dev/managed-by":"flotilla"},
		"annotations":{"work.flotilla.dev/work-name":"web-east","work.flotilla.dev/manifest-hash":"h"},
		"managedFields":[
			{"manager":"flotilla","operation":"Apply","apiVersion":"apps/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{}}}},
			{"manager":"kube-controller-manager","operation":"Update","subresource":"status","fieldsType":"FieldsV1","fieldsV1":{"f:status":{}}}]},
		"spec":{"replicas":2,"progressDeadlineSeconds":600,"template":{"spec":{"containers":[{"name":"web","image":"nginx",
			"resources":{"limits":{"cpu":"500m"}},"ports":[{"containerPort":8080,"protocol":"TCP"}]}]}}},
		"status":{"replicas":2,"availableReplicas":2,"ratio":0.5,"conditions":[{"type":"Available","status":"True"}]}}`
	decoded := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(member)); err != nil {
			t.Fatal(err)
		}
		return u
	}
	want, err := kube.TrimMemberObject(decoded())
	if err != nil {
		t.Fatal(err)
	}
	out, err := compactMemberObject(decoded())
	if err != nil {
		t.Fatal(err)
	}
	c, ok := out.(*compactObject)
	if !ok {
		t.Fatalf("the transform gave %T, want *compactObject", out)
	}
	got, err := c.object()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.(*unstructured.Unstructured).Object, got.Object); diff != "" {
		t.Errorf("read from the cache (-decoded +cached):\n%s", diff)
	}
	if c.GetName() != "web" || c.GetNamespace() != "shop" || c.GetResourceVersion() != "42" ||
		c.GetAnnotations()["work.flotilla.dev/work-name"] != "web-east" {
		t.Errorf("metadata kept: %+v", c.ObjectMeta)
	}
	// Each read is the caller's own; a second pass through the transform changes nothing.
	got.Object["spec"] = nil
	if again, _ := c.object(); again.Object["spec"] == nil {
		t.Error("a change to one read shows in the next")
	}
	if same, err := compactMemberObject(c); err != nil || same != c {
		t.Errorf("the transform of a cached object: %v, %v; want it unchanged", same, err)
	}
}
