// Package execute applies Works to their member clusters and reports what the members show.
// Works live in the controller-manager's memory (package workstore), so their status costs
// no control-plane write; the binding controller carries what matters into the binding's
// status. Every member call goes through the clustercache; objects are written with
// server-side apply and the field manager `flotilla`. A Work whose manifests hash to what was
// last applied is not applied again; the member objects are watched (only those Flotilla
// manages) and their status flows back into the Work's status. What this process applied is
// remembered in memory only, so each member object also records the hash of the manifest it
// was applied from (an annotation): a restarted process writes an object again only when its
// manifest or the object changed.
//
// An existing member object that Flotilla does not manage is left untouched under Abort (the
// Work says so) and adopted under Overwrite; adoption applies the same spec, so nothing
// restarts. A member that is not Ready only delays its own Works: they are retried later
// without a call to it, and every member call is bounded by a timeout.
//
// Drift: every member event of an unchanged Work compares the rendered objects, after
// Retain, with the informers' copies (see drift.go); no call to the member unless something
// differs. Under Correct the object is re-applied; under Report a server-side dry-run confirms
// the difference and the Work says Drifted=True. Whether an object is Flotilla's is decided by
// its label or by the Work's record of what it applied together with Flotilla's field manager,
// so a label removed by hand is drift, not a foreign object. A periodic pass over every Work
// (DriftCheckInterval) is the safety net for missed events and unlabelled objects.
//
// It must not decide placement or render manifests.
package execute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/events"
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
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// memberCallTimeout bounds every call to a member.
const memberCallTimeout = 15 * time.Second

// statusSettle is how long a changed Work status waits before it is written, so an apply and
// the member controllers' first reactions to it cost one control-plane write, not several.
const statusSettle = time.Second

// releasedStatusSettle is the window for Works of templates released in waves: their health
// gates the next wave, so it is reported sooner.
const releasedStatusSettle = 100 * time.Millisecond

// Executor reconciles Works.
type Executor struct {
	// Client reads and writes Works in Works, everything else in the control plane.
	Client client.Client
	// Works holds the Works, in this process's memory.
	Works   *workstore.Store
	Members *clustercache.Cache
	// Interpreters answers what a kind means; nil serves the built-in interpreters only.
	Interpreters *interpret.Registry
	// changes queues the Works whose member objects changed: straight into the controller's
	// queue, one entry per Work, never dropped.
	changes *kube.QueueSource[reconcile.Request]
	// namespaces remembers member namespaces known to exist, per cluster, to save a call per apply.
	namespaces sync.Map
	// applied remembers the generation and manifests hash last applied per Work, so an apply
	// whose status is not yet written is not repeated, and a cached Work older than what was
	// applied is never applied over it; after a restart the Work's status says the same.
	applied sync.Map
	// dirtySince is when a Work's status first differed from the written one.
	dirtySince sync.Map
	// busyTries counts a Work's applies in a row that a busy member refused (kube.Busy).
	busyTries sync.Map
	// Recorder records DriftCorrected and Drifted events on bindings and templates.
	Recorder events.EventRecorder
	// DriftCheckInterval is how often every Work is compared with its member objects without
	// a member event, as a safety net; 0 turns it off.
	DriftCheckInterval time.Duration
	// Agent makes this the executor of a Pull member's flotilla-agent: it applies the Works of
	// Pull clusters (its own; the agent's mirror holds no others), and the controller-manager's
	// executor leaves them alone.
	Agent bool
	// Clusters answers what the executor must know of a Work's cluster; nil reads the
	// Cluster objects through Client.
	Clusters Clusters
	// EveryReplica runs the executor on every controller-manager replica, not only the
	// leader: sharded, Works holds this replica's clusters' Works only (see package worksync).
	EveryReplica bool
	// drift is the drift status per Work this process last computed (written or about to be).
	drift sync.Map
	// verdicts remember the last drift verdict per member object (see verdictClean).
	verdicts sync.Map
	// appliedGenerations remember the UID and generation each member object had after this
	// executor's last apply, so a cached copy older than that apply is never judged as drift.
	appliedGenerations sync.Map
}

// appliedGeneration is a member object as this executor last applied it.
type appliedGeneration struct {
	uid        types.UID
	generation int64
}

func memberObjectKey(cluster string, gvr schema.GroupVersionResource, ns, name string) string {
	return cluster + "/" + gvr.String() + "/" + ns + "/" + name
}

// olderThanApplied says whether a cached member object predates this executor's last apply
// of it: the informer has not delivered that write yet (its event brings the Work back), so
// a difference from the rendered object is the apply in flight, not a change by hand.
func (e *Executor) olderThanApplied(cluster string, gvr schema.GroupVersionResource, cached *unstructured.Unstructured) bool {
	v, ok := e.appliedGenerations.Load(memberObjectKey(cluster, gvr, cached.GetNamespace(), cached.GetName()))
	if !ok {
		return false
	}
	a := v.(appliedGeneration)
	return a.uid == cached.GetUID() && cached.GetGeneration() < a.generation
}

// SetupWithManager registers the executor.
func (e *Executor) SetupWithManager(mgr ctrl.Manager) error {
	e.changes = kube.NewQueueSource[reconcile.Request]()
	inExecutionNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return strings.HasPrefix(o.GetNamespace(), kube.ExecutionNamespacePrefix)
	})
	if e.DriftCheckInterval > 0 {
		if err := mgr.Add(kube.Runnable(e.checkEveryWork, !e.EveryReplica)); err != nil {
			return err
		}
	}
	opts := controller.Options{MaxConcurrentReconciles: executorWorkers}
	if e.EveryReplica {
		leaderOnly := false
		opts.NeedLeaderElection = &leaderOnly
	}
	b := ctrl.NewControllerManagedBy(mgr).Named("executor")
	if e.Interpreters != nil {
		// A kind's customization changing re-judges health and status of its Works.
		b = b.WatchesRawSource(source.TypedChannel(e.Interpreters.Subscribe(), handler.TypedEnqueueRequestsFromMapFunc(e.worksOfKind)))
	}
	b = b.WatchesRawSource(e.Works.Source(&handler.EnqueueRequestForObject{}, inExecutionNamespace, predicate.GenerationChangedPredicate{}))
	if !e.Agent { // an agent's manager runs against its member, which has no Clusters
		// A member that is reachable again gets its waiting Works (and pending deletions of
		// stale placements) at once, not at their next retry.
		b = b.Watches(&clusterv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(e.worksOfCluster), builder.WithPredicates(becameReady))
	}
	return b.
		WatchesRawSource(e.changes).
		// A pass waits on member round trips far more than it computes: enough passes in
		// flight keep the members busy when many Works arrive at once (a bulk apply measured
		// 3 s of queueing per Work with 8).
		WithOptions(opts).
		Complete(kube.RequeueConflicts(e))
}

