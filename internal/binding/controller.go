// Package binding turns a scheduled ResourceBinding or ClusterResourceBinding into Works, one
// per target cluster in that cluster's execution namespace, and turns the Works' observed
// statuses back into the binding's status and the template's own status (through the
// interpreter), so tools that read the template see one big cluster. Failover (graceful
// evictions, application failover) is a controller of its own here, Failover, the writer of
// the binding's gracefulEvictionTasks (besides the scheduler opening them) and failedClusters.
//
// It owns Works' spec and the binding's status; it never talks to members (the executor
// does) and never chooses clusters (the scheduler does). Works are not stored in the control
// plane: they live in the controller-manager's memory (package workstore), which saves the two
// control-plane writes per member object a stored Work costs (its create and its status) and
// keeps etcd free of one rendered copy per binding per cluster. What must outlive a restart
// is in the binding's status: each cluster's lastApplied record (manifests hash, objects,
// replicas). After a restart the first Work of each binding and cluster starts from it, so
// nothing unchanged is applied again, and a cluster the record names that is no longer placed
// (or a binding deleted meanwhile) gets a Work made from the record and deleted at once, so its
// objects are removed or handed back as the deletion policy says. A Work is rewritten only when
// its rendered manifests change.
//
// Status writes are the control plane's main cost, so each is made once per verdict: this
// controller alone writes binding status (the scheduler's outcome arrives as an annotation
// written with the clusters it chose, and is reported here as Scheduled), nothing is written
// before the scheduler decided, a workload on its way and a change of the members' status
// details alone wait up to progressWriteInterval, a verdict (healthy, degraded, failed,
// refused) is written at once, and what was just written is not written again over a cache
// that does not show it yet. The wait hides nothing from history or releases: every status
// worked out, written or not, is on the status board (package statusboard), where they read it. A new template thus costs its binding's create, the scheduler's
// patch, one binding status and one template status write. A binding being
// deleted keeps its finalizer until every Work is gone, so member objects are removed (or
// orphaned, as the policy says) before the binding disappears.
package binding

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/match"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/render"
	"github.com/flotilla-dev/flotilla/internal/revision"
	"github.com/flotilla-dev/flotilla/internal/statusboard"
	"github.com/flotilla-dev/flotilla/internal/traffic"
	"github.com/flotilla-dev/flotilla/internal/workloadstatus"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// Finalizer holds a binding until its Works are gone.
const Finalizer = names.BindingFinalizer

// statusSettle gathers the Work status changes of one binding that arrive close together
// into one reconcile, so the binding and template statuses are written once for them.
const statusSettle = time.Second

// releasedStatusSettle is the window for bindings released in waves.
const releasedStatusSettle = 100 * time.Millisecond

// enqueueBindingAfter queues a Work's binding after a delay; the queue keeps one entry per
// binding, so every Work change within the delay costs one reconcile.
func enqueueBindingAfter(delay time.Duration) handler.EventHandler {
	add := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		l := o.GetLabels()
		if l[workv1alpha1.BindingNameLabel] == "" {
			return
		}
		d := delay
		if _, released := l[workv1alpha1.RevisionLabel]; released {
			d = releasedStatusSettle // its health gates a release's next wave
		}
		q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: l[workv1alpha1.BindingNamespaceLabel], Name: l[workv1alpha1.BindingNameLabel]}}, d)
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
	}
}

// canarySource is what a cluster's canary renders from.
type canarySource struct {
	template *unstructured.Unstructured
	replicas int32
}

type writtenWork struct {
	uid        types.UID
	generation int64
}

// Controller reconciles bindings into Works and statuses.
type Controller struct {
	// Client reads and writes Works in Works, everything else in the control plane.
	Client client.Client
	// Works holds the Works, in this process's memory.
	Works *workstore.Store
	// written holds the generation of each Work this controller last wrote, until the cache
	// shows it: judging or rewriting a Work from an older cached copy would undo the write.
	written sync.Map
	// hadWork holds the binding/cluster pairs that had a Work in this process: only the
	// others are seeded from the binding's lastApplied record (after a restart).
	hadWork sync.Map
	// progressSince is when each binding's status on its way first went unwritten (see
	// progressWait).
	progressSince sync.Map
	// statusWritten is the status last written per binding, and the resourceVersion the
	// cache had then: a reconcile before the cache shows the write does not write it again.
	statusWritten sync.Map
	// templateWritten is the same for the templates' status: the patch last written, for which
	// template UID and generation.
	templateWritten sync.Map
	// namespaceMu serializes creating execution namespaces, and namespaceCreated says when
	// this process created each: many passes at once over a cache that lags would each create
	// it (a bulk apply sent 48 POSTs for 3 namespaces).
	namespaceMu      sync.Mutex
	namespaceCreated map[string]time.Time
	// started is when this process began; leftovers are buried only once every binding had
	// its Works written again (see buryLeftovers).
	started time.Time
	// Reader reads dependencies uncached: no informer for kinds only ever read as dependencies.
	Reader client.Reader
	// Interpreters answers what a kind means; nil serves the built-in interpreters only.
	Interpreters *interpret.Registry
	// Recorder emits events on bindings (interpreter errors).
	Recorder events.EventRecorder
	// PodSecurityLevel is the Pod Security level (privileged, baseline or restricted) that
	// workloads of namespaced templates must meet; the platform sets it, and empty means
	// render.DefaultPodSecurityLevel.
	PodSecurityLevel string
	// PodSecurityExemptNamespaces are the control-plane namespaces whose templates are the
	// platform's and are not checked (none by default).
	PodSecurityExemptNamespaces []string
	// Clock stamps when a cluster turned Degraded; the real clock when nil.
	Clock clock.PassiveClock
	// Board receives every status worked out, written or not yet; nil keeps none.
	Board *statusboard.Board
}

// SetupWithManager registers the controller.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	c.started = time.Now()
	b := ctrl.NewControllerManagedBy(mgr).Named("binding")
	if c.Interpreters != nil {
		// A kind's customization changing renders and aggregates its bindings again.
		b = b.WatchesRawSource(source.TypedChannel(c.Interpreters.Subscribe(), handler.TypedEnqueueRequestsFromMapFunc(
			func(ctx context.Context, kind *unstructured.Unstructured) []reconcile.Request {
				var reqs []reconcile.Request
				for _, bd := range kube.BindingsOfKind(ctx, c.Client, kind.GroupVersionKind()) {
					reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(bd)})
				}
				return reqs
			})))
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &workv1alpha1.ResourceBinding{}, trafficIndex, func(o client.Object) []string {
		if rb := o.(*workv1alpha1.ResourceBinding); rb.Spec.Revisions != nil && rb.Spec.Resource.Kind == "Deployment" {
			return traffic.Names(rb.Spec.Revisions.Traffic)
		}
		return nil
	}); err != nil {
		return err
	}
	return b.
		For(&workv1alpha1.ResourceBinding{}).
		// A workload's traffic split changing renders its Services and routes again.
		Watches(&workv1alpha1.ResourceBinding{}, handler.EnqueueRequestsFromMapFunc(c.routeBindings)).
		Watches(&workv1alpha1.ClusterResourceBinding{}, &handler.EnqueueRequestForObject{}).
		WatchesRawSource(c.Works.Source(enqueueBindingAfter(statusSettle))).
		Watches(&rolloutv1alpha1.Release{}, handler.EnqueueRequestsFromMapFunc(releaseBinding), builder.WithPredicates(releasePhaseChanged)).
		Watches(&policyv1alpha1.OverridePolicy{}, handler.EnqueueRequestsFromMapFunc(c.allBindings)).
		Watches(&policyv1alpha1.ClusterOverridePolicy{}, handler.EnqueueRequestsFromMapFunc(c.allBindings)).
		// Overrides select clusters by label.
		// and a cluster's readiness shows as lost placements.
		Watches(&clusterv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(c.allBindings), builder.WithPredicates(predicate.Or[client.Object](
										predicate.LabelChangedPredicate{}, readinessChanged))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 16}). // passes wait on status writes
		Complete(kube.RequeueConflicts(c))
}

// trafficIndex indexes workload bindings by the Services and routes carrying their traffic
// ("Kind/name", see traffic.Names).
const trafficIndex = "spec.revisions.traffic"

// trafficSource is a workload whose traffic split a template carries.
type trafficSource struct {
	workload string
	targets  *workv1alpha1.TrafficTargets
	revs     *workv1alpha1.Revisions
	// primaryLabelled: the clusters whose primary runs healthy as last rendered, with the
	// stable role on its pods.
	primaryLabelled map[string]bool
	// err says why the template cannot carry the split it is asked to.
	err error
}

