// Package historian turns what the bindings report into history records: each change of the
// revision a cluster runs (or, for templates released without revisions, of the render its
// Work applied there, replicas aside), its outcome (applied, healthy, failed), and its removal, with the
// cause (a release and its wave, a rollback, a placement or failover, an application commit),
// the images and commit, and the actor: the user behind the change, from the control plane's
// audit stream (package audit), named as soon as the stream has delivered the write, else
// the field manager of the change.
//
// It reads bindings (their newest status as the binding controller worked it out, from the
// status board, before it is written), Works, releases, revisions and templates, and writes only to the history store
// (its one request of its own is the audit heartbeat, a get).
// Records carry idempotent IDs (binding, cluster, binding generation, revision, outcome), so a
// restart neither duplicates nor loses the state in force: on its first look at a template it
// compares what the binding reports with the newest records in the store and appends what
// differs. While the store is down, reconciles fail and retry with backoff; the records then
// describe the state at the time the store came back (intermediate states are not kept).
package historian

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/audit"
	"github.com/flotilla-dev/flotilla/internal/history"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/revision"
	"github.com/flotilla-dev/flotilla/internal/statusboard"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// Historian records binding changes.
type Historian struct {
	// Client reads Works in Works, everything else in the control plane.
	Client client.Client
	// Works holds the Works, in the controller-manager's memory.
	Works *workstore.Store
	// Board has the bindings' newest status, written or not yet; nil reads the stored one.
	Board  *statusboard.Board
	Reader client.Reader
	Store  history.Store
	Clock  clock.PassiveClock
	// Writers names the users behind writes (the control plane's audit stream); nil: actors
	// fall back to the field manager of the change.
	Writers Writers

	mu    sync.Mutex
	state map[string]map[string]seen // binding key -> cluster -> last recorded
	// templates names each binding's template and application, for the records written once
	// the binding is gone.
	templates map[string]templateName
	lastBeat  atomic.Int64 // unix nanoseconds of the last audit heartbeat

	actorsMu sync.Mutex
	unnamed  []unnamed // records whose users the audit stream has yet to deliver

	// waited holds, per binding key and cluster, what a cluster's first Work waited for
	// (its dependencies) and since when, until the record of its first apply names it. In
	// memory only: after a restart that record says less, and nothing else changes.
	waited sync.Map
}

// templateName is what records of a binding name: its template and application.
type templateName struct{ group, kind, name, application string }

// unnamed is a stored record whose actor waits for the audit stream.
type unnamed struct {
	id          string
	query       actorQuery
	provisional string
}

// Writers answers who last wrote an object at or before a time.
type Writers interface {
	Last(ref audit.Ref, notAfter time.Time) (audit.Write, bool)
	CaughtUp(t time.Time) bool
}

// auditWait bounds how long a record's actor waits for the audit stream to deliver the
// writes behind it; past it (no stream, or a stalled one) the record keeps the field manager.
const auditWait = 15 * time.Second

// maxUnnamed bounds the records waiting for their actor.
const maxUnnamed = 100_000

// dependencyWait is what a cluster's first Work waited for, and since when.
type dependencyWait struct {
	since time.Time
	what  string
}

// seen is the last record of one template in one cluster.
type seen struct {
	from, to int64
	outcome  string
	cause    string
	// render fingerprints the template as last applied in the cluster, replicas aside (""
	// unknown): without revisions, a new fingerprint is how a changed template (or a changed
	// override) shows.
	render string
	// renderedFrom is the Work render was taken from: while the Work keeps its spec (the
	// same generation) the fingerprint stands and its manifest is not decoded again.
	renderedFrom workSpecVersion
}

// workSpecVersion names one spec of one Work.
type workSpecVersion struct {
	uid        types.UID
	generation int64
}

// SetupWithManager registers one controller per binding kind.
func (h *Historian) SetupWithManager(mgr ctrl.Manager) error {
	if h.Clock == nil {
		h.Clock = clock.RealClock{}
	}
	// A Work's status says when its cluster runs a new render: without revisions that is
	// the news, and the binding's status need not change with it.
	bindingOfWork := func(namespaced bool) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			l := o.GetLabels()
			if l[workv1alpha1.BindingNameLabel] == "" || (l[workv1alpha1.BindingNamespaceLabel] != "") != namespaced {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[workv1alpha1.BindingNamespaceLabel], Name: l[workv1alpha1.BindingNameLabel]}}}
		})
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("historian").
		For(&workv1alpha1.ResourceBinding{}).
		WatchesRawSource(h.Works.Source(bindingOfWork(true))).
		WatchesRawSource(h.statusSource(true)).
		Complete(reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			return h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req)
		})); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("historian-cluster").
		For(&workv1alpha1.ClusterResourceBinding{}).
		WatchesRawSource(h.Works.Source(bindingOfWork(false))).
		WatchesRawSource(h.statusSource(false)).
		Complete(reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			return h.reconcile(ctx, &workv1alpha1.ClusterResourceBinding{}, req)
		})); err != nil {
		return err
	}
	if h.Writers == nil {
		return nil
	}
	return mgr.Add(manager.RunnableFunc(h.nameLater))
}

