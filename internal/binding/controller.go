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
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	"github.com/flotilla-dev/flotilla/internal/dependency"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/revision"
	"github.com/flotilla-dev/flotilla/internal/statusboard"
	"github.com/flotilla-dev/flotilla/internal/traffic"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// Finalizer holds a binding until its Works are gone.
const Finalizer = names.BindingFinalizer

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

// Controller reconciles bindings into Works and statuses.
type Controller struct {
	// Client reads and writes Works in Works, everything else in the control plane.
	Client client.Client
	// Works holds the Works, in this process's memory.
	Works *workstore.Store
	// written holds the generation of each Work this controller last wrote, until the cache
	// shows it: judging or rewriting a Work from an older cached copy would undo the write.
	written sync.Map
	// rendered holds, per Work, the fingerprint of what its manifests were last rendered from
	// (see renderInputs) and the spec they went into: a pass whose inputs are the same reuses
	// the manifests instead of rendering every cluster's again.
	rendered sync.Map
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

	depsOnce sync.Once
	deps     *dependency.Reader
	// deleteWaits is when each binding/cluster Work's deletion began waiting for dependents.
	deleteWaits sync.Map
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
	for _, obj := range []client.Object{&workv1alpha1.ResourceBinding{}, &workv1alpha1.ClusterResourceBinding{}} {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), obj, dependsOnIndex, dependsOnNamespaces); err != nil {
			return err
		}
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), obj, dependenciesIndex, recordedDependencies); err != nil {
			return err
		}
	}
	if c.Board != nil {
		// A dependency's step changing (healthy in a cluster) frees its held dependents at once.
		b = b.WatchesRawSource(c.Board.Source(c.dependents))
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
	// held are the clusters whose first Work waits for dependencies, with what they wait for;
	// deps and cycle are the dependencies resolved and the cycle found, once per pass.
	held  map[string]string
	deps  *[]dependency.Dep
	cycle *string
	// deletionWaits: a Work of a cluster left waits for its dependents to leave it first.
	deletionWaits bool
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

// Bindings are the binding controller's: their Works (in memory), status and finalizer.
// +kubebuilder:rbac:groups=work.flotilla.dev,resources=resourcebindings;clusterresourcebindings,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=work.flotilla.dev,resources=resourcebindings/status;clusterresourcebindings/status;resourcebindings/finalizers;clusterresourcebindings/finalizers,verbs=get;update;patch
// Override policies change what a binding renders; releases pin revisions.
// +kubebuilder:rbac:groups=policy.flotilla.dev,resources=overridepolicies;clusteroverridepolicies,verbs=get;list;watch
// Revision snapshots of templates that a release pins are read back to render an older revision.
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch

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
	if p.deletionWaits {
		wait = min(max(wait, 0), 2*time.Second)
		if wait == 0 {
			wait = 2 * time.Second
		}
	}
	if len(p.held) > 0 {
		wait = min(max(wait, 0), heldRecheck)
		if wait == 0 {
			wait = heldRecheck
		}
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
	p := &pass{b: b, bs: bs, tmpl: tmpl, works: works, in: c.Interpreters.For(gvk), held: map[string]string{}}
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
	for _, m := range []*sync.Map{&c.written, &c.rendered} {
		m.Range(func(k, _ any) bool {
			if k.(client.ObjectKey).Name == name {
				m.Delete(k)
			}
			return true
		})
	}
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
			// Reverse order: a dependency's objects leave a cluster after its dependents'.
			if ok, err := c.mayDelete(ctx, b, works[i].Labels[workv1alpha1.ClusterLabel]); err != nil || !ok {
				if err != nil {
					return ctrl.Result{}, err
				}
				continue
			}
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