// executorWorkers is how many Works are applied at once, across all members.
const executorWorkers = 32

var becameReady = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	DeleteFunc: func(event.DeleteEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*clusterv1alpha1.Cluster)
		n, ok2 := e.ObjectNew.(*clusterv1alpha1.Cluster)
		return ok1 && ok2 && !meta.IsStatusConditionTrue(o.Status.Conditions, clusterv1alpha1.ConditionReady) &&
			meta.IsStatusConditionTrue(n.Status.Conditions, clusterv1alpha1.ConditionReady)
	},
}

// worksOfCluster lists the Works in a cluster's execution namespace.
func (e *Executor) worksOfCluster(ctx context.Context, o client.Object) []reconcile.Request {
	works := &workv1alpha1.WorkList{}
	if err := e.Client.List(ctx, works, client.InNamespace(kube.ExecutionNamespacePrefix+o.GetName())); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(works.Items))
	for i := range works.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&works.Items[i])})
	}
	return reqs
}

// worksOfKind lists the Works of every binding of the kind.
func (e *Executor) worksOfKind(ctx context.Context, kind *unstructured.Unstructured) []reconcile.Request {
	var reqs []reconcile.Request
	for _, b := range kube.BindingsOfKind(ctx, e.Client, kind.GroupVersionKind()) {
		works := &workv1alpha1.WorkList{}
		if err := e.Client.List(ctx, works, client.MatchingLabels{
			workv1alpha1.BindingNamespaceLabel: b.GetNamespace(), workv1alpha1.BindingNameLabel: b.GetName()}); err != nil {
			continue
		}
		for i := range works.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&works.Items[i])})
		}
	}
	return reqs
}

// onMemberChange maps a member object back to its Work.
func (e *Executor) onMemberChange(ev clustercache.ObjectEvent) {
	a := ev.Object.GetAnnotations()
	ns, name := a[workv1alpha1.WorkNamespaceAnnotation], a[workv1alpha1.WorkNameAnnotation]
	if ns == "" || name == "" {
		return
	}
	e.changes.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
}

// The executor applies Works (held in memory; the kind is served for reads) into members and
// reports back; the Work finalizer holds a Work until its member objects are gone.
// +kubebuilder:rbac:groups=work.flotilla.dev,resources=works,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=work.flotilla.dev,resources=works/status;works/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.flotilla.dev,resources=clusters,verbs=get;list;watch

