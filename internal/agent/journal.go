package agent

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/pull"
)

// journal keeps what happened at the edge (the executor's drift events), with the time it
// happened, until a heartbeat has delivered it: a disconnected agent sends it on reconnection.
// It holds at most maxJournal events; past that the oldest go and are counted.
type journal struct {
	mu      sync.Mutex
	events  []pull.EdgeEvent
	dropped int
	now     func() time.Time
}

const maxJournal = 1000

// Eventf records an event of a Work (events.EventRecorder).
func (j *journal) Eventf(regarding runtime.Object, _ runtime.Object, eventtype, reason, _ string, note string, args ...interface{}) {
	w, ok := regarding.(*workv1alpha1.Work)
	if !ok {
		return
	}
	now := time.Now
	if j.now != nil {
		now = j.now
	}
	e := pull.EdgeEvent{Time: now().UTC(), Type: eventtype, Reason: reason, Message: fmt.Sprintf(note, args...),
		WorkNamespace: w.Namespace, WorkName: w.Name}
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.events) >= maxJournal {
		j.events = j.events[1:]
		j.dropped++
	}
	j.events = append(j.events, e)
}

// pending returns up to n undelivered events, oldest first, and how many were dropped.
func (j *journal) pending(n int) ([]pull.EdgeEvent, int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]pull.EdgeEvent(nil), j.events[:min(n, len(j.events))]...), j.dropped
}

// delivered forgets the first n events and the dropped count reported with them.
func (j *journal) delivered(n, dropped int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = j.events[min(n, len(j.events)):]
	j.dropped -= dropped
}