// selectsARole says whether a Service's Work already selects pods by their release role.
func selectsARole(w *workv1alpha1.Work) bool {
	if w == nil || len(w.Spec.Manifests) == 0 {
		return false
	}
	var svc struct {
		Kind string `json:"kind"`
		Spec struct {
			Selector map[string]string `json:"selector"`
		} `json:"spec"`
	}
	if json.Unmarshal(w.Spec.Manifests[len(w.Spec.Manifests)-1].Raw, &svc) != nil || svc.Kind != "Service" {
		return false
	}
	return svc.Spec.Selector[traffic.RoleLabel] != ""
}

// routedBy are the workloads of the template's namespace whose traffic it carries.
func (c *Controller) routedBy(ctx context.Context, b workv1alpha1.Binding, tmpl *unstructured.Unstructured) ([]trafficSource, error) {
	if tmpl.GetNamespace() == "" {
		return nil, nil
	}
	switch tmpl.GetKind() {
	case "Service", "HTTPRoute", "VirtualService":
	default:
		return nil, nil
	}
	list := &workv1alpha1.ResourceBindingList{}
	if err := c.Client.List(ctx, list, client.InNamespace(tmpl.GetNamespace()), client.MatchingFields{trafficIndex: traffic.Key(tmpl)}); err != nil {
		return nil, err
	}
	var out []trafficSource
	for i := range list.Items {
		rb := &list.Items[i]
		if b.BindingSpec().PolicyRef.Kind == kindClusterPropagationPolicy && rb.Spec.PolicyRef.Kind != kindClusterPropagationPolicy {
			continue // the platform's Services and routes take no split from a namespace's policy
		}
		src := trafficSource{workload: rb.Spec.Resource.Kind + " " + rb.Spec.Resource.Name, targets: rb.Spec.Revisions.Traffic, revs: rb.Spec.Revisions,
			primaryLabelled: map[string]bool{}}
		if rb.Status.ObservedGeneration == rb.Generation {
			for _, cs := range rb.Status.Clusters {
				src.primaryLabelled[cs.Cluster] = cs.Applied && cs.Health == workv1alpha1.HealthHealthy
			}
		}
		out = append(out, src)
	}
	if len(out) > 1 {
		var names []string
		for _, src := range out {
			names = append(names, src.workload)
		}
		return out[:0], &renderError{fmt.Errorf("%s %s carries the traffic of %s; one workload's release routes through it, so give each its own Services and routes", tmpl.GetKind(), tmpl.GetName(), strings.Join(names, " and "))}
	}
	return out, nil
}

// routeBindings are the bindings of the Services and routes a workload binding's traffic
// goes through; for a Service's binding, the workloads routed through it (their Works carry a
// copy of the stable Service when no canary Service template exists).
func (c *Controller) routeBindings(ctx context.Context, o client.Object) []reconcile.Request {
	rb, ok := o.(*workv1alpha1.ResourceBinding)
	if ok && rb.Spec.Resource.Kind == "Service" && rb.Spec.Resource.APIVersion == "v1" {
		list := &workv1alpha1.ResourceBindingList{}
		if err := c.Client.List(ctx, list, client.InNamespace(rb.Namespace), client.MatchingFields{trafficIndex: "Service/" + rb.Spec.Resource.Name}); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
	if !ok || rb.Spec.Revisions == nil || rb.Spec.Resource.Kind != "Deployment" {
		return nil
	}
	var reqs []reconcile.Request
	for _, key := range traffic.Names(rb.Spec.Revisions.Traffic) {
		kind, name, _ := strings.Cut(key, "/")
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: rb.Namespace, Name: names.Binding(kind, name)}})
	}
	return reqs
}

var readinessChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*clusterv1alpha1.Cluster)
	n, ok2 := e.ObjectNew.(*clusterv1alpha1.Cluster)
	return ok1 && ok2 && meta.IsStatusConditionTrue(o.Status.Conditions, clusterv1alpha1.ConditionReady) != meta.IsStatusConditionTrue(n.Status.Conditions, clusterv1alpha1.ConditionReady)
}}

func (c *Controller) allBindings(ctx context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	list := &workv1alpha1.ResourceBindingList{}
	var opts []client.ListOption
	_, namespaced := o.(*policyv1alpha1.OverridePolicy)
	if namespaced {
		opts = append(opts, client.InNamespace(o.GetNamespace()))
	}
	if err := c.Client.List(ctx, list, opts...); err == nil {
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	if namespaced {
		return reqs
	}
	clusterList := &workv1alpha1.ClusterResourceBindingList{}
	if err := c.Client.List(ctx, clusterList); err == nil {
		for i := range clusterList.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&clusterList.Items[i])})
		}
	}
	return reqs
}

// namedRule is an override rule and the policy it comes from, so a refused override is
// reported with its policy's name.
type namedRule struct {
	policy string
	policyv1alpha1.OverrideRule
}

// namedOverriders are the overriders of one rule and the policy they come from.
type namedOverriders struct {
	policy string
	policyv1alpha1.Overriders
}

// overrideRules returns the override rules that select the template, ClusterOverridePolicies
// first, then OverridePolicies, each by name, rules in their written order.
func (c *Controller) overrideRules(ctx context.Context, tmpl *unstructured.Unstructured) ([]namedRule, error) {
	var rules []namedRule
	cops := &policyv1alpha1.ClusterOverridePolicyList{}
	if err := c.Client.List(ctx, cops); err != nil {
		return nil, err
	}
	sort.Slice(cops.Items, func(i, j int) bool { return cops.Items[i].Name < cops.Items[j].Name })
	for _, p := range cops.Items {
		if _, ok := match.Resource(p.Spec.ResourceSelectors, tmpl); ok {
			for _, r := range p.Spec.OverrideRules {
				rules = append(rules, namedRule{"ClusterOverridePolicy " + p.Name, r})
			}
		}
	}
	ops := &policyv1alpha1.OverridePolicyList{}
	if err := c.Client.List(ctx, ops, client.InNamespace(tmpl.GetNamespace())); err != nil {
		return nil, err
	}
	sort.Slice(ops.Items, func(i, j int) bool { return ops.Items[i].Name < ops.Items[j].Name })
	for _, p := range ops.Items {
		if _, ok := match.Resource(p.Spec.ResourceSelectors, tmpl); ok {
			for _, r := range p.Spec.OverrideRules {
				rules = append(rules, namedRule{"OverridePolicy " + p.Namespace + "/" + p.Name, r})
			}
		}
	}
	return rules, nil
}

// WorkName is the name of a binding's Work in every execution namespace: NAMESPACE-NAME, or
// cluster.NAME for a ClusterResourceBinding (namespace names hold no dots, so they never clash).
func WorkName(b workv1alpha1.Binding) string {
	return workv1alpha1.WorkName(b.GetNamespace(), b.GetName())
}

func (c *Controller) works(ctx context.Context, b workv1alpha1.Binding) ([]workv1alpha1.Work, error) {
	list := &workv1alpha1.WorkList{}
	err := c.Client.List(ctx, list, client.MatchingLabels{
		workv1alpha1.BindingNamespaceLabel: b.GetNamespace(), workv1alpha1.BindingNameLabel: b.GetName(),
	})
	return list.Items, err
}

// pass is what one reconcile of a binding works with: the binding, its template read once,
// what the template's kind means, and the Works it has.
type pass struct {
	b     workv1alpha1.Binding
	bs    *workv1alpha1.ResourceBindingSpec
	tmpl  *unstructured.Unstructured
	in    interpret.Interpreter
	works []workv1alpha1.Work
	// hasReplicas, replicasErr: what the interpreter said of the template's replicas.
	hasReplicas bool
	replicasErr error
	// existing are the Works of the clusters the binding still targets, by cluster.
	existing map[string]*workv1alpha1.Work
}

// written is what writing the Works came to.
type written struct {
	// any: a Work was created or changed, so the executor's report brings the binding back.
	any bool
	// terminating: a Work is being deleted; its replacement is written once it is gone.
	terminating bool
	// renderErrors are the clusters whose Work could not be rendered, with why.
	renderErrors map[string]string
	// clusterGone: a target cluster's Cluster is gone; the scheduler places the binding
	// again, and this pass stops without writing status.
	clusterGone bool
}