// statusSource wakes a binding's history when a cluster's step changes on the status board,
// before it is written; without a board the binding's own events do.
func (h *Historian) statusSource(namespaced bool) source.Source {
	if h.Board == nil {
		return source.Func(func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request]) error { return nil })
	}
	return h.Board.Source(func(b workv1alpha1.Binding) []reconcile.Request {
		if (b.GetNamespace() != "") != namespaced {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(b)}}
	})
}

func bindingKey(req ctrl.Request) string { return req.Namespace + "/" + req.Name }

func (h *Historian) reconcile(ctx context.Context, b workv1alpha1.Binding, req ctrl.Request) (ctrl.Result, error) {
	key := bindingKey(req)
	err := h.Client.Get(ctx, req.NamespacedName, b)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, h.removed(ctx, key)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if !b.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}
	// A workload on its way has its status written only every few seconds; what was worked
	// out in between (a cluster that ran it and was lost before the write) is history too.
	spec := b.BindingSpec()
	status, held := h.Board.Of(b)
	if h.Board != nil && !held {
		// Not worked out in this process yet (it just started): the stored status may be older
		// than what was recorded, and reading it would record steps back. The binding
		// controller's first pass puts it on the board, which brings the binding back here.
		return ctrl.Result{}, nil
	}
	last, err := h.lastOf(ctx, key, spec.Resource)
	if err != nil {
		return ctrl.Result{}, err
	}
	p := &historyPass{h: h, b: b, last: last, next: map[string]seen{}, now: h.Clock.Now(),
		tracked: spec.Revisions != nil && spec.Revisions.Latest > 0}
	p.info = &lazyContext{h: h, ctx: ctx, b: b, status: status, tracked: p.tracked}
	for _, cs := range status.Clusters {
		p.cluster(cs)
	}
	p.removals()
	if len(p.recs) > 0 {
		if t := p.info.template(); t != nil {
			for i := range p.recs {
				p.recs[i].Application = t.GetLabels()[appsv1alpha1.ApplicationLabel]
			}
		}
		if _, err := h.Store.Append(ctx, p.recs...); err != nil {
			return ctrl.Result{}, fmt.Errorf("recording %d history records of %s: %w", len(p.recs), key, err)
		}
		h.await(p.waiting)
	}
	gv, _ := schema.ParseGroupVersion(spec.Resource.APIVersion)
	tn := templateName{group: gv.Group, kind: spec.Resource.Kind, name: spec.Resource.Name}
	if t := p.info.template(); t != nil {
		tn.application = t.GetLabels()[appsv1alpha1.ApplicationLabel]
	}
	h.mu.Lock()
	h.state[key] = p.next
	if h.templates == nil {
		h.templates = map[string]templateName{}
	}
	h.templates[key] = tn
	h.mu.Unlock()
	return ctrl.Result{}, nil
}

// historyPass compares one binding's status with what was last recorded of it, cluster by
// cluster, and gathers the records of what changed.
type historyPass struct {
	h    *Historian
	b    workv1alpha1.Binding
	info *lazyContext
	// last is what was recorded per cluster; next what will be once recs are stored.
	last, next map[string]seen
	recs       []history.Record
	// waiting are records whose actor the audit stream has not named yet.
	waiting []unnamed
	// tracked: the binding has revisions (a rollout), so a change is a new revision.
	tracked bool
	now     time.Time
}