// Reconcile applies one Work or removes its objects.
func (e *Executor) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	stored := &workv1alpha1.Work{}
	if err := e.Client.Get(ctx, req.NamespacedName, stored, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			e.forgetAll(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The manifests and status are only read here (the status is copied before it is
	// worked on), so they stay shared with the store; the metadata, which a finalizer
	// changes, is copied. A copy of the manifests on every pass was most of the
	// executor's garbage under load.
	w := &workv1alpha1.Work{TypeMeta: stored.TypeMeta, ObjectMeta: *stored.ObjectMeta.DeepCopy(), Spec: stored.Spec, Status: stored.Status}
	cluster := w.Labels[workv1alpha1.ClusterLabel]
	if e.clusters().Pull(ctx, cluster) != e.Agent {
		// A Pull cluster's Works are its agent's (the cluster controller lets them go when the
		// agent is silent at unjoin); an agent applies no others.
		return ctrl.Result{}, nil
	}
	health, connected := e.Members.Health(cluster)
	// Unknown (not probed yet, just after a restart) is not a failure: the Works say what they
	// said, and a member that really is down fails its calls within the timeout.
	reachable := connected && health.Readiness != clustercache.ReadinessNotReady
	if !connected && e.connecting(ctx, cluster) {
		// A cluster this replica just took: its connection comes in a moment. Until then the
		// Work is neither "not Ready" nor, when deleted, a cluster that is gone.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if !w.DeletionTimestamp.IsZero() {
		return e.remove(ctx, req.NamespacedName, cluster, w, connected, reachable)
	}
	if !controllerutil.ContainsFinalizer(w, names.ExecutorFinalizer) {
		patch := client.MergeFrom(w.DeepCopy())
		controllerutil.AddFinalizer(w, names.ExecutorFinalizer)
		if err := e.Client.Patch(ctx, w, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	status := w.Status.DeepCopy()
	result, stale := e.applyWork(ctx, req.NamespacedName, cluster, w, status, reachable)
	if stale {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	summarize(status, w.Generation)
	return e.writeStatus(ctx, req.NamespacedName, w, status, result)
}

// forgetAll drops what the executor remembers of a Work that is gone.
func (e *Executor) forgetAll(key types.NamespacedName) {
	e.applied.Delete(key)
	e.dirtySince.Delete(key)
	e.busyTries.Delete(key)
	e.forgetWork(key)
}

// remove carries out a deleted Work's deletion policy (or the unjoining cluster's) on its
// member objects, then lets the Work go.
func (e *Executor) remove(ctx context.Context, key types.NamespacedName, cluster string, w *workv1alpha1.Work, connected, reachable bool) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", cluster, "work", key.String())
	if !controllerutil.ContainsFinalizer(w, names.ExecutorFinalizer) {
		return ctrl.Result{}, nil
	}
	policy := w.Spec.DeletionPolicy
	unjoining, clusterPolicy, err := e.clusters().Unjoining(ctx, cluster)
	if err != nil {
		// An agent that cannot ask whether its cluster is being unjoined deletes nothing on a
		// guess: the cluster's policy (Orphan by default) may be the one that holds.
		log.Info("Cannot tell whether the cluster is being unjoined; the Work's objects wait", "error", err.Error())
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	switch {
	case unjoining && clusterPolicy == clusterv1alpha1.ClusterDeletionRelease:
		policy = workv1alpha1.DeletionRelease
	case unjoining && clusterPolicy == clusterv1alpha1.ClusterDeletionDelete:
		policy = "Delete" // the cluster's rule wins over the binding's Orphan
	}
	switch {
	case w.Spec.Suspend:
		// Suspended means no writes at all, deletes included: the objects stay as they are.
		log.Info("Work deleted while suspended; its member objects are left in place")
	case unjoining && clusterPolicy == clusterv1alpha1.ClusterDeletionOrphan:
		// The cluster leaves the fleet and keeps what runs there.
		log.Info("Cluster unjoined with deletionPolicy Orphan; its objects are left in place")
	case unjoining && !reachable:
		// An unjoined member that does not answer would hold its Cluster for ever: what
		// runs there stays, and the event says so.
		log.Info("Cluster unjoined but not reachable; its objects are left in place", "deletionPolicy", clusterPolicy)
		if e.Recorder != nil {
			e.Recorder.Eventf(&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}}, nil, corev1.EventTypeWarning, "LeftInPlace", "Unjoin",
				"cluster %s does not answer: its objects are left in place instead of %s", cluster, clusterPolicy)
		}
	case policy == workv1alpha1.DeletionRelease && !connected:
		log.Info("Cluster gone; nothing to hand back", "cluster", cluster)
	case policy == workv1alpha1.DeletionRelease:
		if !reachable {
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
		}
		if err := e.releaseObjects(ctx, cluster, w); err != nil {
			return ctrl.Result{}, err
		}
	case policy != "Orphan":
		if !connected {
			// The cluster was unjoined: nobody can reach its objects any more.
			log.Info("Cluster gone; leaving its objects", "cluster", cluster)
		} else if !reachable {
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
		} else if err := e.deleteObjects(ctx, cluster, w); err != nil {
			return ctrl.Result{}, err
		}
	}
	e.forgetAll(key)
	patch := client.MergeFrom(w.DeepCopy())
	controllerutil.RemoveFinalizer(w, names.ExecutorFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(e.Client.Patch(ctx, w, patch))
}

// applyWork applies the Work when its cluster is reachable and records the outcome in
// status. stale: the Work read is older than one already applied; look again shortly.
func (e *Executor) applyWork(ctx context.Context, key types.NamespacedName, cluster string, w *workv1alpha1.Work, status *workv1alpha1.WorkStatus, reachable bool) (result ctrl.Result, stale bool) {
	if !reachable {
		setApplied(status, w, metav1.ConditionFalse, "ClusterNotReady", fmt.Sprintf("cluster %s is not Ready; the Work waits for it", cluster))
		return ctrl.Result{RequeueAfter: 15 * time.Second}, false
	}
	after, err := e.apply(ctx, key, cluster, w, status)
	var conflict *conflictError
	var retain *retainError
	if !kube.Busy(err) {
		e.busyTries.Delete(key)
	}
	switch {
	case errors.Is(err, errStaleWork):
		return ctrl.Result{}, true
	case err == nil:
		result.RequeueAfter = max(after, 0)
	case kube.Busy(err):
		// An overloaded member (a timeout, throttling, "etcdserver: request timed out") or a
		// dropped connection answers a later try: soon, backing off, instead of the wait of
		// a manifest the member refused. A release's wave waits on every such apply.
		setApplied(status, w, metav1.ConditionFalse, "ApplyFailed", err.Error())
		applyFailures.WithLabelValues(cluster, "busy").Inc()
		tries, _ := e.busyTries.Load(key)
		n, _ := tries.(int)
		e.busyTries.Store(key, n+1)
		result.RequeueAfter = kube.BusyBackoff(n)
	case errors.As(err, &conflict):
		setApplied(status, w, metav1.ConditionFalse, "Conflict", err.Error())
	case errors.As(err, &retain):
		// Nothing was applied: the interpreter failed, and says so on the Work and its binding.
		setApplied(status, w, metav1.ConditionFalse, "InterpreterError", err.Error())
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.ConditionInterpreted, Status: metav1.ConditionFalse,
			Reason: "InterpreterError", Message: truncate(err.Error(), 4096), ObservedGeneration: w.Generation})
		result.RequeueAfter = 10 * time.Second
	default:
		setApplied(status, w, metav1.ConditionFalse, "ApplyFailed", err.Error())
		applyFailures.WithLabelValues(cluster, "refused").Inc()
		result.RequeueAfter = 10 * time.Second
	}
	return result, false
}

// writeStatus writes the Work's status once it has settled: a change waits statusSettle
// (less for a released revision) so that a member coming up writes once, not at every step.
func (e *Executor) writeStatus(ctx context.Context, key types.NamespacedName, w *workv1alpha1.Work, status *workv1alpha1.WorkStatus, result ctrl.Result) (ctrl.Result, error) {
	if apiequality.Semantic.DeepEqual(status, &w.Status) {
		e.dirtySince.Delete(key)
		return result, nil
	}
	settle := statusSettle
	if _, released := w.Labels[workv1alpha1.RevisionLabel]; released {
		settle = releasedStatusSettle
	}
	first, _ := e.dirtySince.LoadOrStore(key, time.Now())
	if wait := settle - time.Since(first.(time.Time)); wait > 0 {
		if result.RequeueAfter == 0 || wait < result.RequeueAfter {
			result.RequeueAfter = wait
		}
		return result, nil
	}
	// The whole status is replaced: a merge patch would encode the whole Work twice to find
	// the difference, and the executor is the status's one writer.
	patch, err := statusPatch(status)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := e.Client.Status().Patch(ctx, w, patch); err != nil {
		return ctrl.Result{}, err
	}
	e.dirtySince.Delete(key)
	return result, nil
}

// statusPatch is a JSON patch that sets the whole status.
func statusPatch(status *workv1alpha1.WorkStatus) (client.Patch, error) {
	data, err := json.Marshal([]map[string]any{{"op": "add", "path": "/status", "value": status}})
	if err != nil {
		return nil, err
	}
	return client.RawPatch(types.JSONPatchType, data), nil
}

type appliedWork struct {
	uid        types.UID
	generation int64
	hash       string
	objects    []workv1alpha1.AppliedObject
}

var errStaleWork = errors.New("the cached Work is older than the one last applied")

type conflictError struct{ msg string }

func (c *conflictError) Error() string { return c.msg }

// retainError is a failed Retain call: the object is not applied, since applying it without
// the member-side fields Retain keeps would fight the member's controllers.
type retainError struct{ err error }

func (r *retainError) Error() string { return r.err.Error() }
func (r *retainError) Unwrap() error { return r.err }

func setApplied(status *workv1alpha1.WorkStatus, w *workv1alpha1.Work, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.ConditionApplied, Status: s, Reason: reason, Message: msg, ObservedGeneration: w.Generation})
}

