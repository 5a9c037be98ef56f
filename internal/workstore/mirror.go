package workstore

import (
	"context"
	"slices"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// A sharded controller-manager keeps the Works in the leader's store; every replica applies
// those of its clusters from a mirror store fed by Follow, and reports what its executor
// wrote (status and finalizers, the only fields the executor writes) back with Report.

// EventType says what happened to a Work in Follow.
type EventType string

const (
	Added    EventType = "Added"
	Modified EventType = "Modified"
	Deleted  EventType = "Deleted"
	// Synced follows the Added events of the Works stored when Follow started.
	Synced EventType = "Synced"
	// Forgotten: a mirror dropped the Work without running its finalizers (another replica
	// applies it now); nothing happened to it at its source.
	Forgotten EventType = "Forgotten"
)

// Event is one change Follow delivers. Work is shared with the store: never modified.
type Event struct {
	Type EventType          `json:"type"`
	Work *workv1alpha1.Work `json:"work,omitempty"`
	// Source names the store on Synced: another name after a restart or a new leader.
	Source string `json:"source,omitempty"`
}

// Follow calls fn with every stored Work that keep selects (as Added), then Synced, then every
// change to such Works in write order, until ctx ends or fn fails.
func (s *Store) Follow(ctx context.Context, keep func(*workv1alpha1.Work) bool, fn func(Event) error) error {
	sub := &subscriber{wake: make(chan struct{}, 1)}
	s.mu.Lock()
	initial := s.sorted()
	s.subscribers[sub] = struct{}{}
	s.mu.Unlock()
	defer s.unsubscribe(sub)
	for _, w := range initial {
		if keep(w) {
			if err := fn(Event{Type: Added, Work: w}); err != nil {
				return err
			}
		}
	}
	if err := fn(Event{Type: Synced, Source: s.id}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sub.wake:
		}
		for _, c := range sub.take() {
			if !keep(c.now) {
				continue
			}
			e := Event{Work: c.now}
			switch {
			case c.kind == created:
				e.Type = Added
			case c.kind == updated:
				e.Type = Modified
			case c.forgotten:
				e.Type = Forgotten
			default:
				e.Type = Deleted
			}
			if err := fn(e); err != nil {
				return err
			}
		}
	}
}

// Snapshot is every stored Work, shared: never modified.
func (s *Store) Snapshot() []*workv1alpha1.Work {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sorted()
}

// Mirror stores w, a Work from the leader's store, as this store's copy. A Work this store
// holds with the same UID keeps its own status and finalizers (this replica's executor writes
// them); a new one, or one of another UID (a new leader rendered it again), is taken whole.
// The copy shares w's spec, so a leader mirroring its own store holds each manifest once: w is
// a stored Work or one just decoded, and nobody modifies it.
func (s *Store) Mirror(w *workv1alpha1.Work) error {
	next := &workv1alpha1.Work{TypeMeta: metav1.TypeMeta{APIVersion: workGVK.GroupVersion().String(), Kind: workGVK.Kind},
		ObjectMeta: *w.ObjectMeta.DeepCopy(), Spec: w.Spec, Status: *w.Status.DeepCopy()}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := client.ObjectKeyFromObject(next)
	old, ok := s.works[key]
	if !ok || old.UID != next.UID {
		if next.DeletionTimestamp != nil && len(next.Finalizers) == 0 {
			return nil
		}
		s.version++
		next.ResourceVersion = s.versionString()
		s.put(key, next)
		s.publish(change{kind: created, now: next})
		return nil
	}
	next.Status = old.Status // stored Works are never modified: shared
	next.Finalizers = slices.Clone(old.Finalizers)
	next.ResourceVersion = old.ResourceVersion
	if old.DeletionTimestamp != nil && next.DeletionTimestamp == nil {
		next.DeletionTimestamp, next.DeletionGracePeriodSeconds = old.DeletionTimestamp, old.DeletionGracePeriodSeconds
	}
	s.commit(old, next, false)
	return nil
}

// MirrorDeleted carries the deletion of a Work at the leader into this store: a Work with
// finalizers is marked deleting (this replica's executor carries out its deletion policy),
// one without is removed.
func (s *Store) MirrorDeleted(key types.NamespacedName, uid types.UID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.works[key]; !ok || old.UID != uid {
		return nil
	}
	err := s.deleteLocked(key, &client.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Forget drops the Works that keep does not select, without running their finalizers: their
// cluster moved to another replica, or the leader's store no longer holds them (a new leader
// renders them again). Followers see Forgotten.
func (s *Store) Forget(keep func(*workv1alpha1.Work) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, w := range s.sorted() {
		if keep(w) {
			continue
		}
		s.version++
		gone := w.DeepCopy()
		gone.ResourceVersion = s.versionString()
		s.remove(client.ObjectKeyFromObject(w))
		s.publish(change{kind: deleted, now: gone, forgotten: true})
		n++
	}
	return n
}

// Report is what a replica's executor wrote to a Work: its status and finalizers.
type Report struct {
	Namespace  string                  `json:"namespace"`
	Name       string                  `json:"name"`
	UID        types.UID               `json:"uid"`
	Finalizers []string                `json:"finalizers,omitempty"`
	Status     workv1alpha1.WorkStatus `json:"status"`
}

// ReportOf is what w, a stored Work (never modified), carries back to the leader. The report
// shares w's status: it is read and sent, never changed.
func ReportOf(w *workv1alpha1.Work) Report {
	return Report{Namespace: w.Namespace, Name: w.Name, UID: w.UID, Finalizers: slices.Clone(w.Finalizers), Status: w.Status}
}

// Apply takes a replica's report: the stored Work of that UID gets its status and finalizers;
// a Work being deleted that loses its last finalizer goes. A report of a Work that is gone or
// was rendered again (another UID) is NotFound: the replica's copy is out of date.
// The report's status is kept as given, shared: a report is handed over, decoded from the wire
// or made by ReportOf from a stored Work, and never modified (a leader that applies its own
// clusters then holds their status once, not once per store).
func (s *Store) Apply(r Report) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := types.NamespacedName{Namespace: r.Namespace, Name: r.Name}
	old, ok := s.works[key]
	if !ok || old.UID != r.UID {
		return apierrors.NewNotFound(workResource, r.Name)
	}
	next := withStatus(old, r.Status)
	if old.DeletionTimestamp == nil {
		next.Finalizers = slices.Clone(r.Finalizers)
	} else {
		// Deleting: finalizers may only go.
		next.Finalizers = slices.DeleteFunc(slices.Clone(old.Finalizers), func(f string) bool { return !slices.Contains(r.Finalizers, f) })
	}
	if len(next.Finalizers) == 0 {
		next.Finalizers = nil
	}
	s.commit(old, next, false)
	return nil
}

func (s *Store) versionString() string { return strconv.FormatUint(s.version, 10) }