// Reconcile renders the binding's Works and gathers their status, in phases: load the
// binding and its template (or finish, refuse, or wait), drop the Works of clusters left,
// write each target cluster's Work, then report the status of the binding and the template.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p, res, err := c.load(ctx, req)
	if p == nil || err != nil {
		return res, err
	}
	if err := c.dropLeftWorks(ctx, p); err != nil {
		return ctrl.Result{}, err
	}
	out, err := c.writeWorks(ctx, p)
	if err != nil || out.clusterGone {
		return ctrl.Result{}, err
	}
	if out.any && len(out.renderErrors) == 0 {
		// The Works' events bring this binding back once the executor reported; writing
		// "waiting for the members" now would only cost a write.
		return ctrl.Result{}, nil
	}
	wait, err := c.report(ctx, p, out.renderErrors)
	if err != nil {
		return ctrl.Result{}, err
	}
	if wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if out.terminating {
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// load reads the binding, its Works and its template. A nil pass means the reconcile ends
// here with the result given: the binding is gone, waits for its own writes or leftovers,
// is being deleted, or is refused.
func (c *Controller) load(ctx context.Context, req ctrl.Request) (*pass, ctrl.Result, error) {
	b := workv1alpha1.NewBinding(req.Namespace, req.Name)
	if err := c.Client.Get(ctx, req.NamespacedName, b); err != nil {
		if apierrors.IsNotFound(err) {
			c.forgetWrites(b)
		}
		return nil, ctrl.Result{}, client.IgnoreNotFound(err)
	}
	works, err := c.works(ctx, b)
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	if c.behindOwnWrites(works) {
		return nil, ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	if buried, wait, err := c.buryLeftovers(ctx, b, works); err != nil {
		return nil, ctrl.Result{}, err
	} else if buried || wait > 0 {
		return nil, ctrl.Result{RequeueAfter: max(wait, time.Second)}, nil
	}
	if !b.GetDeletionTimestamp().IsZero() {
		res, err := c.finalize(ctx, b, works)
		return nil, res, err
	}
	if msg := foreignReference(b); msg != "" {
		res, err := c.refuse(ctx, b, msg)
		return nil, res, err
	}
	if !controllerutil.ContainsFinalizer(b, Finalizer) {
		patch := client.MergeFrom(b.DeepCopyObject().(client.Object))
		controllerutil.AddFinalizer(b, Finalizer)
		if err := c.Client.Patch(ctx, b, patch); err != nil {
			return nil, ctrl.Result{}, err
		}
	}
	tmpl, msg, err := c.template(ctx, b)
	if err != nil || tmpl == nil {
		return nil, ctrl.Result{}, err
	}
	if msg != "" {
		res, err := c.refuse(ctx, b, msg)
		return nil, res, err
	}
	bs := b.BindingSpec()
	gvk := schema.FromAPIVersionAndKind(bs.Resource.APIVersion, bs.Resource.Kind)
	p := &pass{b: b, bs: bs, tmpl: tmpl, works: works, in: c.Interpreters.For(gvk)}
	_, p.hasReplicas, p.replicasErr = p.in.GetReplicas(tmpl)
	return p, ctrl.Result{}, nil
}

// behindOwnWrites says whether the cache has not seen a Work this controller wrote yet:
// rendering from the older copy would write it again.
func (c *Controller) behindOwnWrites(works []workv1alpha1.Work) bool {
	for i := range works {
		key := client.ObjectKeyFromObject(&works[i])
		if v, ok := c.written.Load(key); ok {
			wrote := v.(writtenWork)
			if works[i].UID == wrote.uid && works[i].Generation < wrote.generation {
				return true
			}
			c.written.Delete(key) // caught up, or a new Work of that name
		}
	}
	return false
}

// template reads the binding's template, or says why the binding is refused. A nil template
// without a message: it is gone, and its deletion removes the binding.
func (c *Controller) template(ctx context.Context, b workv1alpha1.Binding) (*unstructured.Unstructured, string, error) {
	bs := b.BindingSpec()
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(schema.FromAPIVersionAndKind(bs.Resource.APIVersion, bs.Resource.Kind))
	// The client drops the namespace of a cluster-scoped kind: without this check a binding in a
	// namespace could name a ClusterRole and have it written to every member.
	// (A kind the control plane does not serve has no scope; reading it fails below.)
	if namespaced, err := c.Client.IsObjectNamespaced(tmpl); err != nil && !meta.IsNoMatchError(err) {
		return nil, "", err
	} else if err == nil {
		if msg := scopeMismatch(b, namespaced); msg != "" {
			return tmpl, msg, nil
		}
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: bs.Resource.Namespace, Name: bs.Resource.Name}, tmpl); err != nil {
		return nil, "", client.IgnoreNotFound(err)
	}
	msg, err := c.unplacedBy(ctx, b, tmpl)
	return tmpl, msg, err
}

// dropLeftWorks deletes the Works of clusters the binding no longer targets (those being
// evicted stay until their replacement is available) and hands back the Works of clusters
// handed back to unmanaged; it leaves in p.existing the Works of the clusters still targeted.
func (c *Controller) dropLeftWorks(ctx context.Context, p *pass) error {
	targets := map[string]bool{}
	for _, t := range p.bs.Clusters {
		if !slices.Contains(p.bs.UnmanagedClusters, t.Name) { // handed back: no Work, no status
			targets[t.Name] = true
		}
	}
	p.existing = map[string]*workv1alpha1.Work{}
	for i := range p.works {
		w := &p.works[i]
		cluster := w.Labels[workv1alpha1.ClusterLabel]
		c.hadWork.Store(workKey(p.b, cluster), true)
		if targets[cluster] {
			p.existing[cluster] = w
			continue
		}
		if task, evicting := p.bs.EvictionFor(cluster); evicting && task.PurgeMode != workv1alpha1.PurgeImmediately {
			continue // the old placement stays until its replacement is available
		}
		if !w.DeletionTimestamp.IsZero() {
			continue
		}
		if slices.Contains(p.bs.UnmanagedClusters, cluster) {
			if err := c.handBack(ctx, w); err != nil {
				return err
			}
			continue
		}
		if err := c.Client.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// writeWorks renders and writes the Work of every cluster the binding targets.
func (c *Controller) writeWorks(ctx context.Context, p *pass) (written, error) {
	out := written{renderErrors: map[string]string{}}
	rules, err := c.overrideRules(ctx, p.tmpl)
	if err != nil {
		return out, err
	}
	routed, err := c.routedBy(ctx, p.b, p.tmpl)
	if re := (*renderError)(nil); errors.As(err, &re) {
		routed = []trafficSource{{err: re}} // every cluster's Work reports it
	} else if err != nil {
		return out, err
	}
	revisions := map[int64]*unstructured.Unstructured{}
	for _, t := range p.bs.Clusters {
		if slices.Contains(p.bs.UnmanagedClusters, t.Name) {
			continue // handed back: no Work, no status
		}
		wrote, err := c.writeClusterWork(ctx, p, t, rules, routed, revisions, &out)
		if out.clusterGone {
			return out, nil
		}
		if err != nil {
			var re *renderError
			if !errors.As(err, &re) {
				return out, err
			}
			out.renderErrors[t.Name] = err.Error()
		}
		out.any = out.any || wrote
	}
	return out, nil
}

// writeClusterWork writes one cluster's Work: suspended, not reached yet by a staged first
// release, or rendered from the revision the cluster runs (and its canary's) with the
// cluster's overrides and routes. It reports whether it wrote.
func (c *Controller) writeClusterWork(ctx context.Context, p *pass, t workv1alpha1.TargetCluster, rules []namedRule, routed []trafficSource,
	revisions map[int64]*unstructured.Unstructured, out *written) (bool, error) {
	cl := &clusterv1alpha1.Cluster{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: t.Name}, cl); err != nil {
		out.clusterGone = apierrors.IsNotFound(err)
		return false, client.IgnoreNotFound(err)
	}
	if !cl.DeletionTimestamp.IsZero() {
		return false, nil // unjoining: its finalizer drains the Works, none is written again
	}
	var overriders []namedOverriders
	for _, r := range rules {
		if match.Cluster(r.TargetCluster, cl) {
			overriders = append(overriders, namedOverriders{r.policy, r.Overriders})
		}
	}
	existing := p.existing[t.Name]
	if p.bs.Suspended(t.Name) {
		// Nothing new reaches the member; the executor stops writing and keeps reporting.
		if existing != nil && !existing.Spec.Suspend {
			patch := client.MergeFrom(existing.DeepCopy())
			existing.Spec.Suspend = true
			return false, c.Client.Patch(ctx, existing, patch)
		}
		return false, nil
	}
	if notYet, err := c.notReachedYet(ctx, p.b, t.Name, len(p.works) > 0); err != nil || notYet {
		if err == nil && existing != nil && existing.DeletionTimestamp.IsZero() {
			// A staged first release has not reached this cluster: a live object there stays
			// unmanaged, and one handed back by a rollback is released, never deleted.
			err = c.handBack(ctx, existing)
		}
		delete(p.existing, t.Name)
		return false, err
	}
	source, rev, err := c.sourceFor(ctx, p.b, p.tmpl, t.Name, revisions)
	if err != nil {
		return false, err
	}
	canary, err := c.canaryOf(ctx, p, &t, rev, revisions)
	if err != nil {
		return false, err
	}
	if existing != nil && !existing.DeletionTimestamp.IsZero() {
		// Never rewrite a Work being deleted (its deletion policy decides what happens to
		// the member objects); the new one is written once it is gone.
		out.terminating = true
		return false, nil
	}
	return c.ensureWork(ctx, p.b, source, rev, canary, p.in, p.hasReplicas, t, overriders, routed, existing)
}

// canaryOf is the canary a release pinned to the cluster, if any, taking its replicas out of
// the cluster's share t when the two run different revisions without routing.
func (c *Controller) canaryOf(ctx context.Context, p *pass, t *workv1alpha1.TargetCluster, rev int64, revisions map[int64]*unstructured.Unstructured) (*canarySource, error) {
	pin, ok := p.bs.Revisions.CanaryFor(t.Name)
	if !ok || !p.hasReplicas {
		return nil, nil
	}
	src, err := c.revisionSource(ctx, p.b, p.tmpl, pin.Revision, revisions)
	if err != nil {
		return nil, err
	}
	canary := &canarySource{template: src, replicas: min(pin.Replicas, t.Replicas)}
	if p.bs.Revisions.Traffic != nil {
		// Routed or blue-green: the route or the Service decides who gets the
		// requests, so the primary keeps its full share beside the canary.
		canary.replicas = pin.Replicas
	} else if pin.Revision != rev {
		t.Replicas -= canary.replicas // the canary's replicas come out of the cluster's share
	} // else the primary took the canary's revision: at full share until the canary goes
	return canary, nil
}

// report writes the status of the binding and of its template from the Works, and says when
// to look again.
func (c *Controller) report(ctx context.Context, p *pass, renderErrors map[string]string) (time.Duration, error) {
	var interpretErrors []string
	if p.replicasErr != nil {
		interpretErrors = append(interpretErrors, p.replicasErr.Error())
	}
	for cluster, msg := range renderErrors {
		if strings.Contains(msg, "interpreter customization ") {
			interpretErrors = append(interpretErrors, cluster+": "+msg)
		}
	}
	sort.Strings(interpretErrors)
	ro, err := c.rolloutOf(ctx, p.b, p.tmpl, p.in)
	if err != nil {
		return 0, err
	}
	return c.aggregate(ctx, p.b, p.tmpl, p.in, ro, p.existing, renderErrors, interpretErrors)
}

// handBack deletes a Work so that the executor strips Flotilla's marks from its member
// objects instead of deleting them.
func (c *Controller) handBack(ctx context.Context, w *workv1alpha1.Work) error {
	if w.Spec.DeletionPolicy != workv1alpha1.DeletionRelease {
		patch := client.MergeFrom(w.DeepCopy())
		w.Spec.DeletionPolicy = workv1alpha1.DeletionRelease
		if err := c.Client.Patch(ctx, w, patch); err != nil {
			return err
		}
	}
	if err := c.Client.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// notReachedYet reports a cluster that a staged first release has not reached (revisions are
// tracked and the cluster has none), or any cluster of a template released in waves whose
// first revision is not recorded yet.
func (c *Controller) notReachedYet(ctx context.Context, b workv1alpha1.Binding, cluster string, hasWorks bool) (bool, error) {
	revs := b.BindingSpec().Revisions
	if revs != nil {
		return revs.RevisionFor(cluster) == 0, nil
	}
	if hasWorks {
		return false, nil // already running: a rollout added later does not stage what runs
	}
	_, policy, err := kube.Policy(ctx, c.Client, b.BindingSpec().PolicyRef)
	if err != nil {
		return false, client.IgnoreNotFound(err)
	}
	// A template released in waves reaches no cluster before its first revision is recorded:
	// what the members first run is then exactly revision 1, and a change made in between is a
	// new revision with its release, never an update that skips the waves.
	return policy.Rollout != nil, nil
}

// forgetWrites drops the write expectations of a binding's Works.
func (c *Controller) forgetWrites(b workv1alpha1.Binding) {
	name := WorkName(b)
	c.progressSince.Delete(client.ObjectKeyFromObject(b))
	c.statusWritten.Delete(client.ObjectKeyFromObject(b))
	c.Board.Forget(client.ObjectKeyFromObject(b))
	c.hadWork.Range(func(k, _ any) bool {
		if strings.HasSuffix(k.(string), "/"+name) {
			c.hadWork.Delete(k)
		}
		return true
	})
	c.written.Range(func(k, _ any) bool {
		if k.(client.ObjectKey).Name == name {
			c.written.Delete(k)
		}
		return true
	})
}

// unseenWrite reports a Work this controller created that the cache does not list yet.
func (c *Controller) unseenWrite(b workv1alpha1.Binding, works []workv1alpha1.Work) bool {
	listed := map[client.ObjectKey]bool{}
	for i := range works {
		listed[client.ObjectKeyFromObject(&works[i])] = true
	}
	name, unseen := WorkName(b), false
	c.written.Range(func(k, _ any) bool {
		if key := k.(client.ObjectKey); key.Name == name && !listed[key] {
			unseen = true
		}
		return !unseen
	})
	return unseen
}

func (c *Controller) finalize(ctx context.Context, b workv1alpha1.Binding, works []workv1alpha1.Work) (ctrl.Result, error) {
	if c.unseenWrite(b, works) {
		// A Work created a moment ago is not listed yet; it must be deleted too.
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	for i := range works {
		if works[i].DeletionTimestamp.IsZero() {
			if err := c.Client.Delete(ctx, &works[i]); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
		}
	}
	if len(works) > 0 {
		return ctrl.Result{RequeueAfter: time.Second}, nil // the executor is removing member objects
	}
	if b.GetNamespace() == "" {
		// Nothing owns a cluster-scoped binding's revisions and releases: they go with it.
		if err := revision.DeleteHistory(ctx, c.Client, b); err != nil {
			return ctrl.Result{}, err
		}
	}
	c.forgetWrites(b)
	patch := client.MergeFrom(b.DeepCopyObject().(client.Object))
	controllerutil.RemoveFinalizer(b, Finalizer)
	return ctrl.Result{}, c.Client.Patch(ctx, b, patch)
}

// renderError is a problem of the user's input (an override that does not fit): reported on
// the binding, not retried.
type renderError struct{ err error }

func (r *renderError) Error() string { return r.err.Error() }

// sourceFor is what a cluster renders: the revision a release pinned it to (or the stable
// one), with the template's current labels and annotations (metadata is not released in
// waves). The template itself is used when its workload is that revision's: the template may
// already be ahead of the revisions recorded so far, and must not reach a cluster before its
// release does.
func (c *Controller) sourceFor(ctx context.Context, b workv1alpha1.Binding, tmpl *unstructured.Unstructured, cluster string, loaded map[int64]*unstructured.Unstructured) (*unstructured.Unstructured, int64, error) {
	rev := b.BindingSpec().Revisions.RevisionFor(cluster)
	if rev == 0 {
		return tmpl, 0, nil
	}
	src, err := c.revisionSource(ctx, b, tmpl, rev, loaded)
	return src, rev, err
}

// revisionSource is the template as of revision rev, with its current metadata.
func (c *Controller) revisionSource(ctx context.Context, b workv1alpha1.Binding, tmpl *unstructured.Unstructured, rev int64, loaded map[int64]*unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if src, ok := loaded[rev]; ok {
		return src, nil
	}
	src, hash, err := revision.Load(ctx, c.Client, b, rev)
	if err != nil {
		return nil, err
	}
	if hash == revision.WorkloadHash(c.Interpreters.For(tmpl.GroupVersionKind()), tmpl) {
		src = tmpl
	} else {
		src.SetName(tmpl.GetName())
		src.SetNamespace(tmpl.GetNamespace())
		src.SetLabels(tmpl.GetLabels())
		src.SetAnnotations(tmpl.GetAnnotations())
	}
	loaded[rev] = src
	return src, nil
}

// ensureWork writes the cluster's Work when its content changed and says whether it wrote.
func (c *Controller) ensureWork(ctx context.Context, b workv1alpha1.Binding, tmpl *unstructured.Unstructured, rev int64, canary *canarySource, in interpret.Interpreter, hasReplicas bool, t workv1alpha1.TargetCluster, overriders []namedOverriders, routed []trafficSource, w *workv1alpha1.Work) (bool, error) {
	ns := kube.ExecutionNamespacePrefix + t.Name
	name := WorkName(b)
	if w != nil {
		name = w.Name // written under an earlier version's naming: its member objects point at it
	}
	manifest, err := render.Render(tmpl, in, render.Target{Replicas: t.Replicas, HasReplicas: hasReplicas, WorkNamespace: ns, WorkName: name})
	if err != nil {
		return false, &renderError{err}
	}
	level := c.podSecurityLevel(b)
	if err := overrideAndCheck(manifest, overriders, t.Name, level); err != nil {
		return false, err
	}
	for _, src := range routed {
		if src.err != nil {
			return false, src.err
		}
		// After the overrides: the split is the release's, whatever a cluster's overrides say.
		st := traffic.StateFor(src.revs, t.Name)
		// Once a Service narrowed to a role it keeps one: falling back to the written selector
		// while the workload is briefly not healthy would send the active traffic to both stacks.
		st.PrimaryLabelled = st.PrimaryLabelled || src.primaryLabelled[t.Name] || selectsARole(w)
		if err := traffic.Render(manifest, src.targets, st); err != nil {
			return false, &renderError{fmt.Errorf("traffic of %s for cluster %s: %w", src.workload, t.Name, err)}
		}
	}
	if revs := b.BindingSpec().Revisions; revs != nil && revs.Traffic != nil {
		// The stable Service selects the primary's pods only, never the canary's.
		if err := render.Role(manifest, traffic.RoleStable); err != nil {
			return false, &renderError{err}
		}
	}
	var manifests []workv1alpha1.Manifest
	if b.BindingSpec().PropagateDeps {
		deps, err := c.dependencies(ctx, tmpl, ns, name)
		if err != nil {
			return false, err
		}
		manifests = deps
	}
	if revs := b.BindingSpec().Revisions; revs != nil && revs.Traffic.Routed() && tmpl.GetKind() == "Deployment" {
		svc, err := c.canaryService(ctx, tmpl.GetNamespace(), revs.Traffic, ns, name)
		if err != nil {
			return false, err
		}
		manifests = append(manifests, svc...)
	}
	if canary != nil {
		m, err := render.Render(canary.template, in, render.Target{Replicas: canary.replicas, HasReplicas: true, WorkNamespace: ns, WorkName: name})
		if err != nil {
			return false, &renderError{err}
		}
		if err := overrideAndCheck(m, overriders, t.Name, level); err != nil {
			return false, err
		}
		if err := render.Canary(m); err != nil {
			return false, &renderError{err}
		}
		raw, err := m.MarshalJSON()
		if err != nil {
			return false, err
		}
		// Before the primary: the Work's last manifest is the template whose status it reports.
		manifests = append(manifests, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	}
	raw, err := manifest.MarshalJSON()
	if err != nil {
		return false, err
	}
	manifests = append(manifests, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	if err := checkWorkSize(tmpl, t.Name, manifests); err != nil {
		return false, &renderError{err}
	}
	spec := workv1alpha1.WorkSpec{
		Manifests:          manifests,
		DeletionPolicy:     b.BindingSpec().DeletionPolicy,
		ConflictResolution: b.BindingSpec().ConflictResolution,
		DriftCorrection:    b.BindingSpec().DriftCorrection.DeepCopy(),
	}
	labels := map[string]string{
		workv1alpha1.BindingNamespaceLabel: b.GetNamespace(), workv1alpha1.BindingNameLabel: b.GetName(), workv1alpha1.ClusterLabel: t.Name,
	}
	if rev != 0 {
		labels[workv1alpha1.RevisionLabel] = strconv.FormatInt(rev, 10)
	}
	var annotations map[string]string
	if level != "" {
		// The executor labels the member namespaces it creates for this Work with the level.
		annotations = map[string]string{names.PodSecurityLevelAnnotation: level}
	}
	if w == nil {
		if err := c.ensureExecutionNamespace(ctx, ns); err != nil {
			return false, err
		}
		w = &workv1alpha1.Work{
			// Created with the executor's finalizer: one write less per Work.
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{names.ExecutorFinalizer}, Labels: labels, Annotations: annotations},
			Spec:       spec,
		}
		if err := c.Client.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating work %s/%s: %w", ns, name, err)
		}
		// Only a first Work since the start is seeded: after one this process deleted (handed
		// back, removed) the record no longer says what the member has.
		_, had := c.hadWork.LoadOrStore(workKey(b, t.Name), true)
		if st, ok := seededStatus(b, t.Name, w.Generation); ok && !had {
			w.Status = st
			if err := c.Client.Status().Update(ctx, w); err != nil {
				return false, fmt.Errorf("seeding work %s/%s: %w", ns, name, err)
			}
		}
		c.written.Store(client.ObjectKeyFromObject(w), writtenWork{w.UID, w.Generation})
		return true, nil
	}
	if workSpecEqual(w.Spec, spec) && w.Labels[workv1alpha1.RevisionLabel] == labels[workv1alpha1.RevisionLabel] &&
		w.Annotations[names.PodSecurityLevelAnnotation] == level {
		return false, nil
	}
	patch := client.MergeFrom(w.DeepCopy())
	w.Spec = spec
	if level != "" {
		metav1.SetMetaDataAnnotation(&w.ObjectMeta, names.PodSecurityLevelAnnotation, level)
	} else {
		delete(w.Annotations, names.PodSecurityLevelAnnotation)
	}
	if rev != 0 {
		w.Labels[workv1alpha1.RevisionLabel] = labels[workv1alpha1.RevisionLabel]
	} else {
		delete(w.Labels, workv1alpha1.RevisionLabel)
	}
	if err := c.Client.Patch(ctx, w, patch); err != nil {
		return false, err
	}
	c.written.Store(client.ObjectKeyFromObject(w), writtenWork{w.UID, w.Generation})
	return true, nil
}

// MaxWorkBytes bounds the manifests of one Work. etcd refuses a write over 1.5 MiB by default
// (--max-request-bytes); keeping well under it leaves room for the Work's metadata and status,
// so an oversized template is reported on its binding instead of failing the write on every
// retry.
const MaxWorkBytes = 1280 << 10

// checkWorkSize refuses manifests too large for one Work, naming the template and the cluster.
func checkWorkSize(tmpl *unstructured.Unstructured, cluster string, manifests []workv1alpha1.Manifest) error {
	total := 0
	for _, m := range manifests {
		total += len(m.Raw)
	}
	if total <= MaxWorkBytes {
		return nil
	}
	ref := tmpl.GetName()
	if ns := tmpl.GetNamespace(); ns != "" {
		ref = ns + "/" + ref
	}
	return fmt.Errorf("%s %s with its overrides and dependencies renders %d KiB for cluster %s, over the %d KiB a Work may hold (etcd's object size limit); make the template or the objects it depends on smaller",
		tmpl.GetKind(), ref, total>>10, cluster, MaxWorkBytes>>10)
}

// dependencies renders the objects the template's pods reference. A missing one is skipped:
// the member's pods then report it, as they would in a single cluster.
func (c *Controller) dependencies(ctx context.Context, tmpl *unstructured.Unstructured, workNS, workName string) ([]workv1alpha1.Manifest, error) {
	var out []workv1alpha1.Manifest
	deps, err := c.Interpreters.For(tmpl.GroupVersionKind()).Dependencies(tmpl)
	if err != nil {
		return nil, &renderError{err}
	}
	for _, d := range deps {
		dep := &unstructured.Unstructured{}
		dep.SetAPIVersion(d.APIVersion)
		dep.SetKind(d.Kind)
		if err := c.Reader.Get(ctx, client.ObjectKey{Namespace: tmpl.GetNamespace(), Name: d.Name}, dep); err != nil {
			if meta.IsNoMatchError(err) {
				continue // a kind the control plane does not serve cannot be propagated
			}
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		if kube.IsSystemObject(dep) {
			continue
		}
		m, err := render.Render(dep, c.Interpreters.For(dep.GroupVersionKind()), render.Target{WorkNamespace: workNS, WorkName: workName})
		if err != nil {
			return nil, err
		}
		raw, err := m.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	}
	return out, nil
}

// canaryService is the canary Service a routed workload's Work carries when the team wrote
// none: a copy of the stable Service template under the canary's name, selecting the canary's
// pods. A canary Service template of that name is placed by its own binding instead.
func (c *Controller) canaryService(ctx context.Context, namespace string, t *workv1alpha1.TrafficTargets, workNS, workName string) ([]workv1alpha1.Manifest, error) {
	own := &corev1.Service{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: t.CanaryService}, own); err == nil {
		return nil, nil
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	stable := &unstructured.Unstructured{}
	stable.SetAPIVersion("v1")
	stable.SetKind("Service")
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: t.StableService}, stable); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil // the release says it waits for the stable Service
		}
		return nil, err
	}
	copied := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": t.CanaryService, "namespace": namespace}, "spec": runtimeDeepCopy(stable.Object["spec"])}}
	if labels := stable.GetLabels(); len(labels) > 0 {
		copied.SetLabels(labels)
	}
	// A plain in-cluster Service: node ports, external and load-balancer addresses belong to
	// the stable one (copied they would clash); a headless one stays headless.
	headless, _, _ := unstructured.NestedString(copied.Object, "spec", "clusterIP")
	for _, f := range []string{"clusterIP", "clusterIPs", "healthCheckNodePort", "type", "externalIPs", "externalName", "externalTrafficPolicy",
		"loadBalancerIP", "loadBalancerSourceRanges", "loadBalancerClass", "allocateLoadBalancerNodePorts"} {
		unstructured.RemoveNestedField(copied.Object, "spec", f)
	}
	if headless == "None" {
		_ = unstructured.SetNestedField(copied.Object, "None", "spec", "clusterIP")
	}
	if ports, ok, _ := unstructured.NestedSlice(copied.Object, "spec", "ports"); ok {
		for _, p := range ports {
			if m, ok := p.(map[string]any); ok {
				delete(m, "nodePort")
			}
		}
		_ = unstructured.SetNestedSlice(copied.Object, ports, "spec", "ports")
	}
	m, err := render.Render(copied, c.Interpreters.For(copied.GroupVersionKind()), render.Target{WorkNamespace: workNS, WorkName: workName})
	if err != nil {
		return nil, &renderError{err}
	}
	if err := traffic.Render(m, t, traffic.State{}); err != nil {
		return nil, &renderError{err}
	}
	raw, err := m.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}, nil
}