// applyRun is what one apply of a Work gathers across its manifests.
type applyRun struct {
	key     types.NamespacedName
	cluster string
	w       *workv1alpha1.Work
	status  *workv1alpha1.WorkStatus
	member  clustercache.Member
	// unchanged: the manifests are those applied last; only drift and health are looked at.
	unchanged bool
	// templateKind is the kind of the Work's template (its last manifest).
	templateKind schema.GroupKind
	objects      []workv1alpha1.AppliedObject
	// interpretErrors are the interpreter's failures on health and status.
	interpretErrors []string
	// What was found changed by hand: put back (recreated, corrected) or, under Report, left.
	recreated, corrected, reported, newlyReported []workv1alpha1.DriftedObject
	// requeue: when to look again, for objects no member event tells about.
	requeue time.Duration
}

// manifestApply is one manifest's object on its way to the member.
type manifestApply struct {
	obj     *unstructured.Unstructured
	gvk     schema.GroupVersionKind
	mapping *meta.RESTMapping
	ri      dynamic.ResourceInterface
	// live is the member's object as last seen; before, the drifted object a correction
	// replaces.
	live, before *unstructured.Unstructured
	drifted      []driftField
	needApply    bool
	// why the object is applied, for the verbose log: an operator who sees writes to
	// unchanged objects reads here what made each one.
	why string
	// hash is the manifest's, recorded on the member object (ManifestHashAnnotation).
	hash string
	// unwatched: the member's object lost Flotilla's label, so no event tells of its changes.
	unwatched bool
}

// apply applies the Work's manifests that changed, puts back what drifted in the member
// (or reports it), and gathers health and status. It returns when to look again, if the
// member will not say.
func (e *Executor) apply(ctx context.Context, key types.NamespacedName, cluster string, w *workv1alpha1.Work, status *workv1alpha1.WorkStatus) (time.Duration, error) {
	member, err := e.Members.Get(cluster)
	if err != nil {
		return 0, err
	}
	hash := kube.ManifestsHash(w)
	if last, ok := e.applied.Load(key); ok && last.(appliedWork).uid == w.UID && last.(appliedWork).generation > w.Generation {
		return 0, errStaleWork // the cache lags behind our own apply; the newer Work's event follows
	}
	r := &applyRun{key: key, cluster: cluster, w: w, status: status, member: member, templateKind: templateKind(w)}
	// What this process applied decides; the status only after a restart, as it can lag behind
	// the last apply by the settle window.
	if last, ok := e.applied.Load(key); ok && last.(appliedWork).uid == w.UID {
		r.unchanged = last.(appliedWork).hash == hash
	} else {
		r.unchanged = status.AppliedHash == hash && meta.IsStatusConditionTrue(status.Conditions, workv1alpha1.ConditionApplied)
	}
	for i, m := range w.Spec.Manifests {
		if err := e.applyManifest(ctx, r, i, m); err != nil {
			return 0, err
		}
	}
	previous := status.Objects
	if last, ok := e.applied.Load(key); ok && last.(appliedWork).uid == w.UID {
		previous = last.(appliedWork).objects
	}
	if w.Spec.Suspend {
		// Nothing written: report what the member has and leave the applied record as it was.
		status.Objects = r.objects
		return 0, nil
	}
	if err := e.prune(ctx, cluster, w, previous, r.objects); err != nil {
		return 0, err
	}
	e.recordDrift(ctx, key, cluster, w, status, append(r.recreated, r.corrected...), r.reported, r.newlyReported)
	status.Objects = r.objects
	status.AppliedHash = hash
	e.applied.Store(key, appliedWork{w.UID, w.Generation, hash, r.objects})
	setApplied(status, w, metav1.ConditionTrue, "Applied", "the manifests are applied in the member")
	interpreted := metav1.Condition{Type: workv1alpha1.ConditionInterpreted, Status: metav1.ConditionTrue, Reason: "Interpreted",
		Message: "health and status interpreted", ObservedGeneration: w.Generation}
	if len(r.interpretErrors) > 0 {
		interpreted.Status, interpreted.Reason, interpreted.Message = metav1.ConditionFalse, "InterpreterError", truncate(strings.Join(r.interpretErrors, "; "), 4096)
	}
	meta.SetStatusCondition(&status.Conditions, interpreted)
	return r.requeue, nil
}

