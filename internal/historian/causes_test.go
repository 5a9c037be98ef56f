package historian

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/history"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// A staged adoption, a hand-back and a take-back of one cluster: each record says which,
// with a pass that changes nothing in between (the removal must be remembered).
func TestAdoptionUnmanageAndManageHaveTheirCauses(t *testing.T) {
	ctx := context.Background()
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "legacy-deployment", UID: "u1", Generation: 1},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "a", Name: "legacy"},
			Clusters: []workv1alpha1.TargetCluster{{Name: "east"}}, Revisions: &workv1alpha1.Revisions{Latest: 1, Stable: 1}},
		Status: workv1alpha1.ResourceBindingStatus{Clusters: []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy}}}}
	rel := &rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "legacy-deployment-r1"},
		Spec: rolloutv1alpha1.ReleaseSpec{Binding: rolloutv1alpha1.BindingReference{Kind: "ResourceBinding", Name: "legacy-deployment"}, Revision: 1, StableRevision: 0}}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(b, rel).WithStatusSubresource(b).Build()
	store := &memStore{recs: map[string]history.Record{}}
	h := &Historian{Client: c, Reader: c, Store: store, Clock: clocktesting.NewFakePassiveClock(time.Now())}
	req := ctrl.Request{}
	req.Namespace, req.Name = "a", "legacy-deployment"
	step := func(mut func(*workv1alpha1.ResourceBinding)) {
		cur := &workv1alpha1.ResourceBinding{}
		_ = c.Get(ctx, req.NamespacedName, cur)
		mut(cur)
		cur.Generation++
		st := cur.Status.DeepCopy()
		if err := c.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		cur.Status = *st
		if err := c.Status().Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if _, err := h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
			t.Fatal(err)
		}
	}
	step(func(*workv1alpha1.ResourceBinding) {})
	step(func(b *workv1alpha1.ResourceBinding) {
		b.Spec.UnmanagedClusters = []string{"east"}
		b.Status.Clusters = nil
	})
	step(func(*workv1alpha1.ResourceBinding) {}) // a pass with nothing new must not forget the removal
	step(func(b *workv1alpha1.ResourceBinding) {
		b.Spec.UnmanagedClusters = nil
		b.Status.Clusters = []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy}}
	})
	var got []string
	for _, r := range store.recs {
		got = append(got, fmt.Sprintf("%s %d->%d %s %s", r.Cluster, r.FromRevision, r.ToRevision, r.Cause, r.Outcome))
	}
	slices.Sort(got)
	want := []string{"east 0->1 adoption healthy", "east 0->1 manage healthy", "east 1->0 unmanage removed"}
	if !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
}
