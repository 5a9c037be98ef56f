package kube

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/reference"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// eventRepeatWindow is how long an event with the same object, reason and note is not
// written again.
const eventRepeatWindow = 10 * time.Minute

// maxEventNote is what the API takes of an event's note.
const maxEventNote = 1024

// DistinctRecorder records events in which each different note is an event of its own.
// client-go's recorder folds events of one object with the same reason and action into a
// series that keeps the first note, so a second commit applied, another cluster corrected or
// a new reason to be unschedulable would read as the first one for minutes. The same note
// again within eventRepeatWindow is not written again. Writes happen off the caller's path,
// in order; when the backlog is full, events are dropped (and logged), as client-go does.
type DistinctRecorder struct {
	client     client.Client
	scheme     *runtime.Scheme
	controller string
	instance   string
	backlog    chan *eventsv1.Event

	mu     sync.Mutex
	recent map[[32]byte]time.Time
}

// NewDistinctRecorder returns a recorder reporting as controller; add it to the manager so
// that it writes.
func NewDistinctRecorder(c client.Client, scheme *runtime.Scheme, controller string) *DistinctRecorder {
	host, _ := os.Hostname()
	return &DistinctRecorder{client: c, scheme: scheme, controller: controller, instance: controller + "-" + host,
		backlog: make(chan *eventsv1.Event, 1024), recent: map[[32]byte]time.Time{}}
}

// Eventf records an event regarding an object (and optionally a related one).
func (r *DistinctRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	ref, err := reference.GetReference(r.scheme, regarding)
	if err != nil {
		ctrl.Log.WithName("events").Error(err, "No reference for an event", "reason", reason)
		return
	}
	msg := fmt.Sprintf(note, args...)
	if len(msg) > maxEventNote {
		msg = msg[:maxEventNote-3] + "..."
	}
	if !r.fresh(ref, eventtype, reason, msg) {
		return
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := metav1.NowMicro()
	ev := &eventsv1.Event{
		// Named as client-go names events: the object's name and the time.
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: ns},
		EventTime:  now, ReportingController: r.controller, ReportingInstance: r.instance,
		Action: action, Reason: reason, Regarding: *ref, Note: msg, Type: eventtype,
	}
	if related != nil {
		if rel, err := reference.GetReference(r.scheme, related); err == nil {
			ev.Related = rel
		}
	}
	select {
	case r.backlog <- ev:
	default:
		ctrl.Log.WithName("events").Info("Event backlog full; event dropped", "regarding", ref.Kind+" "+ref.Namespace+"/"+ref.Name, "reason", reason)
	}
}

// fresh says whether the note is new for the object and reason, and remembers it.
func (r *DistinctRecorder) fresh(ref *corev1.ObjectReference, eventtype, reason, note string) bool {
	key := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%s", ref.UID, ref.Kind, ref.Namespace, ref.Name, eventtype, reason, note))
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if at, ok := r.recent[key]; ok && now.Sub(at) < eventRepeatWindow {
		return false
	}
	if len(r.recent) >= 4096 {
		for k, at := range r.recent {
			if now.Sub(at) >= eventRepeatWindow {
				delete(r.recent, k)
			}
		}
	}
	r.recent[key] = now
	return true
}

// NeedLeaderElection: every replica records its controllers' events (a sharded replica's
// executor and cluster controller run without leading).
func (r *DistinctRecorder) NeedLeaderElection() bool { return false }

// Start writes the recorded events until ctx ends.
func (r *DistinctRecorder) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("events")
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-r.backlog:
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := r.client.Create(wctx, ev); err != nil {
				log.Error(err, "Writing an event", "regarding", ev.Regarding.Kind+" "+ev.Regarding.Namespace+"/"+ev.Regarding.Name, "reason", ev.Reason)
			}
			cancel()
		}
	}
}
