package binding

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// The newest status worked out is read before it is written, but never for another binding of
// the same name, nor over a newer stored one; a reader is woken only when a cluster's status
// changed, and a binding's scope picks its reader.
func TestStatusesNewestAndWakes(t *testing.T) {
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment", UID: "u1", Generation: 2},
		Status: workv1alpha1.ResourceBindingStatus{ObservedGeneration: 1}}
	s := &Statuses{}
	if got := s.Of(b); got != b.BindingStatus() {
		t.Fatalf("nothing worked out yet: got %+v, want the stored status", got)
	}
	namespaced := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	clusterScoped := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer namespaced.ShutDown()
	defer clusterScoped.ShutDown()
	ctx := context.Background()
	if err := s.Source(true).Start(ctx, namespaced); err != nil {
		t.Fatal(err)
	}
	if err := s.Source(false).Start(ctx, clusterScoped); err != nil {
		t.Fatal(err)
	}

	worked := &workv1alpha1.ResourceBindingStatus{ObservedGeneration: 2, Clusters: []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true}}}
	s.Put(b, worked)
	worked.Clusters[0].Cluster = "changed by the caller after Put"
	if got := s.Of(b); len(got.Clusters) != 1 || got.Clusters[0].Cluster != "east" {
		t.Fatalf("worked out, not written: got %+v, want east applied", got)
	}
	if namespaced.Len() != 1 || clusterScoped.Len() != 0 {
		t.Fatalf("after a new cluster status: queued %d namespaced, %d cluster-scoped; want 1, 0", namespaced.Len(), clusterScoped.Len())
	}
	req, _ := namespaced.Get()
	namespaced.Done(req)
	if req.Namespace != "shop" || req.Name != "web-deployment" {
		t.Fatalf("queued %v, want shop/web-deployment", req)
	}

	// Conditions alone changing wake nobody: history reads the clusters.
	s.Put(b, &workv1alpha1.ResourceBindingStatus{ObservedGeneration: 2, Clusters: []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true}},
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse}}})
	if namespaced.Len() != 0 {
		t.Fatalf("after a condition change alone: %d queued, want 0", namespaced.Len())
	}

	stored := b.DeepCopy()
	stored.Status.ObservedGeneration = 3
	if got := s.Of(stored); got != stored.BindingStatus() {
		t.Fatalf("the stored status is newer: got %+v, want it", got)
	}
	other := b.DeepCopy()
	other.UID = "u2"
	if got := s.Of(other); got != other.BindingStatus() {
		t.Fatalf("a new binding of the same name: got %+v, want its stored status", got)
	}
	s.forget(client.ObjectKeyFromObject(b))
	if got := s.Of(b); got != b.BindingStatus() {
		t.Fatalf("forgotten: got %+v, want the stored status", got)
	}

	cb := &workv1alpha1.ClusterResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader-clusterrole", UID: "u3"}}
	s.Put(cb, &workv1alpha1.ResourceBindingStatus{Clusters: []workv1alpha1.ClusterStatus{{Cluster: "east"}}})
	if namespaced.Len() != 0 || clusterScoped.Len() != 1 {
		t.Fatalf("a cluster-scoped binding: queued %d namespaced, %d cluster-scoped; want 0, 1", namespaced.Len(), clusterScoped.Len())
	}

	var none *Statuses // a controller without Statuses keeps none and reads the stored status
	none.Put(b, worked)
	if got := none.Of(b); got != b.BindingStatus() {
		t.Fatalf("nil Statuses: got %+v, want the stored status", got)
	}
}