func runtimeDeepCopy(v any) any {
	return (&unstructured.Unstructured{Object: map[string]any{"v": v}}).DeepCopy().Object["v"]
}

func workSpecEqual(a, b workv1alpha1.WorkSpec) bool {
	if a.DeletionPolicy != b.DeletionPolicy || a.ConflictResolution != b.ConflictResolution || a.Suspend != b.Suspend || len(a.Manifests) != len(b.Manifests) ||
		!apiequality.Semantic.DeepEqual(a.DriftCorrection, b.DriftCorrection) {
		return false
	}
	for i := range a.Manifests {
		var x, y any
		if json.Unmarshal(a.Manifests[i].Raw, &x) != nil || json.Unmarshal(b.Manifests[i].Raw, &y) != nil {
			return false
		}
		if !apiequality.Semantic.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

var healthRank = map[workv1alpha1.Health]int{workv1alpha1.HealthHealthy: 0, workv1alpha1.HealthProgressing: 1, workv1alpha1.HealthUnknown: 2, workv1alpha1.HealthDegraded: 3}

// aggregate writes the binding's per-cluster status and the template's aggregated status.
func (c *Controller) aggregate(ctx context.Context, b workv1alpha1.Binding, tmpl *unstructured.Unstructured, in interpret.Interpreter, ro templateRollout, works map[string]*workv1alpha1.Work, renderErrors map[string]string, interpretErrors []string) (time.Duration, error) {
	bs := b.BindingSpec()
	if _, decided := workv1alpha1.ScheduleOf(b); !decided && len(bs.Clusters) == 0 {
		return 0, nil // the scheduler has not decided yet: nothing to report, no write
	}
	status := b.BindingStatus().DeepCopy()
	status.ObservedGeneration = b.GetGeneration()
	status.Clusters = nil
	overall := workv1alpha1.HealthHealthy
	allApplied := len(bs.Clusters) > 0
	var members []interpret.MemberStatus
	var problems []string
	var drifted []string // Drifted=True messages of the Works (driftCorrection mode Report)
	for _, t := range bs.Clusters {
		if slices.Contains(bs.UnmanagedClusters, t.Name) {
			continue // handed back: no Work, no status
		}
		cs := workv1alpha1.ClusterStatus{Cluster: t.Name, Health: workv1alpha1.HealthUnknown}
		if w, ok := works[t.Name]; ok {
			applied := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.ConditionApplied)
			cs.Applied = applied != nil && applied.Status == metav1.ConditionTrue
			if applied != nil && !cs.Applied {
				cs.Message = applied.Message
				problems = append(problems, t.Name+": "+applied.Message)
			}
			if w.Status.Health != "" {
				cs.Health = w.Status.Health
			}
			// The revision counts as running once the Work's current spec is applied.
			observed := cs.Applied && applied.ObservedGeneration == w.Generation
			if cs.Applied && !observed && cs.Health == workv1alpha1.HealthHealthy {
				// A new render is on its way: the health read is the previous one's, and a
				// Service must not narrow to pods that are not relabelled yet on its word.
				cs.Health = workv1alpha1.HealthProgressing
			}
			if observed {
				cs.Revision, _ = strconv.ParseInt(w.Labels[workv1alpha1.RevisionLabel], 10, 64)
				if _, ok := bs.Revisions.CanaryFor(t.Name); ok {
					cs.CanaryHealth = workv1alpha1.HealthUnknown
					for _, o := range w.Status.Objects {
						if o.Name == render.CanaryName(bs.Resource.Name) && o.Kind == bs.Resource.Kind {
							cs.CanaryHealth = o.Health
						}
					}
				}
			}
			if ic := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.ConditionInterpreted); ic != nil && ic.Status == metav1.ConditionFalse {
				interpretErrors = append(interpretErrors, t.Name+": "+ic.Message)
				if cs.Message == "" {
					cs.Message = ic.Message
				}
			}
			if w.Status.AppliedHash != "" {
				cs.LastApplied = lastApplied(w)
			}
			cs.Drift = w.Status.Drift.DeepCopy()
			if dc := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.ConditionDrifted); dc != nil && dc.Status == metav1.ConditionTrue {
				drifted = append(drifted, dc.Message)
			}
			cs.Status = w.Status.ManifestStatus
			if cs.Health == workv1alpha1.HealthDegraded && cs.Message == "" {
				cs.Message = failingConditions(w.Status.ManifestStatus)
			}
			if w.Status.ManifestStatus != nil {
				m := map[string]any{}
				if json.Unmarshal(w.Status.ManifestStatus.Raw, &m) == nil {
					members = append(members, interpret.MemberStatus{Cluster: t.Name, Status: m, Applied: cs.Applied, Health: cs.Health,
						Revision: cs.Revision, Observed: observed, Current: ro.current(b, cs, observed)})
				}
			}
		}
		if _, had := c.hadWork.Load(workKey(b, t.Name)); cs.LastApplied == nil && !had {
			// This process has had no Work there yet (it just started): what the member
			// last got stays on record until one reports.
			cs.LastApplied = previousApplied(b, t.Name)
		}
		if msg, bad := renderErrors[t.Name]; bad {
			cs.Applied, cs.Message = false, msg
			problems = append(problems, msg)
		}
		if !cs.Applied {
			allApplied = false
		}
		c.clusterState(ctx, b, &cs)
		if healthRank[cs.Health] > healthRank[overall] {
			overall = cs.Health
		}
		status.Clusters = append(status.Clusters, cs)
	}
	sort.Slice(status.Clusters, func(i, j int) bool { return status.Clusters[i].Cluster < status.Clusters[j].Cluster })
	if len(bs.Clusters) == 0 {
		overall = workv1alpha1.HealthUnknown
	}
	status.Health = overall
	applied := metav1.Condition{Type: workv1alpha1.ConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied", Message: "applied in every target cluster", ObservedGeneration: b.GetGeneration()}
	if !allApplied {
		applied.Status, applied.Reason, applied.Message = metav1.ConditionFalse, "NotApplied", "waiting for the members"
		if len(problems) > 0 {
			applied.Reason, applied.Message = "ApplyFailed", fmt.Sprint(problems)
		}
	}
	meta.SetStatusCondition(&status.Conditions, applied)
	meta.RemoveStatusCondition(&status.Conditions, conditionStalled) // no longer refused
	healthy := metav1.Condition{Type: workv1alpha1.ConditionHealthy, Status: metav1.ConditionFalse, Reason: string(overall), Message: "health across clusters: " + string(overall), ObservedGeneration: b.GetGeneration()}
	if overall == workv1alpha1.HealthHealthy {
		healthy.Status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&status.Conditions, healthy)

	var agg map[string]any
	if len(members) == len(status.Clusters) { // every member reported
		var err error
		if agg, err = in.AggregateStatus(tmpl, members); err != nil {
			interpretErrors = append(interpretErrors, err.Error())
			agg = nil
		}
	}
	interpreted := metav1.Condition{Type: workv1alpha1.ConditionInterpreted, Status: metav1.ConditionTrue, Reason: "Interpreted",
		Message: "every interpreter call succeeded", ObservedGeneration: b.GetGeneration()}
	if len(interpretErrors) > 0 {
		msg := strings.Join(interpretErrors, "; ")
		if len(msg) > 4096 {
			msg = msg[:4093] + "..."
		}
		interpreted.Status, interpreted.Reason, interpreted.Message = metav1.ConditionFalse, "InterpreterError", msg
		if old := meta.FindStatusCondition(b.BindingStatus().Conditions, workv1alpha1.ConditionInterpreted); c.Recorder != nil && (old == nil || old.Message != msg) {
			c.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "InterpreterError", "Interpret", "%s", msg)
		}
	}
	meta.SetStatusCondition(&status.Conditions, interpreted)
	if len(drifted) > 0 {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.ConditionDrifted, Status: metav1.ConditionTrue, Reason: "Drifted",
			Message: truncateMessage(strings.Join(drifted, "; ")), ObservedGeneration: b.GetGeneration()})
	} else if meta.FindStatusCondition(status.Conditions, workv1alpha1.ConditionDrifted) != nil {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.ConditionDrifted, Status: metav1.ConditionFalse, Reason: "InSync",
			Message: "the member objects match the manifests", ObservedGeneration: b.GetGeneration()})
	}
	if s, ok := workv1alpha1.ScheduleOf(b); ok {
		// The scheduler's outcome, written with the clusters it chose; reported here, in this
		// controller's one status write.
		sc := metav1.Condition{Type: workv1alpha1.ConditionScheduled, Status: metav1.ConditionFalse, Reason: s.Reason, Message: truncateMessage(s.Message), ObservedGeneration: s.Generation}
		if s.Placed {
			sc.Status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&status.Conditions, sc)
	}
	summarize(status, len(bs.Clusters) > 0, b.GetGeneration())
	c.Board.Put(b, status)
	changed := !apiequality.Semantic.DeepEqual(status, b.BindingStatus()) && !c.wroteAlready(b, status)
	if wait := c.progressWait(b, status, changed); wait > 0 {
		return wait, nil
	}
	if changed {
		seenAt := b.GetResourceVersion()
		if err := writeStatus(ctx, c.Client, b, status); err != nil {
			return 0, err
		}
		c.statusWritten.Store(client.ObjectKeyFromObject(b), writtenStatus{seenAt, status.DeepCopy()})
	}

	if sc := meta.FindStatusCondition(status.Conditions, workv1alpha1.ConditionScheduled); len(bs.Clusters) == 0 && sc != nil && sc.Status == metav1.ConditionFalse {
		// No cluster can run it: the template says so, and tools waiting on it stop waiting.
		return 0, workloadstatus.WriteUnplaced(ctx, c.Client, tmpl, sc.Reason, "no cluster can run it: "+sc.Message, true)
	}
	if agg == nil {
		return 0, nil // not every member reported yet, or the kind's status is not aggregated
	}
	return 0, c.writeTemplateStatus(ctx, tmpl, in, agg, ro, drifted)
}