// applyManifest takes manifest i to the member: checks the live object for drift when the
// manifests are unchanged, applies when needed, then reads its health (and, for the template,
// its status).
func (e *Executor) applyManifest(ctx context.Context, r *applyRun, i int, m workv1alpha1.Manifest) error {
	ma := &manifestApply{obj: &unstructured.Unstructured{}}
	if err := ma.obj.UnmarshalJSON(m.Raw); err != nil {
		return fmt.Errorf("manifests[%d]: %w", i, err)
	}
	ma.gvk = ma.obj.GroupVersionKind()
	ma.hash = kube.ManifestHash(m.Raw)
	annotations := ma.obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[workv1alpha1.ManifestHashAnnotation] = ma.hash
	ma.obj.SetAnnotations(annotations)
	mapping, err := e.Members.RESTMapping(r.cluster, ma.gvk)
	if err != nil {
		return err
	}
	if err := e.Members.WatchObjects(r.cluster, mapping.Resource, e.onMemberChange); err != nil {
		return err
	}
	ma.mapping, ma.ri = mapping, r.member.Dynamic.Resource(mapping.Resource).Namespace(ma.obj.GetNamespace())
	unchanged := r.unchanged
	if !unchanged && !r.w.Spec.Suspend && e.appliedBefore(ctx, r.cluster, ma) {
		// Applied from this very manifest by an earlier process: looked at as an unchanged
		// manifest is, so only drift is written.
		unchanged = true
	}
	ma.needApply = !unchanged && !r.w.Spec.Suspend
	if ma.needApply && ma.why == "" {
		ma.why = "the manifest is not the one this process last applied, nor the member object's"
	}
	if unchanged && !r.w.Spec.Suspend && e.Members.WaitObjectsSynced(r.cluster, mapping.Resource, 2*time.Second) {
		if err := e.checkLive(ctx, r, ma); err != nil {
			return err
		}
	}
	if ma.needApply {
		if err := e.applyObject(ctx, r, ma); err != nil {
			return err
		}
	}
	obj := ma.obj
	// The cache may not have seen the apply yet: its status would be the old spec's.
	if cached, ok := e.Members.CachedObject(r.cluster, mapping.Resource, obj.GetNamespace(), obj.GetName()); ok &&
		(ma.live == nil || cached.GetGeneration() >= ma.live.GetGeneration()) && !e.olderThanApplied(r.cluster, mapping.Resource, cached) {
		ma.live = cached
	}
	if ma.unwatched && !ma.needApply {
		// Not labelled, so no member event tells of its next change: look again soon.
		r.requeue = 10 * time.Second
	}
	r.objects = append(r.objects, e.observe(r, ma, i == len(r.w.Spec.Manifests)-1))
	return nil
}

// appliedBefore says whether the member object holds the manifest already though this process
// never applied it: a controller-manager keeps its record of what it applied in memory, so
// after a restart (or when a shard of clusters moves to another replica) the member object's
// ManifestHashAnnotation says what it was last applied from. Once this process applied the
// object its own record decides, as the informer's copy may lag behind that apply.
func (e *Executor) appliedBefore(ctx context.Context, cluster string, ma *manifestApply) bool {
	res := ma.mapping.Resource
	if _, applied := e.appliedGenerations.Load(memberObjectKey(cluster, res, ma.obj.GetNamespace(), ma.obj.GetName())); applied {
		ma.why = "this process applied another manifest of it"
		return false
	}
	if e.Members.WaitObjectsSynced(cluster, res, 2*time.Second) {
		// The informer holds Flotilla's objects only (labelled), and the hash covers the
		// Work's name in the manifest: the object is this Work's.
		cached, listed := e.Members.LookupObject(cluster, res, ma.obj.GetNamespace(), ma.obj.GetName())
		switch {
		case !listed:
			// Disconnected since (its shard moved to another replica): the member says.
		case cached == nil:
			ma.why = "not among Flotilla's objects in the member"
			return false
		case cached.GetAnnotations()[workv1alpha1.ManifestHashAnnotation] != ma.hash:
			ma.why = "the member object was applied from manifest " + cached.GetAnnotations()[workv1alpha1.ManifestHashAnnotation]
			return false
		default:
			return true
		}
	}
	// The informer has not listed yet (a busy member just after a restart) or is gone: a read
	// from the member costs less than a write. Its drift is looked at once the informer's
	// events bring the Work back.
	cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	live, err := ma.ri.Get(cctx, ma.obj.GetName(), metav1.GetOptions{})
	cancel()
	switch {
	case err != nil:
		ma.why = "the member's objects are not listed yet and a read failed: " + err.Error()
	case live.GetLabels()[workv1alpha1.ManagedByLabel] != workv1alpha1.ManagedByValue:
		ma.why = "the member object is not labelled as Flotilla's"
	case live.GetAnnotations()[workv1alpha1.ManifestHashAnnotation] != ma.hash:
		ma.why = "the member object was applied from manifest " + live.GetAnnotations()[workv1alpha1.ManifestHashAnnotation]
	default:
		ma.live = live
		return true
	}
	return false
}

