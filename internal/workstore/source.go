package workstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

type changeKind int

const (
	created changeKind = iota
	updated
	deleted
)

// change is one write as the store saw it. before and now are stored objects, shared and never
// modified; subscribers copy them before handing them out.
type change struct {
	kind        changeKind
	before, now *workv1alpha1.Work
	initial     bool
	// forgotten: a mirror dropped the Work (see Forget); to a controller it is a deletion.
	forgotten bool
}

// subscriber is one started source's unbounded FIFO: writers append under its own lock and
// never wait for the handler, so no event is dropped and no write is slowed by a slow reader.
type subscriber struct {
	mu      sync.Mutex
	pending []change
	wake    chan struct{}
}

func (sub *subscriber) push(c change) {
	sub.mu.Lock()
	sub.pending = append(sub.pending, c)
	sub.mu.Unlock()
	select {
	case sub.wake <- struct{}{}:
	default: // a wake-up is already due; the reader takes everything pending
	}
}

func (sub *subscriber) take() []change {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	taken := sub.pending
	sub.pending = nil
	return taken
}

// publish hands a change to every subscriber in write order. The caller holds s.mu.
func (s *Store) publish(c change) {
	for sub := range s.subscribers {
		sub.push(c)
	}
}

// Source returns a source for a controller (WatchesRawSource): when started it delivers a
// Create for every stored Work, then every write, in order, to h, filtered by preds. Each call
// returns a source that can be started once. The events carry the stored Works: h and preds
// must not change them.
func (s *Store) Source(h handler.EventHandler, preds ...predicate.Predicate) source.Source {
	return &workSource{store: s, handler: h, predicates: preds, synced: make(chan struct{})}
}

type workSource struct {
	store      *Store
	handler    handler.EventHandler
	predicates []predicate.Predicate
	started    atomic.Bool
	synced     chan struct{}
}

var _ source.SyncingSource = &workSource{}

func (src *workSource) String() string { return "workstore source of Works" }

// Start subscribes and snapshots the stored Works under the store's lock, so no write falls
// between the initial Creates and the later events.
func (src *workSource) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	if !src.started.CompareAndSwap(false, true) {
		return errors.New("workstore: a Work source can be started once")
	}
	sub := &subscriber{wake: make(chan struct{}, 1)}
	src.store.mu.Lock()
	initial := src.store.sorted()
	src.store.subscribers[sub] = struct{}{}
	src.store.mu.Unlock()
	go src.run(ctx, queue, sub, initial)
	return nil
}

// WaitForSync returns once the initial Creates are with the handler, so the controller's workers
// start with every stored Work queued, as they would after an informer's sync.
func (src *workSource) WaitForSync(ctx context.Context) error {
	select {
	case <-src.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (src *workSource) run(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request], sub *subscriber, initial []*workv1alpha1.Work) {
	defer src.store.unsubscribe(sub)
	for _, w := range initial {
		if ctx.Err() != nil {
			return
		}
		src.deliver(ctx, queue, change{kind: created, now: w, initial: true})
	}
	close(src.synced)
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.wake:
		}
		for _, c := range sub.take() {
			if ctx.Err() != nil {
				return
			}
			src.deliver(ctx, queue, c)
		}
	}
}

func (s *Store) unsubscribe(sub *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subscribers, sub)
}

// deliver hands one change to the handler. The events carry the stored Works themselves, as an
// informer's events carry its cache's objects: a stored Work is never modified, and handlers and
// predicates only read (copying each Work for each controller was 200 MiB of garbage while 5000
// member objects were placed).
func (src *workSource) deliver(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request], c change) {
	switch c.kind {
	case created:
		e := event.CreateEvent{Object: c.now, IsInInitialList: c.initial}
		for _, p := range src.predicates {
			if !p.Create(e) {
				return
			}
		}
		src.handler.Create(ctx, e, queue)
	case updated:
		e := event.UpdateEvent{ObjectOld: c.before, ObjectNew: c.now}
		for _, p := range src.predicates {
			if !p.Update(e) {
				return
			}
		}
		src.handler.Update(ctx, e, queue)
	case deleted:
		e := event.DeleteEvent{Object: c.now}
		for _, p := range src.predicates {
			if !p.Delete(e) {
				return
			}
		}
		src.handler.Delete(ctx, e, queue)
	}
}