// writeTemplateStatus merges the members' aggregated status into the template's and writes it
// when it changed: condition times that did not change are kept (from the template, and from
// this controller's last write when the cache does not show it yet), so an unchanged fleet
// costs no write.
func (c *Controller) writeTemplateStatus(ctx context.Context, tmpl *unstructured.Unstructured, in interpret.Interpreter, agg map[string]any, ro templateRollout, drifted []string) error {
	current, _, _ := unstructured.NestedMap(tmpl.Object, "status")
	merged := map[string]any{}
	r, ok := in.(interface{ ReplacesStatus() bool })
	replaces := ok && r.ReplacesStatus()
	for k, v := range current {
		merged[k] = runtime.DeepCopyJSONValue(v) // edited below; current stays what is stored
	}
	for k, v := range agg {
		merged[k] = v
	}
	if replaces {
		// A script returns the whole status: what it leaves out goes (null in the merge patch).
		for k := range current {
			if _, kept := agg[k]; !kept {
				delete(merged, k)
			}
		}
	}
	dropCondition(merged, names.ConditionPropagated) // placed now: the detector's note is stale
	withReleaseVerdict(merged, ro)
	keepConditionTimes(merged, current)
	key := tmpl.GroupVersionKind().String() + "/" + tmpl.GetNamespace() + "/" + tmpl.GetName()
	seenAt := fmt.Sprintf("%s/%d", tmpl.GetUID(), tmpl.GetGeneration())
	if v, ok := c.templateWritten.Load(key); ok && v.(writtenPatch).before == seenAt {
		// The cache may not show the last write yet: its condition times are kept too, or a
		// pass over the stale copy would stamp new ones and write again.
		var last struct {
			Status map[string]any `json:"status"`
		}
		if json.Unmarshal(v.(writtenPatch).patch, &last) == nil {
			keepConditionTimes(merged, last.Status)
		}
	}
	withDriftedCondition(merged, current, drifted)
	if apiequality.Semantic.DeepEqual(normalize(current), normalize(merged)) {
		return nil
	}
	patchStatus := map[string]any{}
	for k, v := range merged {
		patchStatus[k] = v
	}
	for k := range current {
		if _, ok := merged[k]; !ok {
			patchStatus[k] = nil
		}
	}
	patch, _ := json.Marshal(map[string]any{"status": patchStatus})
	// The same patch for the same template and generation was written: the cache may not show
	// it yet, and a built-in kind's stored status drops zero counters, so it never reads equal.
	if v, ok := c.templateWritten.Load(key); ok && v.(writtenPatch).before == seenAt && string(v.(writtenPatch).patch) == string(patch) {
		return nil
	}
	if err := c.Client.Status().Patch(ctx, tmpl, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	c.templateWritten.Store(key, writtenPatch{seenAt, patch})
	return nil
}

// ensureExecutionNamespace creates the cluster's execution namespace if the cache does not
// show it, once per cluster however many passes ask at once.
func (c *Controller) ensureExecutionNamespace(ctx context.Context, ns string) error {
	c.namespaceMu.Lock()
	defer c.namespaceMu.Unlock()
	err := c.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		return nil
	}
	if at, ok := c.namespaceCreated[ns]; ok && time.Since(at) < 30*time.Second {
		return nil // created just now; the cache has not seen it yet
	}
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating execution namespace %s: %w", ns, err)
	}
	if c.namespaceCreated == nil {
		c.namespaceCreated = map[string]time.Time{}
	}
	c.namespaceCreated[ns] = time.Now()
	return nil
}