// cluster records what changed in one cluster since the last record: a new revision, a later
// outcome of the same one, or (without revisions) a template change applied as it is.
func (p *historyPass) cluster(cs workv1alpha1.ClusterStatus) {
	waitKey := client.ObjectKeyFromObject(p.b).String() + "/" + cs.Cluster
	if cs.WaitingFor != "" && cs.WaitingSince != nil {
		p.h.waited.Store(waitKey, dependencyWait{since: cs.WaitingSince.Time, what: cs.WaitingFor})
	}
	outcome := outcomeOf(cs)
	if p.tracked && cs.Revision == 0 {
		outcome = "" // a new render not yet observed in the member: nothing changed yet
	}
	prev, had := p.last[cs.Cluster]
	if outcome == "" {
		if had {
			p.next[cs.Cluster] = prev
		}
		return
	}
	applied := p.info.applied(cs.Cluster)
	render, renderedFrom := prev.render, prev.renderedFrom
	if applied != nil {
		if v := (workSpecVersion{applied.UID, applied.Generation}); v != prev.renderedFrom || prev.render == "" {
			if fp := renderFingerprint(kube.RenderedTemplate(applied)); fp != "" {
				render, renderedFrom = fp, v
			}
		}
	}
	// Without revisions, a template (or override) change applied as it is. A Work between
	// renders (none applied) keeps what is known.
	changed := !p.tracked && had && applied != nil && render != "" && prev.render != "" && prev.render != render && prev.outcome != history.OutcomeRemoved
	rev := cs.Revision
	if !p.tracked {
		rev = p.untrackedRevision(had, changed, prev)
	}
	if had && !changed && prev.to == rev && (prev.outcome == outcome || prev.outcome == history.OutcomeHealthy && outcome == history.OutcomeApplied) {
		// Nothing new; a healthy revision rolling its pods again (replicas moved by a
		// placement change, a scale) is the same revision, not another change.
		prev.render, prev.renderedFrom = render, renderedFrom
		p.next[cs.Cluster] = prev
		return
	}
	from := prev.to
	if had && prev.to == rev && !changed {
		from = prev.from // the same change, a later outcome
	}
	rec := p.h.record(p.b, cs.Cluster, from, rev, outcome, p.now)
	rec.Message = cs.Message
	rec.Cause, rec.CauseDetail = p.info.cause(cs.Cluster, from, rev, had, prev)
	if v, ok := p.h.waited.LoadAndDelete(waitKey); ok {
		w := v.(dependencyWait) // applied once its dependencies ran healthy
		rec.CauseDetail += fmt.Sprintf("; first applied after waiting %s for its dependencies (%s)", p.now.Sub(w.since).Round(time.Second), w.what)
	}
	if !p.tracked && had && (changed || prev.cause == history.CauseApply && prev.to == rev) {
		rec.Cause, rec.CauseDetail = history.CauseApply, untrackedDetail(from, rev)
		rec.ID = recordID(p.b, cs.Cluster, from, rev, outcome, render) // one change each, not one per generation
	}
	contentRev := rev
	if !p.tracked {
		contentRev = 0 // no ControllerRevisions: the template is the content
	}
	rec.Images, rec.Commit, rec.Actor = p.info.content(contentRev)
	if applied != nil {
		if images := interpret.Images(kube.RenderedTemplate(applied)); len(images) > 0 {
			rec.Images = images // what the cluster was given, its overrides applied
		}
	}
	rec.Actor, p.waiting = p.h.name(p.info, &rec, cs.Cluster, from, rev, p.now, p.waiting)
	p.recs = append(p.recs, rec)
	p.next[cs.Cluster] = seen{from: from, to: rev, outcome: outcome, cause: rec.Cause, render: render, renderedFrom: renderedFrom}
}

// untrackedRevision numbers a change of a template without a rollout (no revisions are
// recorded for it): the template's generation its render came from, the same in every
// cluster and growing with each change; a pass that changed nothing keeps the number recorded.
func (p *historyPass) untrackedRevision(had, changed bool, prev seen) int64 {
	if had && !changed && prev.outcome != history.OutcomeRemoved {
		return prev.to
	}
	return p.b.BindingSpec().TemplateGeneration
}

// untrackedDetail says what changed without a rollout: the template (a new generation), or
// only what an override renders of the same one.
func untrackedDetail(from, to int64) string {
	if from == to {
		return fmt.Sprintf("an override changed what generation %d of the template renders; applied as it is (no rollout)", to)
	}
	return fmt.Sprintf("generation %d of the template applied as it is (no rollout; the revision is the template's generation)", to)
}

// removals records the clusters the binding left since the last record.
func (p *historyPass) removals() {
	for cluster, prev := range p.last {
		if _, still := p.next[cluster]; still {
			continue
		}
		if prev.outcome == history.OutcomeRemoved {
			p.next[cluster] = prev // remembered: a later return says how it left (unmanage: manage)
			continue
		}
		rec := p.h.record(p.b, cluster, prev.to, 0, history.OutcomeRemoved, p.now)
		rec.Cause, rec.CauseDetail = p.info.removalCause(cluster)
		rec.Actor, p.waiting = p.h.name(p.info, &rec, cluster, prev.to, 0, p.now, p.waiting)
		p.recs = append(p.recs, rec)
		p.next[cluster] = seen{from: prev.to, outcome: history.OutcomeRemoved, cause: rec.Cause}
	}
}

// outcomeOf says what a cluster's status means for history; "" while nothing is applied yet.
func outcomeOf(cs workv1alpha1.ClusterStatus) string {
	switch {
	case cs.Suspended, cs.WaitingFor != "":
		return "" // nothing applied yet: it waits for its dependencies
	case !cs.Applied && cs.Message != "":
		return history.OutcomeFailed
	case !cs.Applied:
		return ""
	case cs.Health == workv1alpha1.HealthHealthy:
		return history.OutcomeHealthy
	case cs.Health == workv1alpha1.HealthDegraded:
		return history.OutcomeFailed
	default:
		return history.OutcomeApplied
	}
}

