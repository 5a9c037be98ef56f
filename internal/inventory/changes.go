package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// Changed names an object that changed, for pages that show it: they read it again through
// the API. It carries no content, so the feed needs no authorization beyond the namespace.
type Changed struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// maxPending bounds what one slow subscriber holds; past it the subscriber is told to read
// everything again ("resync") rather than anything being dropped silently.
const maxPending = 4096

// Changes fans the manager's informer events out to every open feed. One informer per kind
// serves all subscribers, so a thousand open pages add no load to the control plane; a
// subscriber's changes are coalesced until it reads them, and the publisher never blocks.
type Changes struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	pending map[Changed]struct{}
	resync  bool
	wake    chan struct{}
}

// NewChanges returns an empty hub.
func NewChanges() *Changes { return &Changes{subs: map[*subscriber]struct{}{}} }

// Publish tells every subscriber that c changed.
func (h *Changes) Publish(c Changed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if len(s.pending) >= maxPending {
			s.resync = true
		} else {
			s.pending[c] = struct{}{}
		}
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Subscribers is how many feeds are open.
func (h *Changes) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

func (h *Changes) subscribe() *subscriber {
	s := &subscriber{pending: map[Changed]struct{}{}, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *Changes) unsubscribe(s *subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

func (h *Changes) take(s *subscriber) ([]Changed, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Changed, 0, len(s.pending))
	for c := range s.pending {
		out = append(out, c)
	}
	resync := s.resync
	s.pending, s.resync = map[Changed]struct{}{}, false
	return out, resync
}

// Feed publishes the changes of the kinds pages show, from the manager's informers (the
// ones its controllers already run: no new watch on the control plane).
func (h *Changes) Feed(ctx context.Context, informers cache.Informers) error {
	kinds := []struct {
		name string
		obj  client.Object
	}{
		{"Release", &rolloutv1alpha1.Release{}},
		{"AnalysisRun", &rolloutv1alpha1.AnalysisRun{}},
		{"ResourceBinding", &workv1alpha1.ResourceBinding{}},
		{"Cluster", &clusterv1alpha1.Cluster{}},
	}
	for _, k := range kinds {
		inf, err := informers.GetInformer(ctx, k.obj)
		if err != nil {
			return fmt.Errorf("informer of %s: %w", k.name, err)
		}
		publish := func(o any) {
			if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if co, ok := o.(client.Object); ok {
				h.Publish(Changed{Kind: k.name, Namespace: co.GetNamespace(), Name: co.GetName()})
			}
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: publish, DeleteFunc: publish,
			UpdateFunc: func(_, o any) { publish(o) },
		}); err != nil {
			return err
		}
	}
	return nil
}

// feedHeartbeat keeps idle feeds open through proxies; feedRescope is how often a feed
// asks again which namespaces its user may read (decisions are cached, see authorizer).
const (
	feedHeartbeat = 15 * time.Second
	feedRescope   = 30 * time.Second
	feedBatch     = 250 * time.Millisecond
)

// changes streams Changed events (server-sent events) for the namespaces the user may read,
// and Cluster changes to those who may list clusters.
func (s *Server) changes(w http.ResponseWriter, r *http.Request, u *User) {
	if s.Changes == nil {
		fail(w, http.StatusNotImplemented, "", "this server has no change feed")
		return
	}
	ctx := r.Context()
	scope, err := s.scope(ctx, u)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "", "authorizing with the control plane: %v", err)
		return
	}
	clusters, err := s.authz.allowed(ctx, u, access{verb: "list", group: clusterv1alpha1.GroupVersion.Group, resource: "clusters"})
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "", "authorizing with the control plane: %v", err)
		return
	}
	sub := s.Changes.subscribe()
	defer s.Changes.unsubscribe(sub)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // a feed outlives the server's read timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event, data string) error {
		_ = rc.SetWriteDeadline(time.Now().Add(feedHeartbeat))
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
			return err
		}
		return rc.Flush()
	}
	if send("ready", `{}`) != nil {
		return
	}
	heartbeat, rescope := time.NewTicker(feedHeartbeat), time.NewTicker(feedRescope)
	defer heartbeat.Stop()
	defer rescope.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-heartbeat.C:
			_ = rc.SetWriteDeadline(time.Now().Add(feedHeartbeat))
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-rescope.C:
			if sc, err := s.scope(ctx, u); err == nil {
				scope = sc
			}
		case <-sub.wake:
			// A short wait gathers a burst (a wave touching a hundred bindings) into one message.
			select {
			case <-ctx.Done():
				return
			case <-time.After(feedBatch):
			}
			batch, resync := s.Changes.take(sub)
			if resync {
				if send("resync", `{}`) != nil {
					return
				}
				continue
			}
			visible := make([]Changed, 0, len(batch))
			for _, c := range batch {
				if (c.Kind == "Cluster" && clusters) || (c.Namespace != "" && inScope(scope, c.Namespace)) {
					visible = append(visible, c)
				}
			}
			if len(visible) == 0 {
				continue
			}
			b, _ := json.Marshal(visible)
			if send("changes", string(b)) != nil {
				return
			}
		}
	}
}