// checkLive looks at the member's object of an unchanged manifest: deleted by hand (put back,
// or reported under Report), someone else's (a conflict), or drifted (corrected or reported).
func (e *Executor) checkLive(ctx context.Context, r *applyRun, ma *manifestApply) error {
	obj, gvk, res, w, key, cluster := ma.obj, ma.gvk, ma.mapping.Resource, r.w, r.key, r.cluster
	deletedByHand := func() {
		if w.Spec.DriftMode() == workv1alpha1.DriftReport {
			// Report writes nothing, a deletion included: it is reported, once.
			deleted := driftedObject(obj, []string{"deleted"})
			r.reported = append(r.reported, deleted)
			if e.reportDeletion(key, cluster, res, obj) {
				r.newlyReported = append(r.newlyReported, deleted)
			}
			return
		}
		ma.needApply, ma.why = true, "deleted by hand" // put it back
		r.recreated = append(r.recreated, driftedObject(obj, []string{"deleted"}))
	}
	readErr := func(err error) error {
		return fmt.Errorf("reading %s %s/%s in cluster %s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), cluster, err)
	}
	cached, present := e.Members.CachedObject(cluster, res, obj.GetNamespace(), obj.GetName())
	if !present {
		// Deleted by hand, or Flotilla's label removed (the informer sees labelled
		// objects only): the member says which.
		cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
		found, err := ma.ri.Get(cctx, obj.GetName(), metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			deletedByHand()
		case err != nil:
			return readErr(err)
		case !e.ours(found, w, key, obj) && w.Spec.ConflictResolution != "Overwrite":
			return notOursError(gvk, obj, cluster)
		default:
			cached, ma.unwatched = found, true
		}
	}
	if cached != nil && !ma.unwatched && e.olderThanApplied(cluster, res, cached) {
		// The informer has not seen the last apply yet: judge drift and health on the
		// member's own copy, not on the stale one (which would read as drift, and as the
		// health of the previous spec).
		cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
		fresh, err := ma.ri.Get(cctx, obj.GetName(), metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			cached = nil // deleted since
			deletedByHand()
		case err != nil:
			return readErr(err)
		default:
			cached = fresh
		}
	}
	if cached == nil {
		return nil
	}
	ma.live = cached
	drifted, err := e.checkDrift(key, cluster, res, w, obj, cached)
	if err != nil {
		return err
	}
	ma.drifted = drifted
	if len(drifted) > 0 && w.Spec.DriftMode() == workv1alpha1.DriftCorrect {
		ma.needApply, ma.before, ma.why = true, cached, "drift corrected"
	} else if len(drifted) > 0 {
		var isNew bool
		if ma.drifted, isNew, err = e.confirmDrift(ctx, key, cluster, res, ma.ri, obj, cached, drifted); err != nil {
			return err
		}
		if len(ma.drifted) > 0 {
			r.reported = append(r.reported, driftedObject(obj, fieldPaths(ma.drifted)))
		}
		if isNew {
			r.newlyReported = append(r.newlyReported, driftedObject(obj, fieldPaths(ma.drifted)))
		}
	}
	return nil
}

// notOursError is the conflict of an object that exists in the member and is not Flotilla's.
func notOursError(gvk schema.GroupVersionKind, obj *unstructured.Unstructured, cluster string) error {
	return &conflictError{msg: fmt.Sprintf("%s %s/%s already exists in cluster %s and is not managed by Flotilla; it is left untouched (set the policy's conflictResolution: Overwrite to adopt it)",
		gvk.Kind, obj.GetNamespace(), obj.GetName(), cluster)}
}

// applyObject applies the manifest's object with server-side apply, creating its namespace
// first, keeping what the member owns (scaled replicas, retained fields, ignored drift), and
// records a drift correction.
func (e *Executor) applyObject(ctx context.Context, r *applyRun, ma *manifestApply) error {
	obj, gvk, res, w, cluster := ma.obj, ma.gvk, ma.mapping.Resource, r.w, r.cluster
	if log := ctrl.LoggerFrom(ctx).V(1); log.Enabled() {
		// Why each write to a member happens, for an operator who sees writes they did not expect.
		_, again := e.appliedGenerations.Load(memberObjectKey(cluster, res, obj.GetNamespace(), obj.GetName()))
		log.Info("Applying to the member", "cluster", cluster, "kind", gvk.Kind, "objectNamespace", obj.GetNamespace(), "objectName", obj.GetName(),
			"manifestHash", ma.hash, "why", ma.why, "driftCorrected", fieldPaths(ma.drifted), "appliedByThisProcessBefore", again)
	}
	cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	if ma.mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if err := e.ensureNamespace(cctx, r.member, obj.GetNamespace(), w.Annotations[names.PodSecurityLevelAnnotation]); err != nil {
			return err
		}
	}
	// An object in the managed-object cache is ours already; only an unknown one is read
	// first, to find an object that exists and is not Flotilla's.
	existing, err := e.existing(cctx, cluster, res, ma.ri, obj)
	switch {
	case err == nil && !e.ours(existing, w, r.key, obj) && w.Spec.ConflictResolution != "Overwrite":
		return notOursError(gvk, obj, cluster)
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("reading %s %s/%s in cluster %s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), cluster, err)
	case err == nil:
		retainScaledReplicas(existing, obj)
		if err := e.Interpreters.For(gvk).Retain(obj, existing); err != nil {
			return &retainError{fmt.Errorf("retaining member-side fields of %s %s/%s in cluster %s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), cluster, err)}
		}
	}
	if ma.before != nil && w.Spec.DriftCorrection != nil {
		// Putting drift back, not a new render: what ignoreFields leave to the member stays
		// as the member has it.
		for _, p := range w.Spec.DriftCorrection.IgnoreFields {
			keepLive(obj.Object, ma.before.Object, p)
		}
	}
	live, err := ma.ri.Apply(cctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: kube.FieldManager, Force: true})
	if err != nil {
		e.namespaces.Delete(cluster + "/" + obj.GetNamespace()) // in case the namespace went away
		return fmt.Errorf("applying %s %s/%s to cluster %s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), cluster, err)
	}
	ma.live = live
	e.appliedGenerations.Store(memberObjectKey(cluster, res, obj.GetNamespace(), obj.GetName()), appliedGeneration{live.GetUID(), live.GetGeneration()})
	if ma.before != nil {
		if live.GetResourceVersion() != ma.before.GetResourceVersion() {
			r.corrected = append(r.corrected, driftedObject(obj, fieldPaths(ma.drifted)))
			e.rememberVerdict(r.key, cluster, res, obj, "")
		} else {
			// The member kept the object as it was: what differed was only its form.
			e.rememberVerdict(r.key, cluster, res, obj, verdictNone+driftSignature(ma.drifted))
		}
	}
	return nil
}

// observe reads the health of the manifest's member object and, for the template (the last
// manifest; earlier ones are its dependencies), the status reflected back.
func (e *Executor) observe(r *applyRun, ma *manifestApply, template bool) workv1alpha1.AppliedObject {
	obj, gvk := ma.obj, ma.gvk
	ref := workv1alpha1.AppliedObject{APIVersion: obj.GetAPIVersion(), Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Health: workv1alpha1.HealthUnknown}
	if ma.live == nil {
		if template && e.Members.WaitObjectsSynced(r.cluster, ma.mapping.Resource, 10*time.Millisecond) {
			// The member's informer has it not: never report the health of an object that does
			// not exist. (An informer still syncing leaves health as it was; its events follow.)
			r.status.Health, r.status.ManifestStatus = workv1alpha1.HealthUnknown, nil
		}
		return ref
	}
	in := e.Interpreters.For(gvk)
	var problems []string
	var err error
	if ref.Health, err = in.Health(ma.live); err != nil {
		problems = append(problems, err.Error())
	}
	if !template && gvk.GroupKind() == r.templateKind {
		// A canary beside the template: a routed release raises its weight by this count.
		if ref.AvailableReplicas, err = interpret.AvailableReplicas(in, ma.live); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if template {
		r.status.Health = ref.Health
		st, err := in.ReflectStatus(ma.live)
		if err != nil {
			problems = append(problems, err.Error())
		}
		if st != nil {
			raw, _ := json.Marshal(st)
			r.status.ManifestStatus = &runtime.RawExtension{Raw: raw}
		}
	}
	if len(problems) > 0 {
		ref.Message = truncate(strings.Join(problems, "; "), 2048)
		r.interpretErrors = append(r.interpretErrors, fmt.Sprintf("%s %s: %s", gvk.Kind, obj.GetName(), ref.Message))
	}
	return ref
}

// templateKind is the kind of w's template, its last manifest; empty when unreadable (the
// apply reports that).
func templateKind(w *workv1alpha1.Work) schema.GroupKind {
	if len(w.Spec.Manifests) == 0 {
		return schema.GroupKind{}
	}
	var tm metav1.TypeMeta
	if json.Unmarshal(w.Spec.Manifests[len(w.Spec.Manifests)-1].Raw, &tm) != nil {
		return schema.GroupKind{}
	}
	return tm.GroupVersionKind().GroupKind()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// retainScaledReplicas leaves spec.replicas to whoever scaled the member object through its
// scale subresource (a member HPA, an operator, kubectl scale): Flotilla does not fight
// member-side controllers. Not applying the field releases Flotilla's ownership of it.
func retainScaledReplicas(live, desired *unstructured.Unstructured) {
	for _, mf := range live.GetManagedFields() {
		if mf.Manager == kube.FieldManager || mf.Subresource != "scale" || mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(mf.FieldsV1.Raw, &fields) != nil {
			continue
		}
		if spec, ok := fields["f:spec"].(map[string]any); ok {
			if _, owns := spec["f:replicas"]; owns {
				unstructured.RemoveNestedField(desired.Object, "spec", "replicas")
				return
			}
		}
	}
}

func (e *Executor) existing(ctx context.Context, cluster string, gvr schema.GroupVersionResource, ri dynamic.ResourceInterface, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if cached, ok := e.Members.CachedObject(cluster, gvr, obj.GetNamespace(), obj.GetName()); ok {
		return cached, nil
	}
	return ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
}

func (e *Executor) ensureNamespace(ctx context.Context, m clustercache.Member, ns, podSecurityLevel string) error {
	if ns == "" {
		return nil
	}
	key := m.Name + "/" + ns
	if _, known := e.namespaces.Load(key); known {
		return nil
	}
	if err := ensureNamespace(ctx, m, ns, podSecurityLevel); err != nil {
		return err
	}
	e.namespaces.Store(key, true)
	return nil
}

// Pod Security admission's namespace labels.
const (
	podSecurityEnforceLabel        = "pod-security.kubernetes.io/enforce"
	podSecurityEnforceVersionLabel = "pod-security.kubernetes.io/enforce-version"
)

// namespaceLabels are the labels of a member namespace the executor creates: Flotilla's mark,
// and with a Pod Security level, the labels that make the member enforce it.
func namespaceLabels(podSecurityLevel string) (map[string]string, error) {
	labels := map[string]string{workv1alpha1.ManagedByLabel: workv1alpha1.ManagedByValue}
	switch podSecurityLevel {
	case "":
	case "privileged", "baseline", "restricted":
		labels[podSecurityEnforceLabel] = podSecurityLevel
		labels[podSecurityEnforceVersionLabel] = "latest"
	default:
		return nil, fmt.Errorf("annotation %s is %q: give privileged, baseline or restricted", names.PodSecurityLevelAnnotation, podSecurityLevel)
	}
	return labels, nil
}

func ensureNamespace(ctx context.Context, m clustercache.Member, ns, podSecurityLevel string) error {
	labels, err := namespaceLabels(podSecurityLevel)
	if err != nil {
		return fmt.Errorf("creating namespace %s in cluster %s: %w", ns, m.Name, err)
	}
	_, err = m.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Marked as Flotilla's, so a Namespace template placed later adopts it without a conflict.
		// An existing namespace keeps its labels: its Pod Security level is its owner's choice.
		_, err = m.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("creating namespace %s in cluster %s: %w", ns, m.Name, err)
	}
	return nil
}

// deleteObjects removes the Work's member objects that Flotilla manages; objects it adopted
// are removed too, objects it never wrote are not.
func (e *Executor) deleteObjects(ctx context.Context, cluster string, w *workv1alpha1.Work) error {
	member, objs, err := e.ownObjects(ctx, cluster, w)
	if err != nil {
		return err
	}
	for i := len(objs) - 1; i >= 0; i-- { // the workload before its dependencies
		if err := e.deleteManaged(ctx, cluster, member, objs[i]); err != nil {
			return err
		}
	}
	return nil
}

// ownObjects are the member connection and the Work's manifests in order, without the
// dependencies another workload in the same cluster still uses: those stay as they are when
// this Work goes.
func (e *Executor) ownObjects(ctx context.Context, cluster string, w *workv1alpha1.Work) (clustercache.Member, []*unstructured.Unstructured, error) {
	member, err := e.Members.Get(cluster)
	if err != nil {
		return member, nil, err
	}
	others := &workv1alpha1.WorkList{}
	if err := e.Client.List(ctx, others, client.InNamespace(w.Namespace)); err != nil {
		return member, nil, err
	}
	var out []*unstructured.Unstructured
	for i, m := range w.Spec.Manifests {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(m.Raw); err != nil {
			continue
		}
		if i < len(w.Spec.Manifests)-1 && usedByAnotherWork(others.Items, w, obj) {
			continue
		}
		out = append(out, obj)
	}
	return member, out, nil
}

// releaseObjects hands a Work's member objects back to unmanaged: Flotilla's label,
// annotations and field-manager entries are removed; the objects, their specs and their
// pods are not touched.
func (e *Executor) releaseObjects(ctx context.Context, cluster string, w *workv1alpha1.Work) error {
	member, objs, err := e.ownObjects(ctx, cluster, w)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		mapping, err := e.Members.RESTMapping(cluster, obj.GroupVersionKind())
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
		ri := member.Dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		live, err := ri.Get(cctx, obj.GetName(), metav1.GetOptions{})
		if err == nil {
			err = release(cctx, ri, live)
		}
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing %s %s/%s in cluster %s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), cluster, err)
		}
	}
	return nil
}