// progressWriteInterval bounds how often the status of a workload on its way (applied and not
// yet healthy everywhere, or not applied yet) is written: each such write of the binding and
// of the template costs a control-plane write, and most rollouts settle within it. A settled
// state (healthy everywhere, degraded, failed, refused) is written at once, so failover and
// tools waiting on the template lose no time; history and releases read each step from the
// status board before it is written.
const progressWriteInterval = 10 * time.Second

// progressWait says how long a changed status waits before it is written; 0 writes now. A
// workload on its way waits, and so does a change of the members' status details alone (a
// Deployment's counters settling after it turned healthy): neither changes a verdict anyone
// acts on. The wait runs from the first unwritten change.
func (c *Controller) progressWait(b workv1alpha1.Binding, status *workv1alpha1.ResourceBindingStatus, changed bool) time.Duration {
	key := client.ObjectKeyFromObject(b)
	ready := meta.FindStatusCondition(status.Conditions, workv1alpha1.ConditionReady)
	onItsWay := ready != nil && ready.Reason == workv1alpha1.ReasonProgressing
	if !changed || !onItsWay && !apiequality.Semantic.DeepEqual(withoutDetails(status), withoutDetails(b.BindingStatus())) {
		c.progressSince.Delete(key)
		return 0
	}
	first, _ := c.progressSince.LoadOrStore(key, time.Now())
	if wait := progressWriteInterval - time.Since(first.(time.Time)); wait > 0 {
		return wait
	}
	c.progressSince.Delete(key)
	return 0
}

