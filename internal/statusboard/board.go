// Package statusboard holds, in the controller-manager's memory, each binding's newest status
// as the binding controller worked it out, whether or not it is written yet. The binding
// controller writes a workload's progress (applied, pods coming up) to the binding only every
// few seconds, since each such write costs the control plane; readers in the same process that
// act on each step read it here instead: history (a cluster that ran a workload and was lost
// between two writes still ran it) and the release controller (a wave's clusters turning
// healthy move the release on without waiting for the write).
//
// The binding controller is the board's one writer. The board holds nothing across restarts:
// until the binding controller's first pass over a binding, readers get the stored status and
// are told it is not held.
package statusboard

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// Board holds the newest status of each binding. The zero value is ready; a nil *Board holds
// nothing and reads every binding's stored status.
type Board struct {
	mu      sync.Mutex
	newest  map[types.NamespacedName]held
	readers []reader
}

type held struct {
	uid types.UID
	// status is nil when it is the binding's stored status, which readers then get: most
	// bindings are written and settled, and a copy of each would double what the cache holds.
	status *workv1alpha1.ResourceBindingStatus // never modified once held
	// steps is a digest of status.Clusters without the members' own status objects: what
	// readers act on.
	steps [sha256.Size]byte
}

type reader struct {
	queue      workqueue.TypedRateLimitingInterface[reconcile.Request]
	toRequests func(workv1alpha1.Binding) []reconcile.Request
}

// Of is the newest status of b and whether the board holds it. When it does not (nothing
// worked out for b in this process yet, or the entry is for an older binding of that name) it
// is b's stored status. Callers must not modify it.
func (s *Board) Of(b workv1alpha1.Binding) (*workv1alpha1.ResourceBindingStatus, bool) {
	stored := b.BindingStatus()
	if s == nil {
		return stored, false
	}
	s.mu.Lock()
	h, ok := s.newest[client.ObjectKeyFromObject(b)]
	s.mu.Unlock()
	switch {
	case !ok || h.uid != b.GetUID():
		return stored, false
	case h.status == nil: // worked out as stored
		return stored, true
	case h.status.ObservedGeneration < stored.ObservedGeneration:
		return stored, false
	}
	return h.status, true
}

// Source feeds a controller the requests toRequests makes of each binding whose clusters'
// status changed on the board (the members' own status objects aside). Adding to a work queue
// never blocks and merges repeats, so nothing is dropped and a slow reader slows no writer.
func (s *Board) Source(toRequests func(workv1alpha1.Binding) []reconcile.Request) source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		s.mu.Lock()
		s.readers = append(s.readers, reader{queue: q, toRequests: toRequests})
		s.mu.Unlock()
		return nil
	})
}

// Put holds the status worked out for b, the binding as stored, and wakes the readers when a
// cluster's step changed. The binding controller is its one caller outside tests.
func (s *Board) Put(b workv1alpha1.Binding, status *workv1alpha1.ResourceBindingStatus) {
	if s == nil {
		return
	}
	h := held{uid: b.GetUID(), steps: stepsOf(status)}
	if !apiequality.Semantic.DeepEqual(status, b.BindingStatus()) {
		h.status = status.DeepCopy()
	}
	key := client.ObjectKeyFromObject(b)
	s.mu.Lock()
	old, had := s.newest[key]
	if s.newest == nil {
		s.newest = map[types.NamespacedName]held{}
	}
	s.newest[key] = h
	readers := s.readers
	s.mu.Unlock()
	if had && old.uid == h.uid && old.steps == h.steps {
		return
	}
	for _, r := range readers {
		for _, req := range r.toRequests(b) {
			r.queue.Add(req)
		}
	}
}

// Forget drops what is held for a binding that is gone.
func (s *Board) Forget(key types.NamespacedName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.newest, key)
	s.mu.Unlock()
}

// stepsOf digests each cluster's step (its status without the member's own status object,
// the one raw field, so the encoding cannot fail).
func stepsOf(status *workv1alpha1.ResourceBindingStatus) [sha256.Size]byte {
	steps := make([]workv1alpha1.ClusterStatus, len(status.Clusters))
	for i, cs := range status.Clusters {
		cs.Status = nil
		steps[i] = cs
	}
	data, _ := json.Marshal(steps)
	return sha256.Sum256(data)
}