// heartbeat makes a request the audit policy records (a get of an object that need not
// exist), at most every 200ms: its arrival tells that the writes before it have arrived.
func (h *Historian) heartbeat(ctx context.Context, now time.Time) {
	last := h.lastBeat.Load()
	if now.UnixNano()-last < int64(200*time.Millisecond) || !h.lastBeat.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	_ = h.Reader.Get(ctx, client.ObjectKey{Namespace: audit.HeartbeatNamespace, Name: audit.HeartbeatName}, &corev1.ConfigMap{})
}

func (h *Historian) record(b workv1alpha1.Binding, cluster string, from, to int64, outcome string, now time.Time) history.Record {
	r := b.BindingSpec().Resource
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return history.Record{
		ID:   recordID(b, cluster, from, to, outcome, ""),
		Time: now, Team: r.Namespace,
		Group: gv.Group, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name,
		Cluster: cluster, FromRevision: from, ToRevision: to, Outcome: outcome,
	}
}

// recordID makes records idempotent: the same binding, cluster, generation, change and
// outcome (and render, where it tells changes apart) is the same record.
func recordID(b workv1alpha1.Binding, cluster string, from, to int64, outcome, render string) string {
	key := fmt.Appendf(nil, "%s|%s|%d|%d|%d|%s", b.GetUID(), cluster, b.GetGeneration(), from, to, outcome)
	if render != "" {
		key = fmt.Appendf(key, "|%s", render)
	}
	id := sha256.Sum256(key)
	return hex.EncodeToString(id[:16])
}

