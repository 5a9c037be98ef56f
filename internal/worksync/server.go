package worksync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// Caller is who made a request, as the control plane authenticated them.
type Caller struct {
	Name   string
	Groups []string
	UID    string
	Extra  map[string]authenticationv1.ExtraValue
}

// Server serves the leader's store to the other replicas.
type Server struct {
	Store *workstore.Store
	// Authenticate checks a request's credentials with the control plane.
	Authenticate func(*http.Request) (*Caller, error)
	Kube         kubernetes.Interface
	// Leading says whether this replica leads now: only the leader's store is whole.
	Leading func() bool
	// MaxReportBytes bounds one report batch; 0 is 64 MiB.
	MaxReportBytes int64

	mu      sync.Mutex
	allowed map[string]time.Time
}

// allowTTL is how long a caller's permission is remembered.
const allowTTL = 30 * time.Second

// Register adds the endpoints to mux.
func (s *Server) Register(mux *http.ServeMux) {
	mux.Handle(FollowPath, s.guard(s.follow))
	mux.Handle(ReportPath, s.guard(s.report))
}

// guard lets through only callers the control plane allows to update works/status (the
// controller-manager's own identity; no team), and only while this replica leads.
func (s *Server) guard(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := s.Authenticate(r)
		if err != nil || c == nil {
			http.Error(w, "no valid credentials: the Works stream is for the controller-manager's replicas", http.StatusUnauthorized)
			return
		}
		ok, err := s.mayWriteWorkStatus(r.Context(), c)
		if err != nil {
			http.Error(w, "checking permissions with the control plane failed; try again", http.StatusServiceUnavailable)
			return
		}
		if !ok {
			http.Error(w, fmt.Sprintf("%s may not update works/status in work.flotilla.dev: the Works stream is for the controller-manager's replicas", c.Name), http.StatusForbidden)
			return
		}
		if s.Leading != nil && !s.Leading() {
			http.Error(w, "this replica does not lead: follow the holder of the leader Lease", http.StatusServiceUnavailable)
			return
		}
		next(w, r)
	})
}

func (s *Server) mayWriteWorkStatus(ctx context.Context, c *Caller) (bool, error) {
	s.mu.Lock()
	if at, ok := s.allowed[c.Name]; ok && time.Since(at) < allowTTL {
		s.mu.Unlock()
		return true, nil
	}
	s.mu.Unlock()
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range c.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := s.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: c.Name, Groups: c.Groups, UID: c.UID, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "update", Group: workv1alpha1.GroupVersion.Group, Resource: "works", Subresource: "status"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	if sar.Status.Allowed {
		s.mu.Lock()
		if s.allowed == nil {
			s.allowed = map[string]time.Time{}
		}
		s.allowed[c.Name] = time.Now()
		s.mu.Unlock()
	}
	return sar.Status.Allowed, nil
}

func (s *Server) follow(w http.ResponseWriter, r *http.Request) {
	ServeFollow(w, r, s.Store, r.URL.Query()["cluster"])
}

// ServeFollow streams store's Works of clusters to the caller (authorized already) as NDJSON
// events, with a ping every pingEvery, until the caller goes.
func ServeFollow(w http.ResponseWriter, r *http.Request, store *workstore.Store, clusters []string) {
	if r.Method != http.MethodGet {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	rc := http.NewResponseController(w)
	// A stream outlives the server's read and write timeouts (over HTTP/1.1 a passing read
	// deadline would cancel the request's context and cut the stream).
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	synced := false
	write := func(e workstore.Event) error {
		mu.Lock()
		defer mu.Unlock()
		if err := enc.Encode(e); err != nil {
			return err
		}
		synced = synced || e.Type == workstore.Synced
		if !synced {
			return nil // the first listing is flushed with Synced, in bulk
		}
		return rc.Flush()
	}
	go func() {
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := write(workstore.Event{}); err != nil {
					cancel()
					return
				}
			}
		}
	}()
	err := store.Follow(ctx, inClusters(clusters), write)
	if err != nil && ctx.Err() == nil {
		logf.FromContext(r.Context()).Info("Works stream ended", "error", err.Error())
	}
}

func (s *Server) report(w http.ResponseWriter, r *http.Request) {
	ServeReports(w, r, s.Store, s.MaxReportBytes, nil)
}

// ServeReports applies a batch of reports (a JSON array of workstore.Report, at most limit
// bytes; 0 is 64 MiB) to store. allowed, when set, must accept every report of the batch, or
// none is applied.
func ServeReports(w http.ResponseWriter, r *http.Request, store *workstore.Store, limit int64, allowed func(workstore.Report) error) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var reports []workstore.Report
	if limit <= 0 {
		limit = maxReportBytes
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	if err := json.NewDecoder(body).Decode(&reports); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("the reports are over %d bytes: send fewer at once", limit), http.StatusRequestEntityTooLarge)
			return
		}
		// The decoder's error is not echoed: it may quote the body.
		http.Error(w, "the body is not a JSON array of Work reports", http.StatusBadRequest)
		return
	}
	_, _ = io.Copy(io.Discard, body)
	if allowed != nil {
		for _, rep := range reports {
			if err := allowed(rep); err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
		}
	}
	if err := applyReports(store, reports); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
