package binding

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// A member's status on the binding is one value to server-side apply: the managed fields name
// it, not each of its fields (which grew every binding with every member's status), and a
// field the member dropped goes.
func TestMemberStatusIsOneAppliedValue(t *testing.T) {
	ctx := context.Background()
	c, b := shopBinding(t)
	write := func(memberStatus string) *workv1alpha1.ResourceBinding {
		t.Helper()
		got := &workv1alpha1.ResourceBinding{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), got); err != nil {
			t.Fatal(err)
		}
		st := &workv1alpha1.ResourceBindingStatus{Clusters: []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true,
			Status: &runtime.RawExtension{Raw: []byte(memberStatus)}}}}
		if err := writeStatus(ctx, c, got, st); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := write(`{"replicas":3,"readyReplicas":2}`)
	for _, mf := range got.ManagedFields {
		if mf.Manager == workv1alpha1.BindingStatusManager && strings.Contains(string(mf.FieldsV1.Raw), "readyReplicas") {
			t.Fatalf("the member status's fields are tracked one by one: %s", mf.FieldsV1.Raw)
		}
	}
	got = write(`{"replicas":3}`)
	var member map[string]any
	if err := json.Unmarshal(got.Status.Clusters[0].Status.Raw, &member); err != nil {
		t.Fatal(err)
	}
	if _, kept := member["readyReplicas"]; kept {
		t.Fatalf("a field the member dropped stayed: %v", member)
	}
}