// renderFingerprint hashes a template as rendered for a cluster, its replicas aside (the
// scheduler's share moving is placement, not a change of what runs); "" for none.
func renderFingerprint(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	u = u.DeepCopy()
	unstructured.RemoveNestedField(u.Object, "spec", "replicas")
	raw, err := u.MarshalJSON()
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// lastOf is what was last recorded for a binding's clusters: from memory, else from the
// store's newest records of its template (after a restart).
func (h *Historian) lastOf(ctx context.Context, key string, r workv1alpha1.ObjectReference) (map[string]seen, error) {
	h.mu.Lock()
	if h.state == nil {
		h.state = map[string]map[string]seen{}
	}
	last, ok := h.state[key]
	h.mu.Unlock()
	if ok {
		return last, nil
	}
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	latest, err := h.Store.Latest(ctx, history.Filter{Namespaces: []string{r.Namespace}, Kind: r.Kind, Name: r.Name})
	if err != nil {
		return nil, fmt.Errorf("reading the newest history of %s %s/%s: %w", r.Kind, r.Namespace, r.Name, err)
	}
	last = map[string]seen{}
	for _, rec := range latest {
		if rec.Group == gv.Group {
			last[rec.Cluster] = seen{from: rec.FromRevision, to: rec.ToRevision, outcome: rec.Outcome, cause: rec.Cause}
		}
	}
	return last, nil
}

// removed records the removal of every cluster of a deleted binding.
func (h *Historian) removed(ctx context.Context, key string) error {
	h.mu.Lock()
	last, tn := h.state[key], h.templates[key]
	h.mu.Unlock()
	if len(last) == 0 {
		return nil
	}
	ns, name, _ := strings.Cut(key, "/")
	if tn.name == "" { // not seen since a restart: the binding's name says what it can
		tn = templateName{kind: bindingKind(name), name: strings.TrimSuffix(name, "-"+bindingKind(name))}
	}
	now := h.Clock.Now()
	var recs []history.Record
	for cluster, prev := range last {
		if prev.outcome == history.OutcomeRemoved {
			continue
		}
		id := sha256.Sum256(fmt.Appendf(nil, "deleted|%s|%s|%d", key, cluster, prev.to))
		recs = append(recs, history.Record{ID: hex.EncodeToString(id[:16]), Time: now, Team: ns, Namespace: ns, Name: tn.name, Cluster: cluster,
			FromRevision: prev.to, Outcome: history.OutcomeRemoved, Cause: history.CauseRemoval, CauseDetail: "the template, or the policy that placed it, was deleted",
			Group: tn.group, Kind: tn.kind, Application: tn.application})
	}
	if len(recs) > 0 {
		if _, err := h.Store.Append(ctx, recs...); err != nil {
			return err
		}
	}
	h.mu.Lock()
	delete(h.state, key)
	delete(h.templates, key)
	h.mu.Unlock()
	return nil
}

// bindingKind recovers the template's kind from a binding named NAME-KIND (the detector's
// naming), for records of bindings already gone.
func bindingKind(binding string) string {
	i := strings.LastIndex(binding, "-")
	if i < 0 {
		return ""
	}
	return binding[i+1:]
}

// lazyContext reads what records need (releases, revisions, the template) once per pass and
// only when a record is written.
type lazyContext struct {
	h        *Historian
	ctx      context.Context
	b        workv1alpha1.Binding
	status   *workv1alpha1.ResourceBindingStatus // the binding's newest
	releases []rolloutv1alpha1.Release
	loaded   bool
	// tracked: the binding has revisions; without, a record's revision is the template's
	// generation, which no release or ControllerRevision numbers.
	tracked bool
	tmpl    map[int64]*unstructured.Unstructured

	tmplLoaded bool
	current    *unstructured.Unstructured
	target     *targeted           // read by targetedApp
	recorded   map[int64]time.Time // when each revision was recorded
}

// applied is the cluster's Work, shared (never modified), when the member runs its render; nil
// otherwise (no Work, or a newer render not applied yet).
func (l *lazyContext) applied(cluster string) *workv1alpha1.Work {
	w := &workv1alpha1.Work{}
	// Read, never modified: the store's Work itself, not a copy of every manifest.
	if kube.GetWork(l.ctx, l.h.Client, l.b.GetNamespace(), l.b.GetName(), cluster, w, client.UnsafeDisableDeepCopy) != nil || !kube.AppliedThisSpec(w) {
		return nil
	}
	return w
}

func (l *lazyContext) releasesOf() []rolloutv1alpha1.Release {
	if l.loaded {
		return l.releases
	}
	l.loaded = true
	var list rolloutv1alpha1.ReleaseList
	if err := l.h.Client.List(l.ctx, &list, client.InNamespace(revision.Namespace(l.b))); err != nil {
		return nil
	}
	for _, r := range list.Items {
		if r.Spec.Binding.Name == l.b.GetName() {
			l.releases = append(l.releases, r)
		}
	}
	return l.releases
}

// cause explains a change of a cluster from one revision to another; prev is the cluster's
// last record (had: there is one).
func (l *lazyContext) cause(cluster string, from, to int64, had bool, prev seen) (string, string) {
	spec := l.b.BindingSpec()
	rels := l.releasesOf()
	if l.tracked && from > 0 && to < from {
		for _, r := range rels {
			if r.Spec.Revision == from && (r.Status.Phase == rolloutv1alpha1.ReleaseRolledBack || r.Status.Phase == rolloutv1alpha1.ReleaseAborted) {
				return history.CauseRollback, fmt.Sprintf("release %s %s: %s", r.Name, strings.ToLower(string(r.Status.Phase)), r.Status.Message)
			}
		}
		return history.CauseRollback, fmt.Sprintf("back to revision %d", to)
	}
	if !had || from == 0 {
		if (had && prev.outcome == history.OutcomeRemoved && prev.cause == history.CauseUnmanage) || (prev.cause == history.CauseManage && prev.to == to) {
			return history.CauseManage, "taken back under Flotilla (manage)"
		}
		if r := l.releaseOf(to); l.tracked && r != nil && r.Spec.StableRevision == 0 {
			return history.CauseAdoption, "adopted by " + l.waveOf(r, cluster)
		}
		if slices.ContainsFunc(spec.GracefulEvictionTasks, func(t workv1alpha1.GracefulEvictionTask) bool { return t.Cluster != cluster }) {
			return history.CauseFailover, "replaces " + evictedClusters(spec) + " (failover)"
		}
		// The eviction may be over (purged at once, or the replacement came up first).
		for _, f := range spec.FailedClusters {
			if f.Cluster != cluster && f.TemplateGeneration == spec.TemplateGeneration {
				return history.CauseAppFailover, fmt.Sprintf("replaces %s, where the workload failed (application failover): %s", f.Cluster, f.Message)
			}
		}
		for _, cs := range l.status.Clusters {
			if cs.Cluster != cluster && cs.Lost && !slices.ContainsFunc(spec.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == cs.Cluster }) {
				return history.CauseFailover, "replaces " + cs.Cluster + ": the cluster is not Ready (failover)"
			}
		}
		return history.CausePlacement, "placed by " + l.placedBy()
	}
	if r := l.releaseOf(to); r != nil && l.tracked {
		detail := l.waveOf(r, cluster)
		if windows := overriddenIn(r, cluster); len(windows) > 0 {
			detail += fmt.Sprintf(", past change window %s by override: %s", strings.Join(windows, ", "), l.overrideReason(r))
		}
		return history.CauseRelease, detail
	}
	return history.CauseApply, fmt.Sprintf("revision %d", to)
}

// releaseOf is the release of revision rev, nil when there is none.
func (l *lazyContext) releaseOf(rev int64) *rolloutv1alpha1.Release {
	for _, r := range l.releasesOf() {
		if r.Spec.Revision == rev {
			return &r
		}
	}
	return nil
}

