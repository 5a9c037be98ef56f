// Package inventory serves the inventory HTTP API from the controller-manager: clusters, what
// runs where (per template and cluster: revision, images, commit, health, the policies that
// placed it, since when), and the deployment history, described by the OpenAPI 3 document it
// serves at /openapi.json.
//
// Every request is authenticated by the control plane (TokenReview for bearer tokens; client
// certificates of its client CA) and every read is authorized with SubjectAccessReview for
// that user: a team's reader sees the namespaces where they may list bindings, and nothing is
// answered with Flotilla's own rights. It reads through the manager's cache and the history
// store and writes nothing.
package inventory

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/history"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/revision"
)

//go:embed openapi.json
var openAPI []byte

// MaxLimit is the largest page the history endpoint serves.
const MaxLimit = 1000

// Server answers the inventory API.
type Server struct {
	Client  client.Reader
	Store   history.Store
	Preview Previewer
	// Changes feeds /api/v1/changes; nil: not served.
	Changes *Changes
	authn   *authenticator
	authz   *authorizer
	key     []byte // signs cursors, so a tampered one is refused
}

// New returns a Server that checks users through kube.
func New(c client.Reader, store history.Store, kube kubernetes.Interface) *Server {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &Server{Client: c, Store: store, key: key,
		authn: &authenticator{kube: kube, ttl: 10 * time.Second},
		authz: &authorizer{kube: kube, ttl: 10 * time.Second}}
}

// Handler routes the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openAPI)
	})
	mux.Handle("GET /api/v1/history", s.authenticated(s.history))
	mux.Handle("GET /api/v1/applications", s.authenticated(s.applications))
	mux.Handle("GET /api/v1/clusters", s.authenticated(s.clusters))
	mux.Handle("POST /api/v1/what-if", s.authenticated(s.whatIf))
	mux.Handle("GET /api/v1/releases", s.authenticated(s.releases))
	mux.Handle("GET /api/v1/changes", s.authenticated(s.changes))
	return securityHeaders(mux)
}

func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// apiError is the body of every failure.
type apiError struct {
	Code      int    `json:"code"`
	Message   string `json:"message"`
	Parameter string `json:"parameter,omitempty"`
}