// release strips Flotilla's marks from one live object with a JSON patch guarded by its
// resourceVersion: managedFields without Flotilla's entries (ownership leaves, values stay).
func release(ctx context.Context, ri dynamic.ResourceInterface, live *unstructured.Unstructured) error {
	var kept []metav1.ManagedFieldsEntry
	for _, mf := range live.GetManagedFields() {
		if mf.Manager != kube.FieldManager {
			kept = append(kept, mf)
		}
	}
	if len(kept) == 0 {
		kept = []metav1.ManagedFieldsEntry{{}} // the API's way to clear managedFields entirely
	}
	labels, annotations := live.GetLabels(), live.GetAnnotations()
	delete(labels, workv1alpha1.ManagedByLabel)
	delete(annotations, workv1alpha1.WorkNamespaceAnnotation)
	delete(annotations, workv1alpha1.WorkNameAnnotation)
	delete(annotations, workv1alpha1.ManifestHashAnnotation)
	patch := []map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()},
		{"op": "replace", "path": "/metadata/managedFields", "value": kept},
		{"op": "replace", "path": "/metadata/labels", "value": labels},
		{"op": "replace", "path": "/metadata/annotations", "value": annotations},
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, live.GetName(), types.JSONPatchType, data, metav1.PatchOptions{FieldManager: "flotilla-release"})
	return err
}