type writtenPatch struct {
	before string
	patch  []byte
}

type writtenStatus struct {
	before string
	status *workv1alpha1.ResourceBindingStatus
}

// wroteAlready says whether status is what this controller wrote last, over the cached
// binding it still sees.
func (c *Controller) wroteAlready(b workv1alpha1.Binding, status *workv1alpha1.ResourceBindingStatus) bool {
	v, ok := c.statusWritten.Load(client.ObjectKeyFromObject(b))
	if !ok {
		return false
	}
	w := v.(writtenStatus)
	return w.before == b.GetResourceVersion() && apiequality.Semantic.DeepEqual(w.status, status)
}

// withoutDetails is a binding status without the members' own status objects.
func withoutDetails(st *workv1alpha1.ResourceBindingStatus) *workv1alpha1.ResourceBindingStatus {
	out := st.DeepCopy()
	for i := range out.Clusters {
		out.Clusters[i].Status = nil
	}
	return out
}

// failingConditions says why a member object reads Degraded, from its status conditions
// (a Deployment's Progressing=False ProgressDeadlineExceeded: "...", ReplicaFailure=True).
func failingConditions(status *runtime.RawExtension) string {
	if status == nil {
		return ""
	}
	var st struct {
		Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
	}
	if json.Unmarshal(status.Raw, &st) != nil {
		return ""
	}
	var parts []string
	for _, c := range st.Conditions {
		failing := c.Status == "False" && (c.Type == "Progressing" || c.Type == "Available" || c.Type == "Ready")
		failing = failing || c.Status == "True" && (c.Type == "ReplicaFailure" || c.Type == "Failed" || c.Type == "Stalled")
		if failing {
			parts = append(parts, strings.TrimSuffix(fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message), ": "))
		}
	}
	return truncateMessage(strings.Join(parts, "; "))
}

