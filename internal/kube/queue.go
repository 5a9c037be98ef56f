package kube

import (
	"context"
	"sync"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// QueueSource feeds requests straight into a controller's work queue: it never drops one and
// never blocks the sender. The queue keeps one entry per request, so a burst of events for the
// same object costs one reconcile; requests sent before the controller starts wait in a set
// and are queued when it does. Use it instead of a buffered channel source, which must either
// block its sender or discard events once full.
type QueueSource[request comparable] struct {
	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[request]
	pending map[request]struct{}
}

// NewQueueSource returns a source to register with a controller (WatchesRawSource).
func NewQueueSource[request comparable]() *QueueSource[request] {
	return &QueueSource[request]{pending: map[request]struct{}{}}
}

// Add queues a request for the controller.
func (s *QueueSource[request]) Add(r request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queue == nil {
		s.pending[r] = struct{}{}
		return
	}
	s.queue.Add(r)
}

// Start hands the source its controller's queue (controller-runtime calls it once).
func (s *QueueSource[request]) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[request]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = q
	for r := range s.pending {
		q.Add(r)
	}
	s.pending = nil
	return nil
}

func (s *QueueSource[request]) String() string { return "queue source" }

var _ source.TypedSource[struct{}] = &QueueSource[struct{}]{}