func fail(w http.ResponseWriter, code int, param, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	// A caller's parameter names come back bounded: an answer is no echo chamber.
	msg := fmt.Sprintf(format, args...)
	if len(msg) > 2048 {
		msg = msg[:2048] + "..."
	}
	if len(param) > 64 {
		param = param[:64] + "..."
	}
	_ = json.NewEncoder(w).Encode(apiError{Code: code, Message: msg, Parameter: param})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

type handler func(w http.ResponseWriter, r *http.Request, u *User)

func (s *Server) authenticated(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := s.authn.authenticate(r)
		if err != nil {
			if errors.Is(err, errUnauthenticated) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="flotilla"`)
				fail(w, http.StatusUnauthorized, "", "%v", err)
				return
			}
			fail(w, http.StatusServiceUnavailable, "", "checking credentials with the control plane: %v", err)
			return
		}
		h(w, r, u)
	})
}

// scope is the namespaces a user may read: nil for every namespace (who may list bindings
// cluster-wide), else those where a SubjectAccessReview allows listing bindings.
func (s *Server) scope(ctx context.Context, u *User) ([]string, error) {
	all, err := s.authz.allowed(ctx, u, access{verb: "list", group: workv1alpha1.GroupVersion.Group, resource: "resourcebindings"})
	if err != nil {
		return nil, err
	}
	if all {
		return nil, nil
	}
	var nss corev1.NamespaceList
	if err := s.Client.List(ctx, &nss); err != nil {
		return nil, err
	}
	out := []string{}
	for _, ns := range nss.Items {
		ok, err := s.authz.allowed(ctx, u, access{verb: "list", group: workv1alpha1.GroupVersion.Group, resource: "resourcebindings", namespace: ns.Name})
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, ns.Name)
		}
	}
	return out, nil
}

// namespaced checks a list request: only the named parameters, and a ?namespace= the user may
// read. It answers the user's scope and the list options of that namespace; on false the
// failure is written.
func (s *Server) namespaced(w http.ResponseWriter, r *http.Request, u *User, params ...string) ([]string, []client.ListOption, bool) {
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains(params, k) {
			fail(w, http.StatusBadRequest, k, "unknown parameter %.64q: use %s", k, strings.Join(params, ", "))
			return nil, nil, false
		}
	}
	scope, err := s.scope(r.Context(), u)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "", "authorizing with the control plane: %v", err)
		return nil, nil, false
	}
	ns := q.Get("namespace")
	if ns != "" && !inScope(scope, ns) {
		fail(w, http.StatusForbidden, "namespace", "%s may not read namespace %s (list resourcebindings.work.flotilla.dev there)", u.Name, ns)
		return nil, nil, false
	}
	var opts []client.ListOption
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	return scope, opts, true
}

func inScope(scope []string, ns string) bool {
	return scope == nil || (ns != "" && slices.Contains(scope, ns))
}

// HistoryItem is one record as the API shows it.
type HistoryItem struct {
	ID           string    `json:"id"`
	Time         time.Time `json:"time"`
	Team         string    `json:"team,omitempty"`
	Application  string    `json:"application,omitempty"`
	Group        string    `json:"group,omitempty"`
	Kind         string    `json:"kind"`
	Namespace    string    `json:"namespace,omitempty"`
	Name         string    `json:"name"`
	Cluster      string    `json:"cluster"`
	FromRevision int64     `json:"fromRevision"`
	ToRevision   int64     `json:"toRevision"`
	Images       []string  `json:"images,omitempty"`
	Commit       string    `json:"commit,omitempty"`
	Cause        string    `json:"cause"`
	CauseDetail  string    `json:"causeDetail,omitempty"`
	Actor        string    `json:"actor,omitempty"`
	Outcome      string    `json:"outcome"`
	Message      string    `json:"message,omitempty"`
}

// HistoryPage is a page of history, newest first.
type HistoryPage struct {
	Items []HistoryItem `json:"items"`
	Next  string        `json:"next,omitempty"`
}

func item(r history.Record) HistoryItem {
	return HistoryItem{ID: r.ID, Time: r.Time, Team: r.Team, Application: r.Application, Group: r.Group, Kind: r.Kind, Namespace: r.Namespace,
		Name: r.Name, Cluster: r.Cluster, FromRevision: r.FromRevision, ToRevision: r.ToRevision, Images: r.Images, Commit: r.Commit,
		Cause: r.Cause, CauseDetail: r.CauseDetail, Actor: r.Actor, Outcome: r.Outcome, Message: r.Message}
}

var filterParams = []string{"team", "application", "cluster", "cause", "kind", "name"}

func (s *Server) history(w http.ResponseWriter, r *http.Request, u *User) {
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains(append(slices.Clone(filterParams), "since", "until", "limit", "cursor"), k) {
			fail(w, http.StatusBadRequest, k, "unknown parameter %.64q: use %s, since, until, limit or cursor", k, strings.Join(filterParams, ", "))
			return
		}
	}
	f := history.Filter{Team: q.Get("team"), Application: q.Get("application"), Cluster: q.Get("cluster"), Cause: q.Get("cause"), Kind: q.Get("kind"), Name: q.Get("name")}
	if f.Cause != "" && !slices.Contains(history.Causes, f.Cause) {
		fail(w, http.StatusBadRequest, "cause", "cause %q: use one of %s", f.Cause, strings.Join(history.Causes, ", "))
		return
	}
	if f.Team != "" && len(validation.IsDNS1123Label(f.Team)) > 0 {
		fail(w, http.StatusBadRequest, "team", "team %.80q: a team is its namespace, a DNS label (lower-case letters, digits and '-', at most 63)", f.Team)
		return
	}
	now := time.Now()
	var err error
	if f.Since, err = timeParam(q.Get("since"), now); err != nil {
		fail(w, http.StatusBadRequest, "since", "since %q: %v", q.Get("since"), err)
		return
	}
	if f.Until, err = timeParam(q.Get("until"), now); err != nil {
		fail(w, http.StatusBadRequest, "until", "until %q: %v", q.Get("until"), err)
		return
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > MaxLimit {
			fail(w, http.StatusBadRequest, "limit", "limit %q: give a number from 1 to %d", l, MaxLimit)
			return
		}
	}
	var after *history.Cursor
	if c := q.Get("cursor"); c != "" {
		if after, err = s.decodeCursor(c); err != nil {
			fail(w, http.StatusBadRequest, "cursor", "cursor: %v; use the next value of the previous page as it came", err)
			return
		}
	}
	scope, err := s.scope(r.Context(), u)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "", "authorizing with the control plane: %v", err)
		return
	}
	if f.Team != "" && !inScope(scope, f.Team) {
		fail(w, http.StatusForbidden, "team", "%s may not read the history of team %s (list resourcebindings.work.flotilla.dev in namespace %s)", u.Name, f.Team, f.Team)
		return
	}
	f.Namespaces = scope
	page, err := s.Store.List(r.Context(), f, after, limit)
	if err != nil {
		storeFailed(w, err)
		return
	}
	out := HistoryPage{Items: []HistoryItem{}}
	for _, rec := range page.Records {
		out.Items = append(out.Items, item(rec))
	}
	if page.Next != nil {
		out.Next = s.encodeCursor(page.Next)
	}
	reply(w, out)
}

func storeFailed(w http.ResponseWriter, err error) {
	if errors.Is(err, history.ErrUnavailable) {
		fail(w, http.StatusServiceUnavailable, "", "the history store is unavailable: %v", err)
		return
	}
	fail(w, http.StatusInternalServerError, "", "reading history: %v", err)
}

// timeParam reads RFC 3339 or a duration back from now (24h).
func timeParam(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, errors.New("a duration back from now is positive, e.g. 24h")
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, errors.New("give RFC 3339 (2026-11-23T18:00:00Z) or a duration back from now (24h)")
	}
	return t, nil
}

type cursorBody struct {
	T  time.Time `json:"t"`
	ID string    `json:"id"`
}

func (s *Server) encodeCursor(c *history.Cursor) string {
	b, _ := json.Marshal(cursorBody{T: c.Time, ID: c.ID})
	mac := hmac.New(sha256.New, s.key)
	mac.Write(b)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func (s *Server) decodeCursor(v string) (*history.Cursor, error) {
	body, sig, ok := strings.Cut(v, ".")
	if !ok {
		return nil, errors.New("not a cursor this server issued")
	}
	b, err1 := base64.RawURLEncoding.DecodeString(body)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	mac := hmac.New(sha256.New, s.key)
	mac.Write(b)
	if err1 != nil || err2 != nil || !hmac.Equal(got, mac.Sum(nil)) {
		return nil, errors.New("not a cursor this server issued (changed, or from before a restart)")
	}
	var c cursorBody
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, errors.New("not a cursor this server issued")
	}
	return &history.Cursor{Time: c.T, ID: c.ID}, nil
}

// Placement is one template's state in one cluster.
type Placement struct {
	Cluster  string     `json:"cluster"`
	Revision int64      `json:"revision"`
	Applied  bool       `json:"applied"`
	Health   string     `json:"health,omitempty"`
	Message  string     `json:"message,omitempty"`
	Since    *time.Time `json:"since,omitempty"`
	// Images are those of the revision the cluster runs (a release may hold it back).
	Images []string `json:"images,omitempty"`
	// Commit is the git commit of the Application when this cluster last changed revision.
	Commit string `json:"commit,omitempty"`
	// Synced: the cluster runs the template's latest revision, applied.
	Synced bool `json:"synced"`
	// Drifted names the fields changed by hand in the member: as they are now when drift is
	// reported, as they were at the last correction when it is put back (DriftCorrections > 0).
	Drifted          []string   `json:"drifted,omitempty"`
	DriftCorrections int64      `json:"driftCorrections,omitempty"`
	LastCorrection   *time.Time `json:"lastCorrection,omitempty"`
	// Suspended: Flotilla's writes to this cluster are suspended; Lost: the cluster is not Ready.
	Suspended bool `json:"suspended,omitempty"`
	Lost      bool `json:"lost,omitempty"`
	// Replicas and ReadyReplicas are read from the member object's status when it has them.
	Replicas      *int64 `json:"replicas,omitempty"`
	ReadyReplicas *int64 `json:"readyReplicas,omitempty"`
}

// Workload is a template, why it runs where it runs, and its state per cluster.
type Workload struct {
	Group          string            `json:"group,omitempty"`
	Kind           string            `json:"kind"`
	Namespace      string            `json:"namespace,omitempty"`
	Name           string            `json:"name"`
	Labels         map[string]string `json:"labels,omitempty"`
	LatestRevision int64             `json:"latestRevision,omitempty"`
	Application    string            `json:"application,omitempty"`
	// Description is the Application's, as its owners wrote it (free text).
	Description    string      `json:"description,omitempty"`
	Commit         string      `json:"commit,omitempty"`
	Images         []string    `json:"images,omitempty"`
	Policy         string      `json:"policy,omitempty"`
	TargetPolicies []string    `json:"targetPolicies,omitempty"`
	Clusters       []Placement `json:"clusters"`
}

// applications answers "where does what run, at which version, why, since when".
func (s *Server) applications(w http.ResponseWriter, r *http.Request, u *User) {
	q := r.URL.Query()
	scope, opts, ok := s.namespaced(w, r, u, "namespace", "application", "cluster", "kind", "name")
	if !ok {
		return
	}
	ns := q.Get("namespace")
	var bl workv1alpha1.ResourceBindingList
	if err := s.Client.List(r.Context(), &bl, opts...); err != nil {
		fail(w, http.StatusServiceUnavailable, "", "listing bindings: %v", err)
		return
	}
	latest := map[string]history.Record{}
	if s.Store != nil {
		f := history.Filter{Namespaces: scope}
		if ns != "" {
			f.Namespaces = []string{ns}
		}
		recs, err := s.Store.Latest(r.Context(), f)
		if err == nil {
			for _, rec := range recs {
				latest[rec.Kind+"/"+rec.Namespace+"/"+rec.Name+"/"+rec.Cluster] = rec
			}
		}
	}
	apps := map[string]*appsv1alpha1.Application{}
	out := struct {
		Items []Workload `json:"items"`
	}{Items: []Workload{}}
	for i := range bl.Items {
		b := &bl.Items[i]
		res := b.Spec.Resource
		if !inScope(scope, b.Namespace) || (q.Get("kind") != "" && q.Get("kind") != res.Kind) || (q.Get("name") != "" && q.Get("name") != res.Name) {
			continue
		}
		wl := s.workload(r.Context(), b, apps, latest)
		if q.Get("application") != "" && q.Get("application") != wl.Application {
			continue
		}
		if c := q.Get("cluster"); c != "" {
			if !slices.ContainsFunc(wl.Clusters, func(p Placement) bool { return p.Cluster == c }) {
				continue
			}
		}
		out.Items = append(out.Items, wl)
	}
	slices.SortFunc(out.Items, func(a, b Workload) int {
		return strings.Compare(a.Namespace+"/"+a.Kind+"/"+a.Name, b.Namespace+"/"+b.Kind+"/"+b.Name)
	})
	reply(w, out)
}

func (s *Server) workload(ctx context.Context, b *workv1alpha1.ResourceBinding, apps map[string]*appsv1alpha1.Application, latest map[string]history.Record) Workload {
	res := b.Spec.Resource
	gv, _ := schema.ParseGroupVersion(res.APIVersion)
	wl := Workload{Group: gv.Group, Kind: res.Kind, Namespace: res.Namespace, Name: res.Name, Clusters: []Placement{},
		Policy: b.Spec.PolicyRef.Kind + " " + strings.TrimPrefix(b.Spec.PolicyRef.Namespace+"/"+b.Spec.PolicyRef.Name, "/")}
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion(res.APIVersion)
	tmpl.SetKind(res.Kind)
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: res.Namespace, Name: res.Name}, tmpl); err == nil {
		wl.Images, wl.Labels = interpret.Images(tmpl), tmpl.GetLabels()
		if name := tmpl.GetLabels()[appsv1alpha1.ApplicationLabel]; name != "" {
			wl.Application = name
			key := res.Namespace + "/" + name
			if _, ok := apps[key]; !ok {
				a := &appsv1alpha1.Application{}
				if s.Client.Get(ctx, client.ObjectKey{Namespace: res.Namespace, Name: name}, a) != nil {
					a = nil
				}
				apps[key] = a
			}
			if a := apps[key]; a != nil {
				wl.Commit, wl.TargetPolicies, wl.Description = a.Status.Commit, a.Status.TargetPolicies, a.Spec.Description
			}
		}
	}
	if b.Spec.Revisions != nil {
		wl.LatestRevision = b.Spec.Revisions.Latest
	}
	byRevision := map[int64][]string{}
	for _, cs := range b.Status.Clusters {
		p := Placement{Cluster: cs.Cluster, Revision: cs.Revision, Applied: cs.Applied, Health: string(cs.Health), Message: cs.Message, Images: wl.Images,
			Suspended: cs.Suspended, Lost: cs.Lost, Synced: cs.Applied && (b.Spec.Revisions == nil || cs.Revision == b.Spec.Revisions.Latest)}
		if cs.Drift != nil {
			p.Drifted, p.DriftCorrections = driftedFields(cs.Drift), cs.Drift.Corrections
			if t := cs.Drift.LastCorrectionTime; t != nil {
				p.LastCorrection = &t.Time
			}
		}
		p.Replicas, p.ReadyReplicas = replicasOf(cs.Status)
		if b.Spec.Revisions != nil && cs.Revision > 0 && cs.Revision != b.Spec.Revisions.Latest {
			imgs, ok := byRevision[cs.Revision]
			if !ok {
				if t, _, err := revision.Load(ctx, s.Client, b, cs.Revision); err == nil && t != nil {
					imgs = interpret.Images(t)
				}
				byRevision[cs.Revision] = imgs
			}
			p.Images = imgs
		}
		if imgs := s.renderedImages(ctx, b, cs.Cluster); imgs != nil {
			p.Images = imgs // what the cluster is given, its overrides applied
		}
		if rec, ok := latest[res.Kind+"/"+res.Namespace+"/"+res.Name+"/"+cs.Cluster]; ok {
			since := rec.Time
			p.Since, p.Commit = &since, rec.Commit
		}
		wl.Clusters = append(wl.Clusters, p)
	}
	return wl
}

// renderedImages are the images of the template as rendered for a cluster (its Work's last
// manifest: the revision the cluster runs, with the cluster's overrides), nil without a Work.
func (s *Server) renderedImages(ctx context.Context, b *workv1alpha1.ResourceBinding, cluster string) []string {
	w := &workv1alpha1.Work{}
	if kube.GetWork(ctx, s.Client, b.Namespace, b.Name, cluster, w) != nil {
		return nil
	}
	if u := kube.RenderedTemplate(w); u != nil {
		return interpret.Images(u)
	}
	return nil
}

// ClusterItem is a member cluster as the API shows it.
type ClusterItem struct {
	Name        string            `json:"name"`
	ShortName   string            `json:"shortName,omitempty"`
	Environment string            `json:"environment,omitempty"`
	Description string            `json:"description,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Ready       string            `json:"ready"`
	Reason      string            `json:"reason,omitempty"`
	Version     string            `json:"version,omitempty"`
	Nodes       any               `json:"nodes,omitempty"`
	Resources   any               `json:"resources,omitempty"`
	Taints      any               `json:"taints,omitempty"`
	Workloads   int               `json:"workloads"`
}

func (s *Server) clusters(w http.ResponseWriter, r *http.Request, u *User) {
	ok, err := s.authz.allowed(r.Context(), u, access{verb: "list", group: clusterv1alpha1.GroupVersion.Group, resource: "clusters"})
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "", "authorizing with the control plane: %v", err)
		return
	}
	if !ok {
		fail(w, http.StatusForbidden, "", "%s may not list clusters.cluster.flotilla.dev", u.Name)
		return
	}
	scope, err := s.scope(r.Context(), u)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "", "authorizing with the control plane: %v", err)
		return
	}
	var cl clusterv1alpha1.ClusterList
	if err := s.Client.List(r.Context(), &cl); err != nil {
		fail(w, http.StatusServiceUnavailable, "", "listing clusters: %v", err)
		return
	}
	var bl workv1alpha1.ResourceBindingList
	if err := s.Client.List(r.Context(), &bl); err != nil {
		fail(w, http.StatusServiceUnavailable, "", "listing bindings: %v", err)
		return
	}
	count := map[string]int{}
	for _, b := range bl.Items {
		if inScope(scope, b.Namespace) {
			for _, tc := range b.Spec.Clusters {
				count[tc.Name]++
			}
		}
	}
	out := struct {
		Items []ClusterItem `json:"items"`
	}{Items: []ClusterItem{}}
	for _, c := range cl.Items {
		it := ClusterItem{Name: c.Name, ShortName: c.Spec.ShortName, Environment: c.Spec.Environment, Description: c.Spec.Description,
			Labels: c.Labels, Ready: string(metav1.ConditionUnknown), Version: c.Status.KubernetesVersion, Workloads: count[c.Name]}
		if rc := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ConditionReady); rc != nil {
			it.Ready, it.Reason = string(rc.Status), rc.Reason
		}
		if c.Status.NodeSummary != nil {
			it.Nodes = c.Status.NodeSummary
		}
		if c.Status.ResourceSummary != nil {
			it.Resources = c.Status.ResourceSummary
		}
		if len(c.Spec.Taints) > 0 {
			it.Taints = c.Spec.Taints
		}
		out.Items = append(out.Items, it)
	}
	// The cache lists in no order; a page that refreshes live must not reorder its rows.
	slices.SortFunc(out.Items, func(a, b ClusterItem) int { return strings.Compare(a.Name, b.Name) })
	reply(w, out)
}
