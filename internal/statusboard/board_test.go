package statusboard

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// The newest status worked out is read before it is written, but never for another binding of
// the same name, nor over a newer stored one; readers are woken only when a cluster's step
// changed (not its members' status counters), with the requests they make of the binding.
func TestBoardNewestAndWakes(t *testing.T) {
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment", UID: "u1", Generation: 2},
		Status: workv1alpha1.ResourceBindingStatus{ObservedGeneration: 1}}
	s := &Board{}
	if got, held := s.Of(b); held || got != b.BindingStatus() {
		t.Fatalf("nothing worked out yet: got %+v held %v, want the stored status, not held", got, held)
	}
	namespaced := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	clusterScoped := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer namespaced.ShutDown()
	defer clusterScoped.ShutDown()
	scoped := func(wantNamespaced bool) func(workv1alpha1.Binding) []reconcile.Request {
		return func(b workv1alpha1.Binding) []reconcile.Request {
			if (b.GetNamespace() != "") != wantNamespaced {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(b)}}
		}
	}
	ctx := context.Background()
	if err := s.Source(scoped(true)).Start(ctx, namespaced); err != nil {
		t.Fatal(err)
	}
	if err := s.Source(scoped(false)).Start(ctx, clusterScoped); err != nil {
		t.Fatal(err)
	}

	worked := &workv1alpha1.ResourceBindingStatus{ObservedGeneration: 2, Clusters: []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true,
		Status: &runtime.RawExtension{Raw: []byte(`{"replicas":3}`)}}}}
	s.Put(b, worked)
	worked.Clusters[0].Cluster = "changed by the caller after Put"
	if got, held := s.Of(b); !held || len(got.Clusters) != 1 || got.Clusters[0].Cluster != "east" {
		t.Fatalf("worked out, not written: got %+v held %v, want east applied, held", got, held)
	}
	if namespaced.Len() != 1 || clusterScoped.Len() != 0 {
		t.Fatalf("after a new cluster status: queued %d namespaced, %d cluster-scoped; want 1, 0", namespaced.Len(), clusterScoped.Len())
	}
	req, _ := namespaced.Get()
	namespaced.Done(req)
	if req.Namespace != "shop" || req.Name != "web-deployment" {
		t.Fatalf("queued %v, want shop/web-deployment", req)
	}

	// Conditions or the members' counters alone changing wake nobody.
	s.Put(b, &workv1alpha1.ResourceBindingStatus{ObservedGeneration: 2, Clusters: []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true,
		Status: &runtime.RawExtension{Raw: []byte(`{"replicas":3,"readyReplicas":1}`)}}},
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse}}})
	if namespaced.Len() != 0 {
		t.Fatalf("after a condition and counter change alone: %d queued, want 0", namespaced.Len())
	}
	s.Put(b, &workv1alpha1.ResourceBindingStatus{ObservedGeneration: 2, Clusters: []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true, Health: workv1alpha1.HealthHealthy}}})
	if namespaced.Len() != 1 {
		t.Fatalf("after east turned healthy: %d queued, want 1", namespaced.Len())
	}

	stored := b.DeepCopy()
	stored.Status.ObservedGeneration = 3
	if got, held := s.Of(stored); held || got != stored.BindingStatus() {
		t.Fatalf("the stored status is newer: got %+v held %v, want it, not held", got, held)
	}
	other := b.DeepCopy()
	other.UID = "u2"
	if got, held := s.Of(other); held || got != other.BindingStatus() {
		t.Fatalf("a new binding of the same name: got %+v held %v, want its stored status", got, held)
	}
	s.Forget(client.ObjectKeyFromObject(b))
	if got, held := s.Of(b); held || got != b.BindingStatus() {
		t.Fatalf("forgotten: got %+v held %v, want the stored status", got, held)
	}

	cb := &workv1alpha1.ClusterResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader-clusterrole", UID: "u3"}}
	s.Put(cb, &workv1alpha1.ResourceBindingStatus{Clusters: []workv1alpha1.ClusterStatus{{Cluster: "east"}}})
	if clusterScoped.Len() != 1 {
		t.Fatalf("a cluster-scoped binding: queued %d cluster-scoped, want 1", clusterScoped.Len())
	}

	var none *Board // a controller without a board holds nothing and reads the stored status
	none.Put(b, worked)
	if got, held := none.Of(b); held || got != b.BindingStatus() {
		t.Fatalf("nil board: got %+v held %v, want the stored status", got, held)
	}
}

// A status worked out as it is stored is read from the binding, not held twice, and a newer
// stored one is then what readers get.
func TestBoardHoldsNoCopyOfAWrittenStatus(t *testing.T) {
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment", UID: "u1", Generation: 2},
		Status: workv1alpha1.ResourceBindingStatus{ObservedGeneration: 2, Clusters: []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true}}}}
	s := &Board{}
	s.Put(b, b.Status.DeepCopy())
	if h := s.newest[client.ObjectKeyFromObject(b)]; h.status != nil {
		t.Fatalf("the board holds a copy of the stored status: %+v", h.status)
	}
	if got, held := s.Of(b); !held || got != b.BindingStatus() {
		t.Fatalf("worked out as stored: got %+v held %v, want the stored status, held", got, held)
	}
	newer := b.DeepCopy()
	newer.Status.Clusters[0].Health = workv1alpha1.HealthHealthy
	if got, held := s.Of(newer); !held || got != newer.BindingStatus() || got.Clusters[0].Health != workv1alpha1.HealthHealthy {
		t.Fatalf("the binding's stored status moved on: got %+v held %v, want it", got, held)
	}
}