// overrideReason is why the release passed change windows: its spec.windowOverride, else its
// Application's override-window annotation.
func (l *lazyContext) overrideReason(r *rolloutv1alpha1.Release) string {
	if r.Spec.WindowOverride != nil {
		return r.Spec.WindowOverride.Reason
	}
	if t := l.template(); t != nil && t.GetLabels()[appsv1alpha1.ApplicationLabel] != "" {
		app := &appsv1alpha1.Application{}
		if l.h.Client.Get(l.ctx, client.ObjectKey{Namespace: t.GetNamespace(), Name: t.GetLabels()[appsv1alpha1.ApplicationLabel]}, app) == nil {
			if reason := strings.TrimSpace(app.Annotations[rolloutv1alpha1.OverrideWindowAnnotation]); reason != "" {
				return truncated(reason, 256) + " (annotation of Application " + app.Namespace + "/" + app.Name + ")"
			}
		}
	}
	return "(the reason is gone with the override)"
}

func truncated(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// overriddenIn are the change windows the release took cluster past by override.
func overriddenIn(r *rolloutv1alpha1.Release, cluster string) []string {
	for _, w := range r.Status.Waves {
		for _, c := range w.Clusters {
			if c.Name == cluster {
				return c.OverriddenWindows
			}
		}
	}
	return nil
}

// waveOf names a release and the wave that holds cluster.
func (l *lazyContext) waveOf(r *rolloutv1alpha1.Release, cluster string) string {
	for i, w := range r.Status.Waves {
		if slices.ContainsFunc(w.Clusters, func(c rolloutv1alpha1.ClusterRelease) bool { return c.Name == cluster }) {
			return fmt.Sprintf("release %s wave %d/%d (%s)", r.Name, i+1, len(r.Status.Waves), w.Name)
		}
	}
	return "release " + r.Name
}

func (l *lazyContext) removalCause(cluster string) (string, string) {
	spec := l.b.BindingSpec()
	if slices.Contains(spec.UnmanagedClusters, cluster) {
		return history.CauseUnmanage, "handed back to unmanaged (unmanage): the objects and their pods keep running"
	}
	if slices.ContainsFunc(spec.GracefulEvictionTasks, func(t workv1alpha1.GracefulEvictionTask) bool { return t.Cluster == cluster }) {
		return history.CauseFailover, "evicted from " + cluster + " (failover)"
	}
	// The eviction task may be over by the time the member's status goes: the cluster's
	// unreachable taint still tells.
	cl := &clusterv1alpha1.Cluster{}
	if l.h.Client.Get(l.ctx, client.ObjectKey{Name: cluster}, cl, client.UnsafeDisableDeepCopy) == nil && kube.Unreachable(cl) {
		return history.CauseFailover, "moved off " + cluster + ": the cluster is unreachable (failover)"
	}
	return history.CausePlacement, fmt.Sprintf("no longer placed on %s by %s", cluster, l.placedBy())
}

// placedBy names what placed the binding's template: its policy, or, for a policy the targeting
// controller generated, the Application's target policies, which are what its team wrote.
func (l *lazyContext) placedBy() string {
	ref := l.b.BindingSpec().PolicyRef
	t := l.targetedApp()
	if t.name == "" {
		return ref.Kind + " " + policyName(ref)
	}
	return targetedBy(ref, t.namespace, t.name, t.targetPolicies)
}

// targeted is the Application a generated policy places, and the target policies its status
// lists (none when it is gone).
type targeted struct {
	namespace, name string
	targetPolicies  []string
}

// targetedApp is the Application whose generated policy the binding follows; empty when the
// policy is not one targeting generated (or is gone). Read once per pass.
func (l *lazyContext) targetedApp() targeted {
	if l.target != nil {
		return *l.target
	}
	l.target = &targeted{}
	ref := l.b.BindingSpec().PolicyRef
	var policy client.Object = &policyv1alpha1.PropagationPolicy{}
	if ref.Kind == "ClusterPropagationPolicy" {
		policy = &policyv1alpha1.ClusterPropagationPolicy{}
	}
	if ref.Name == "" || l.h.Client.Get(l.ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, policy) != nil {
		return *l.target
	}
	l.target.namespace, l.target.name = policy.GetLabels()[names.GeneratedAppNamespaceLabel], policy.GetLabels()[names.GeneratedAppNameLabel]
	if l.target.name != "" {
		app := &appsv1alpha1.Application{}
		if l.h.Client.Get(l.ctx, client.ObjectKey{Namespace: l.target.namespace, Name: l.target.name}, app) == nil {
			l.target.targetPolicies = app.Status.TargetPolicies
		}
	}
	return *l.target
}

// targetPolicyRefs names the target policies (as Application status lists them) as audit
// events do.
func targetPolicyRefs(targetPolicies []string) []audit.Ref {
	var refs []audit.Ref
	for _, tp := range targetPolicies {
		if ns, name, ok := strings.Cut(tp, "/"); ok {
			refs = append(refs, audit.Ref{Group: appsv1alpha1.GroupVersion.Group, Resource: "targetpolicies", Namespace: ns, Name: name})
		} else {
			refs = append(refs, audit.Ref{Group: appsv1alpha1.GroupVersion.Group, Resource: "clustertargetpolicies", Name: tp})
		}
	}
	return refs
}

// targetedBy names the target policies (NAMESPACE/NAME of a TargetPolicy, NAME of a
// ClusterTargetPolicy, as Application status lists them) that placed Application ns/name
// through the generated policy ref; with none known, the generated policy and its Application.
func targetedBy(ref workv1alpha1.PolicyReference, ns, name string, targetPolicies []string) string {
	app := "Application " + ns + "/" + name
	if len(targetPolicies) == 0 {
		return fmt.Sprintf("%s %s (generated for %s)", ref.Kind, policyName(ref), app)
	}
	var by []string
	for _, tp := range targetPolicies {
		if strings.Contains(tp, "/") {
			by = append(by, "TargetPolicy "+tp)
		} else {
			by = append(by, "ClusterTargetPolicy "+tp)
		}
	}
	return strings.Join(by, ", ") + " for " + app
}

func evictedClusters(spec *workv1alpha1.ResourceBindingSpec) string {
	var out []string
	for _, t := range spec.GracefulEvictionTasks {
		out = append(out, t.Cluster)
	}
	return strings.Join(out, ", ")
}

func policyName(p workv1alpha1.PolicyReference) string {
	if p.Namespace != "" {
		return p.Namespace + "/" + p.Name
	}
	return p.Name
}

// content is the images, git commit and actor of a revision.
func (l *lazyContext) content(rev int64) ([]string, string, string) {
	if l.tmpl == nil {
		l.tmpl = map[int64]*unstructured.Unstructured{}
	}
	t, ok := l.tmpl[rev]
	if !ok {
		if rev > 0 {
			var cr *appsv1.ControllerRevision
			if cr, t, _ = revision.LoadObject(l.ctx, l.h.Reader, l.b, rev); cr != nil {
				if l.recorded == nil {
					l.recorded = map[int64]time.Time{}
				}
				l.recorded[rev] = cr.CreationTimestamp.Time
			}
		}
		if t == nil {
			t = l.template()
		}
		l.tmpl[rev] = t
	}
	if t == nil {
		return nil, "", ""
	}
	images := interpret.Images(t)
	commit, actor := "", actorOf(l.template())
	if l.template() == nil {
		return images, "", ""
	}
	if app := l.template().GetLabels()[appsv1alpha1.ApplicationLabel]; app != "" {
		a := &appsv1alpha1.Application{}
		if l.h.Client.Get(l.ctx, client.ObjectKey{Namespace: l.b.BindingSpec().Resource.Namespace, Name: app}, a) == nil {
			commit = a.Status.Commit
			actor = "application " + a.Namespace + "/" + a.Name
		}
	}
	return images, commit, actor
}

func (l *lazyContext) template() *unstructured.Unstructured {
	if l.tmplLoaded {
		return l.current
	}
	l.tmplLoaded = true
	r := l.b.BindingSpec().Resource
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(r.APIVersion)
	u.SetKind(r.Kind)
	if err := l.h.Client.Get(l.ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, u); err != nil {
		return nil
	}
	l.current = u
	return u
}

// actorOf names who last changed a template's spec, as its managedFields know it: the field
// manager (kubectl, a CI tool, flotilla-application), not the user; the control plane does
// not record users in objects.
func actorOf(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	var newest metav1.ManagedFieldsEntry
	for _, mf := range u.GetManagedFields() {
		if mf.Subresource != "" || mf.Time == nil {
			continue
		}
		if newest.Time == nil || mf.Time.After(newest.Time.Time) {
			newest = mf
		}
	}
	if newest.Manager == "" {
		return ""
	}
	return "manager " + newest.Manager
}

// Actors that are not users.
const (
	ActorFailover          = "flotilla (failover)"
	ActorAutomaticRollback = "flotilla (automatic rollback)"
)

// actorQuery finds the user behind a record in the audit stream: the newest write of any of
// refs at or before notAfter, else otherwise ("" keeps the field manager).
type actorQuery struct {
	refs      []audit.Ref
	notAfter  time.Time
	otherwise string
}

// actor says who is behind a change: a fixed name (failover), or a query of the audit
// stream. The author of the template change a revision recorded (not a later one), the user
// who aborted a release, the newest writer of the policy, template or Cluster behind a
// placement.
func (l *lazyContext) actor(cause, cluster string, from, to int64, now time.Time) (string, *actorQuery) {
	// A placement by an Application's target policies is the doing of whoever last wrote
	// them, or the Cluster (joined or relabelled into their selector); the Application only
	// copied them into the policy it generated.
	if cause == history.CausePlacement && l.h.Writers != nil {
		if t := l.targetedApp(); len(t.targetPolicies) > 0 {
			refs := append(targetPolicyRefs(t.targetPolicies), audit.Ref{Group: clusterv1alpha1.GroupVersion.Group, Resource: "clusters", Name: cluster})
			return "", &actorQuery{refs: refs, notAfter: now, otherwise: "application " + t.namespace + "/" + t.name}
		}
	}
	if r := l.releaseOf(to); cause == history.CauseRelease && r != nil && len(overriddenIn(r, cluster)) > 0 {
		// Past a change window, the change is the overrider's: the release's newest writer, or
		// the Application's, whose annotation let its templates through.
		ref := audit.Ref{Group: rolloutv1alpha1.GroupVersion.Group, Resource: "releases", Namespace: r.Namespace, Name: r.Name}
		if t := l.template(); r.Spec.WindowOverride == nil && t != nil && t.GetLabels()[appsv1alpha1.ApplicationLabel] != "" {
			ref = audit.Ref{Group: appsv1alpha1.GroupVersion.Group, Resource: "applications", Namespace: t.GetNamespace(), Name: t.GetLabels()[appsv1alpha1.ApplicationLabel]}
		}
		return "", &actorQuery{refs: []audit.Ref{ref}, notAfter: now}
	}
	switch cause {
	case history.CausePlacement, history.CauseRelease, history.CauseApply, history.CauseAdoption:
		// An Application writes its templates and their policy: it is the actor, not the
		// newest writer of a Cluster it happens to be placed on.
		if t := l.template(); t != nil {
			if app := t.GetLabels()[appsv1alpha1.ApplicationLabel]; app != "" {
				return "application " + t.GetNamespace() + "/" + app, nil
			}
		}
	}
	switch cause {
	case history.CauseFailover, history.CauseAppFailover:
		return ActorFailover, nil
	case history.CauseRollback:
		for _, r := range l.releasesOf() {
			if r.Spec.Revision == from && (r.Status.Phase == rolloutv1alpha1.ReleaseRolledBack || r.Status.Phase == rolloutv1alpha1.ReleaseAborted) {
				return "", &actorQuery{refs: []audit.Ref{{Group: rolloutv1alpha1.GroupVersion.Group, Resource: "releases", Namespace: r.Namespace, Name: r.Name}},
					notAfter: now, otherwise: ActorAutomaticRollback}
			}
		}
	case history.CauseUnmanage, history.CauseManage:
		// The switch is the template's annotation: its writer.
		if ref, ok := l.templateRef(); ok {
			return "", &actorQuery{refs: []audit.Ref{ref}, notAfter: now}
		}
	case history.CauseRelease, history.CauseApply, history.CauseAdoption:
		at, ok := l.recorded[to]
		ref, known := l.templateRef()
		if cause == history.CauseApply && (to == 0 || !l.tracked) && known {
			return "", &actorQuery{refs: []audit.Ref{ref}, notAfter: now} // no revision: the template's last writer
		}
		if !ok || !known {
			return "", nil
		}
		// Creation times are whole seconds: a write in the same second precedes the record.
		return "", &actorQuery{refs: []audit.Ref{ref}, notAfter: at.Add(time.Second)}
	case history.CausePlacement:
		spec := l.b.BindingSpec()
		q := &actorQuery{notAfter: now, refs: []audit.Ref{{Group: clusterv1alpha1.GroupVersion.Group, Resource: "clusters", Name: cluster}}}
		switch spec.PolicyRef.Kind {
		case "PropagationPolicy":
			q.refs = append(q.refs, audit.Ref{Group: policyv1alpha1.GroupVersion.Group, Resource: "propagationpolicies", Namespace: spec.PolicyRef.Namespace, Name: spec.PolicyRef.Name})
		case "ClusterPropagationPolicy":
			q.refs = append(q.refs, audit.Ref{Group: policyv1alpha1.GroupVersion.Group, Resource: "clusterpropagationpolicies", Name: spec.PolicyRef.Name})
		}
		if ref, ok := l.templateRef(); ok {
			q.refs = append(q.refs, ref)
		}
		return "", q
	}
	return "", nil
}

// templateRef names the binding's template as audit events do.
func (l *lazyContext) templateRef() (audit.Ref, bool) {
	r := l.b.BindingSpec().Resource
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return audit.Ref{}, false
	}
	m, err := l.h.Client.RESTMapper().RESTMapping(gv.WithKind(r.Kind).GroupKind(), gv.Version)
	if err != nil {
		return audit.Ref{}, false
	}
	return audit.Ref{Group: gv.Group, Resource: m.Resource.Resource, Namespace: r.Namespace, Name: r.Name}, true
}