// deleteManaged removes one member object if it is Flotilla's; one Flotilla never wrote, or a
// kind the member no longer serves, is left alone.
func (e *Executor) deleteManaged(ctx context.Context, cluster string, member clustercache.Member, obj *unstructured.Unstructured) error {
	mapping, err := e.Members.RESTMapping(cluster, obj.GroupVersionKind())
	if err != nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	ri := member.Dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	e.appliedGenerations.Delete(memberObjectKey(cluster, mapping.Resource, obj.GetNamespace(), obj.GetName()))
	live, err := ri.Get(cctx, obj.GetName(), metav1.GetOptions{})
	// Flotilla's label, or fields it applied (a label removed by hand does not make it foreign).
	if err == nil && (live.GetLabels()[workv1alpha1.ManagedByLabel] == workv1alpha1.ManagedByValue || appliedByFlotilla(live)) {
		policy := metav1.DeletePropagationBackground
		err = ri.Delete(cctx, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: ptrUID(live.GetUID())}})
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting %s %s/%s in cluster %s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), cluster, err)
	}
	return nil
}

// prune removes from the member the objects a Work applied before and no longer holds (a
// dependency the template stopped referencing, a canary that finished), unless another Work
// of this cluster still holds them or they are not Flotilla's.
func (e *Executor) prune(ctx context.Context, cluster string, w *workv1alpha1.Work, previous, current []workv1alpha1.AppliedObject) error {
	kept := map[workv1alpha1.AppliedObject]bool{}
	for _, o := range current {
		o.Health, o.AvailableReplicas = "", nil
		kept[o] = true
	}
	var gone []workv1alpha1.AppliedObject
	for _, o := range previous {
		o.Health, o.AvailableReplicas = "", nil
		if !kept[o] {
			gone = append(gone, o)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	member, err := e.Members.Get(cluster)
	if err != nil {
		return err
	}
	others := &workv1alpha1.WorkList{}
	if err := e.Client.List(ctx, others, client.InNamespace(w.Namespace)); err != nil {
		return err
	}
	for _, o := range gone {
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion(o.APIVersion)
		obj.SetKind(o.Kind)
		obj.SetNamespace(o.Namespace)
		obj.SetName(o.Name)
		if usedByAnotherWork(others.Items, w, obj) {
			continue
		}
		if err := e.deleteManaged(ctx, cluster, member, obj); err != nil {
			return fmt.Errorf("pruning what left the Work: %w", err)
		}
	}
	return nil
}

func usedByAnotherWork(works []workv1alpha1.Work, self *workv1alpha1.Work, obj *unstructured.Unstructured) bool {
	for _, o := range works {
		if o.Name == self.Name || !o.DeletionTimestamp.IsZero() {
			continue
		}
		for _, m := range o.Spec.Manifests {
			other := &unstructured.Unstructured{}
			if other.UnmarshalJSON(m.Raw) == nil && other.GroupVersionKind() == obj.GroupVersionKind() &&
				other.GetNamespace() == obj.GetNamespace() && other.GetName() == obj.GetName() {
				return true
			}
		}
	}
	return false
}

func ptrUID(u types.UID) *types.UID { return &u }

// connecting says whether this replica is about to connect to cluster: sharded, the cluster
// controller connects to a cluster a moment after this replica takes it, unless its
// credentials are refused.
func (e *Executor) connecting(ctx context.Context, name string) bool {
	if !e.EveryReplica {
		return false
	}
	cl := &clusterv1alpha1.Cluster{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, cl); err != nil {
		return false
	}
	ready := meta.FindStatusCondition(cl.Status.Conditions, clusterv1alpha1.ConditionReady)
	return ready == nil || ready.Reason != clusterv1alpha1.ReasonCredentialsInvalid
}

// Clusters tells the executor what it must know of a Work's cluster besides its connection.
// The controller-manager's reads the Cluster objects; an agent's asks the control plane.
type Clusters interface {
	// Pull says whether the cluster is a Pull member, whose agent applies its Works.
	Pull(ctx context.Context, name string) bool
	// Unjoining says whether the cluster is being unjoined, and its deletionPolicy (Orphan
	// when unset), which then decides over the Work's own; an error when that cannot be told,
	// and nothing is deleted on a guess.
	Unjoining(ctx context.Context, name string) (bool, clusterv1alpha1.ClusterDeletionPolicy, error)
}

func (e *Executor) clusters() Clusters {
	if e.Clusters != nil {
		return e.Clusters
	}
	return clusterObjects{e.Client}
}

// clusterObjects reads the control plane's Cluster objects; a Cluster gone is neither Pull
// nor being unjoined (its Works are drained as any others).
type clusterObjects struct{ client.Reader }

func (c clusterObjects) Pull(ctx context.Context, name string) bool {
	cl := &clusterv1alpha1.Cluster{}
	return c.Get(ctx, client.ObjectKey{Name: name}, cl, client.UnsafeDisableDeepCopy) == nil && cl.Spec.SyncMode == clusterv1alpha1.SyncModePull
}

func (c clusterObjects) Unjoining(ctx context.Context, name string) (bool, clusterv1alpha1.ClusterDeletionPolicy, error) {
	cl := &clusterv1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, cl, client.UnsafeDisableDeepCopy); err != nil || cl.DeletionTimestamp.IsZero() {
		return false, "", nil
	}
	if cl.Spec.DeletionPolicy == "" {
		return true, clusterv1alpha1.ClusterDeletionOrphan, nil
	}
	return true, cl.Spec.DeletionPolicy, nil
}
