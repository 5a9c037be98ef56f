// Package audit receives the control plane's audit events (the kube-apiserver's audit webhook
// backend, batched) and remembers, per object, the users who last wrote it. History asks it
// who is behind a change: the user who edited a template, a policy or a Cluster, or who
// promoted or aborted a Release. Objects do not record their users, and managedFields name
// only the tool (kubectl, a CI job), so the audit stream is the one place the control plane
// tells.
//
// The log lives in memory, bounded by the number of objects it remembers; a restart forgets
// it, and history then falls back to the field manager. It never writes anywhere and never
// answers who read what. The audit policy it expects is policy.yaml in this package (writes
// only, at Metadata level, without the control plane's own components).
package audit

import (
	"container/list"
	_ "embed"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Policy is the audit policy the control plane's kube-apiserver should run with.
//
//go:embed policy.yaml
var Policy []byte

// Path is where the webhook backend posts its batches.
const Path = "/audit/v1/events"

// The heartbeat the policy audits: a get of this ConfigMap (it need not exist) by the
// controller-manager. Once its event arrives, so have the writes made before it.
const (
	HeartbeatNamespace = "flotilla-system"
	HeartbeatName      = "flotilla-audit-heartbeat"
)

// writesPerObject is how many writes of one object are kept: enough to find the write behind
// a revision while newer writes pile up during a release.
const writesPerObject = 16

// Ref names an object as audit events do: API group, plural resource, namespace and name.
type Ref struct {
	Group, Resource, Namespace, Name string
}

// Write is one successful write of an object.
type Write struct {
	User string
	Verb string
	Time time.Time
}

// Log keeps the newest writes of the most recently written objects.
type Log struct {
	max int

	mu        sync.Mutex
	objects   map[Ref]*list.Element // of *entry, most recent at the front
	lru       *list.List
	watermark time.Time // the newest completed request the stream delivered
}

type entry struct {
	ref    Ref
	writes []Write // oldest first
}

var eventsReceived = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "flotilla_audit_events_total",
	Help: "Audit events received from the control plane, by whether they were kept as writes.",
}, []string{"result"})

func init() { metrics.Registry.MustRegister(eventsReceived) }

// NewLog remembers the writes of at most maxObjects objects.
func NewLog(maxObjects int) *Log {
	return &Log{max: max(maxObjects, 1), objects: map[Ref]*list.Element{}, lru: list.New()}
}

// Add keeps an event if it is a completed, successful write of a named object. Any completed
// request (the heartbeat too) moves the watermark.
func (l *Log) Add(ev *auditv1.Event) bool {
	if ev.Stage == auditv1.StageResponseComplete {
		l.mu.Lock()
		if t := ev.StageTimestamp.Time; t.After(l.watermark) {
			l.watermark = t
		}
		l.mu.Unlock()
	}
	w, ref, ok := writeOf(ev)
	if !ok {
		eventsReceived.WithLabelValues("ignored").Inc()
		return false
	}
	eventsReceived.WithLabelValues("kept").Inc()
	l.mu.Lock()
	defer l.mu.Unlock()
	el, found := l.objects[ref]
	if !found {
		el = l.lru.PushFront(&entry{ref: ref})
		l.objects[ref] = el
		for l.lru.Len() > l.max {
			oldest := l.lru.Back()
			delete(l.objects, oldest.Value.(*entry).ref)
			l.lru.Remove(oldest)
		}
	} else {
		l.lru.MoveToFront(el)
	}
	e := el.Value.(*entry)
	// Batches can arrive out of order; keep the writes sorted by time.
	i, _ := slices.BinarySearchFunc(e.writes, w.Time, func(x Write, t time.Time) int { return x.Time.Compare(t) })
	e.writes = slices.Insert(e.writes, i, w)
	if len(e.writes) > writesPerObject {
		e.writes = e.writes[len(e.writes)-writesPerObject:]
	}
	return true
}

// CaughtUp tells whether the stream has delivered a request completed after t, so every
// write before t is known (batches are sent in order; two in flight at once may, rarely,
// arrive swapped).
func (l *Log) CaughtUp(t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.watermark.After(t)
}

// Last is the newest write of ref at or before notAfter (zero: any time).
func (l *Log) Last(ref Ref, notAfter time.Time) (Write, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.objects[ref]
	if !ok {
		return Write{}, false
	}
	ws := el.Value.(*entry).writes
	for i := len(ws) - 1; i >= 0; i-- {
		if notAfter.IsZero() || !ws[i].Time.After(notAfter) {
			return ws[i], true
		}
	}
	return Write{}, false
}

// writeOf reads the user, verb and time of a successful write of a named object.
func writeOf(ev *auditv1.Event) (Write, Ref, bool) {
	if ev.Stage != auditv1.StageResponseComplete || ev.ObjectRef == nil || ev.ObjectRef.Name == "" || ev.ObjectRef.Subresource != "" {
		return Write{}, Ref{}, false
	}
	switch ev.Verb {
	case "create", "update", "patch", "delete":
	default:
		return Write{}, Ref{}, false
	}
	if ev.ResponseStatus != nil && (ev.ResponseStatus.Code < 200 || ev.ResponseStatus.Code > 299) {
		return Write{}, Ref{}, false
	}
	user := ev.User.Username
	if ev.ImpersonatedUser != nil && ev.ImpersonatedUser.Username != "" {
		user = ev.ImpersonatedUser.Username // who the write was made as
	}
	if user == "" {
		return Write{}, Ref{}, false
	}
	at := ev.StageTimestamp.Time
	if at.IsZero() {
		at = ev.RequestReceivedTimestamp.Time
	}
	o := ev.ObjectRef
	return Write{User: user, Verb: ev.Verb, Time: at}, Ref{Group: o.APIGroup, Resource: o.Resource, Namespace: o.Namespace, Name: o.Name}, true
}

// Handler receives the webhook backend's batches (an audit.k8s.io/v1 EventList as JSON). It
// takes only requests whose TLS client certificate, verified against the server's client CA,
// has one of the given common names: audit events decide who history names, so no user may
// post them.
func (l *Log) Handler(allowedNames ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST an audit.k8s.io/v1 EventList", http.StatusMethodNotAllowed)
			return
		}
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || !slices.Contains(allowedNames, r.TLS.PeerCertificates[0].Subject.CommonName) {
			http.Error(w, "audit events are taken only from the control plane's audit webhook client certificate", http.StatusForbidden)
			return
		}
		var events auditv1.EventList
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&events); err != nil {
			http.Error(w, "not an audit.k8s.io/v1 EventList: "+err.Error(), http.StatusBadRequest)
			return
		}
		for i := range events.Items {
			l.Add(&events.Items[i])
		}
		w.WriteHeader(http.StatusOK)
	})
}
