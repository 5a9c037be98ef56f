package binding

import (
	"context"
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// Statuses holds, for each binding, the newest status the binding controller worked out,
// whether or not it is written yet: a workload on its way waits up to progressWriteInterval
// before its binding's status is written, and a reader in this process that must not miss a
// step (history: a cluster lost seconds after its rollout still ran it) reads it here.
// The binding controller is its only writer; it holds nothing across restarts, and Of then
// falls back to the stored status.
type Statuses struct {
	mu      sync.Mutex
	newest  map[types.NamespacedName]computedStatus
	readers []statusReader
}

type computedStatus struct {
	uid    types.UID
	status *workv1alpha1.ResourceBindingStatus // never modified once stored
}

type statusReader struct {
	queue      workqueue.TypedRateLimitingInterface[reconcile.Request]
	namespaced bool
}

// Of is the newest status of b: the one worked out in this process when it is for this
// binding and at least as recent as the stored one, else the stored one. Callers must not
// modify it.
func (s *Statuses) Of(b workv1alpha1.Binding) *workv1alpha1.ResourceBindingStatus {
	stored := b.BindingStatus()
	if s == nil {
		return stored
	}
	s.mu.Lock()
	c, ok := s.newest[client.ObjectKeyFromObject(b)]
	s.mu.Unlock()
	if !ok || c.uid != b.GetUID() || c.status.ObservedGeneration < stored.ObservedGeneration {
		return stored
	}
	return c.status
}

// Source enqueues a binding of the given scope each time its clusters' status changes here,
// written or not. Adding to a work queue never blocks and merges repeats, so nothing is
// dropped and a slow reader slows no writer.
func (s *Statuses) Source(namespaced bool) source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		s.mu.Lock()
		s.readers = append(s.readers, statusReader{queue: q, namespaced: namespaced})
		s.mu.Unlock()
		return nil
	})
}

// Put records the status worked out for b and wakes the readers when its clusters changed.
// The binding controller is its one caller outside tests.
func (s *Statuses) Put(b workv1alpha1.Binding, status *workv1alpha1.ResourceBindingStatus) {
	if s == nil {
		return
	}
	key := client.ObjectKeyFromObject(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.newest[key]
	if s.newest == nil {
		s.newest = map[types.NamespacedName]computedStatus{}
	}
	s.newest[key] = computedStatus{uid: b.GetUID(), status: status.DeepCopy()}
	if had && old.uid == b.GetUID() && apiequality.Semantic.DeepEqual(old.status.Clusters, status.Clusters) {
		return
	}
	for _, r := range s.readers {
		if r.namespaced == (key.Namespace != "") {
			r.queue.Add(reconcile.Request{NamespacedName: key})
		}
	}
}

// forget drops what is held for a binding: it is gone, or its status was written elsewhere.
func (s *Statuses) forget(key types.NamespacedName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.newest, key)
	s.mu.Unlock()
}