func truncateMessage(msg string) string {
	if len(msg) > 4096 {
		return msg[:4093] + "..."
	}
	return msg
}

// withDriftedCondition puts a Drifted condition into the template's aggregated status while
// a member object differs and the policy only reports it (driftCorrection mode Report), and
// takes it out when none does.
func withDriftedCondition(merged, current map[string]any, drifted []string) {
	conds, _ := merged["conditions"].([]any)
	var kept []any
	old := findCondition(current, workv1alpha1.ConditionDrifted)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == workv1alpha1.ConditionDrifted {
			continue
		}
		kept = append(kept, c)
	}
	if len(drifted) > 0 {
		since := metav1.Now().UTC().Format(time.RFC3339)
		if old != nil && old["status"] == string(metav1.ConditionTrue) {
			if t, ok := old["lastTransitionTime"].(string); ok {
				since = t
			}
		}
		kept = append(kept, map[string]any{"type": workv1alpha1.ConditionDrifted, "status": string(metav1.ConditionTrue), "reason": "Drifted",
			"message": truncateMessage(strings.Join(drifted, "; ")), "lastTransitionTime": since, "lastUpdateTime": since})
	}
	if old == nil && len(drifted) == 0 {
		return
	}
	if len(kept) == 0 {
		if _, had := current["conditions"]; had {
			merged["conditions"] = []any{}
		} else {
			delete(merged, "conditions")
		}
		return
	}
	merged["conditions"] = kept
}

// normalize makes JSON numbers comparable whatever their Go type.
func normalize(m map[string]any) any {
	data, _ := json.Marshal(m)
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

// lastApplied is the record of what a Work applied, its objects without their health.
func lastApplied(w *workv1alpha1.Work) *workv1alpha1.LastApplied {
	la := &workv1alpha1.LastApplied{Hash: w.Status.AppliedHash}
	if u := kube.RenderedTemplate(w); u != nil && kube.AppliedThisSpec(w) {
		if n, found, err := unstructured.NestedInt64(u.Object, "spec", "replicas"); found && err == nil {
			la.Replicas = &n
		}
	}
	for _, o := range w.Status.Objects {
		la.Objects = append(la.Objects, workv1alpha1.AppliedObject{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})
	}
	return la
}

// leftoverWarmup is how long after a start the Works of every binding are taken to be
// written again; before, a dependency another workload shares could look unused.
const leftoverWarmup = 30 * time.Second

// buryLeftovers finishes, after a restart, what the last process could not: a cluster whose
// lastApplied record says it got objects, that has no Work and is no longer placed (or the
// binding is going), gets a Work made from the record and deleted at once, so the executor
// removes or hands back those objects as the deletion policy says. It says whether it buried
// any, or how long to wait before it may.
func (c *Controller) buryLeftovers(ctx context.Context, b workv1alpha1.Binding, works []workv1alpha1.Work) (bool, time.Duration, error) {
	bs := b.BindingSpec()
	deleting := !b.GetDeletionTimestamp().IsZero()
	has := map[string]bool{}
	for i := range works {
		has[works[i].Labels[workv1alpha1.ClusterLabel]] = true
	}
	buried := false
	for _, cs := range b.BindingStatus().Clusters {
		if cs.LastApplied == nil || len(cs.LastApplied.Objects) == 0 || has[cs.Cluster] {
			continue
		}
		if _, had := c.hadWork.Load(workKey(b, cs.Cluster)); had {
			continue
		}
		placed := slices.ContainsFunc(bs.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == cs.Cluster })
		unmanaged := slices.Contains(bs.UnmanagedClusters, cs.Cluster)
		if placed && !unmanaged && !deleting {
			continue // its Work is written again below
		}
		if wait := leftoverWarmup - time.Since(c.started); wait > 0 {
			return false, wait, nil
		}
		policy := bs.DeletionPolicy
		if unmanaged {
			policy = workv1alpha1.DeletionRelease
		}
		w := &workv1alpha1.Work{
			ObjectMeta: metav1.ObjectMeta{Namespace: kube.ExecutionNamespacePrefix + cs.Cluster, Name: WorkName(b), Finalizers: []string{names.ExecutorFinalizer},
				Labels: map[string]string{workv1alpha1.BindingNamespaceLabel: b.GetNamespace(), workv1alpha1.BindingNameLabel: b.GetName(), workv1alpha1.ClusterLabel: cs.Cluster}},
			Spec: workv1alpha1.WorkSpec{DeletionPolicy: policy},
		}
		for _, o := range cs.LastApplied.Objects {
			raw, err := json.Marshal(map[string]any{"apiVersion": o.APIVersion, "kind": o.Kind, "metadata": map[string]any{"name": o.Name, "namespace": o.Namespace}})
			if err != nil {
				return false, 0, err
			}
			w.Spec.Manifests = append(w.Spec.Manifests, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
		}
		c.hadWork.Store(workKey(b, cs.Cluster), true)
		if err := c.Client.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, 0, err
		}
		if err := c.Client.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
			return false, 0, err
		}
		buried = true
	}
	return buried, 0, nil
}

// workKey names a binding's Work in one cluster.
func workKey(b workv1alpha1.Binding, cluster string) string {
	return cluster + "/" + WorkName(b)
}

// previousApplied is a cluster's record of what it last got, from the binding's status.
func previousApplied(b workv1alpha1.Binding, cluster string) *workv1alpha1.LastApplied {
	for _, cs := range b.BindingStatus().Clusters {
		if cs.Cluster == cluster && cs.LastApplied != nil {
			return cs.LastApplied.DeepCopy()
		}
	}
	return nil
}

// seededStatus is what a Work created after a restart starts from: what its cluster last
// reported, so that an unchanged render is not applied again and the binding's status does
// not flap while the executor looks again.
func seededStatus(b workv1alpha1.Binding, cluster string, generation int64) (workv1alpha1.WorkStatus, bool) {
	for _, cs := range b.BindingStatus().Clusters {
		if cs.Cluster != cluster || cs.LastApplied == nil {
			continue
		}
		st := workv1alpha1.WorkStatus{AppliedHash: cs.LastApplied.Hash, Health: cs.Health, ManifestStatus: cs.Status, Drift: cs.Drift.DeepCopy()}
		st.Objects = append(st.Objects, cs.LastApplied.Objects...)
		if cs.Applied {
			st.Conditions = []metav1.Condition{{Type: workv1alpha1.ConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied",
				Message: "applied before the controller-manager restarted", ObservedGeneration: generation, LastTransitionTime: metav1.Now()}}
		}
		return st, true
	}
	return workv1alpha1.WorkStatus{}, false
}
