// Package cluster reconciles Cluster objects: it connects each member through the clustercache
// (from its endpoint and credentials Secret), turns the member's probed health into the
// Cluster's status (Ready condition, version, served APIs, nodes, resource summary) and emits
// events when readiness changes.
//
// It writes only Cluster status, its finalizer and events, never member objects; the one
// exception is the token of an identity `flotilla join` made, which it renews (a TokenRequest in
// the member, through the cache's connection) and stores back in the credentials Secret. A deleted
// (unjoined) Cluster keeps its connection until the executor has drained its Works as the
// Cluster's deletionPolicy says; then its execution namespace goes and the finalizer with it. To keep control-plane writes
// few it patches status only when something observable changed, or to refresh lastProbeTime
// once per HeartbeatInterval; a probe that changes nothing costs one cached read.
package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
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
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// HeartbeatInterval is how stale lastProbeTime may get while nothing else changes.
const HeartbeatInterval = time.Minute

// Reconciler keeps each Cluster's status in step with its member.
type Reconciler struct {
	Client   client.Client
	Cache    *clustercache.Cache
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// AllowExecPlugins names the exec credential plugins the platform allows in member
	// kubeconfigs (--allow-exec-plugin); none by default.
	AllowExecPlugins []string
	// Shard, when set, splits the clusters between the controller-manager's replicas: this
	// replica connects to and reports on the clusters it owns; Leading says whether it is the
	// leader, which drains unjoined clusters (it keeps the Works). Then the controller runs on
	// every replica.
	Shard   Shard
	Leading func() bool
	// AgentSilence is how long a Pull member's agent may stay silent before the Cluster is not
	// Ready; 0 is DefaultAgentSilence.
	AgentSilence time.Duration
	// pullSince is when this process began to handle Pull clusters (see handlingPull).
	pullMu    sync.Mutex
	pullSince time.Time
}

// Shard is this replica's share of the clusters (package shard's Ring).
type Shard interface {
	Owns(cluster string) bool
	// Watch receives whenever the share changes.
	Watch() <-chan struct{}
}

// SetupWithManager registers the controller: Clusters, their credentials Secrets, and the
// cache's probe events.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	opts := ctrlOptions()
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Shard != nil {
		everyReplica := false
		opts.NeedLeaderElection = &everyReplica
		reshard := make(chan event.GenericEvent)
		if err := mgr.Add(&reshardSource{client: mgr.GetClient(), shard: r.Shard, out: reshard}); err != nil {
			return err
		}
		b = b.WatchesRawSource(source.Channel(reshard, &handler.EnqueueRequestForObject{}))
	}
	return b.
		For(&clusterv1alpha1.Cluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(secretToCluster),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == kube.SystemNamespace }))).
		WatchesRawSource(source.Channel(r.Cache.Events(), &handler.EnqueueRequestForObject{})).
		WithOptions(opts).
		Complete(kube.RequeueConflicts(r))
}

func secretToCluster(_ context.Context, o client.Object) []reconcile.Request {
	if name := o.GetLabels()[clusterNameLabel]; name != "" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: name}}}
	}
	return nil
}

func ctrlOptions() controller.Options {
	// Reconciles only read caches and patch status; probing happens in the cache's own
	// goroutines, so a few workers serve many clusters.
	return controller.Options{MaxConcurrentReconciles: 4}
}

// clusterNameLabel matches registration.ClusterNameLabel; registration depends on nothing here.
const clusterNameLabel = "cluster.flotilla.dev/name"

// Clusters: status, and the finalizer that holds an unjoined Cluster until its Works are drained.
// +kubebuilder:rbac:groups=cluster.flotilla.dev,resources=clusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.flotilla.dev,resources=clusters/status;clusters/finalizers,verbs=get;update;patch
// Credentials Secrets are read to connect to members, and rewritten (in flotilla-system only)
// to renew a member's token.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=flotilla-system,resources=secrets,verbs=update;patch
// Each Cluster's execution namespace goes when the Cluster does.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;delete

// Reconcile connects the member and writes its observed status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", req.Name)
	cl := &clusterv1alpha1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cl); err != nil {
		if apierrors.IsNotFound(err) {
			r.Cache.Disconnect(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	pull := cl.Spec.SyncMode == clusterv1alpha1.SyncModePull
	if pull && !r.handlesPull() {
		return ctrl.Result{}, nil // agents report to the leader, which keeps their Works
	}
	if !pull && r.Shard != nil && !r.Shard.Owns(cl.Name) {
		// Another replica connects to it; the leader still drains it when it is unjoined.
		r.Cache.Disconnect(cl.Name)
		if !cl.DeletionTimestamp.IsZero() && r.Leading() {
			return r.finalize(ctx, cl)
		}
		return ctrl.Result{}, nil
	}
	if !cl.DeletionTimestamp.IsZero() {
		if r.Shard != nil && !r.Leading() {
			// The owner keeps the connection while its executor drains the Works the leader deletes.
			return ctrl.Result{RequeueAfter: 10 * time.Second}, r.connect(ctx, cl)
		}
		return r.finalize(ctx, cl)
	}
	if !controllerutil.ContainsFinalizer(cl, clusterv1alpha1.Finalizer) {
		patch := client.MergeFrom(cl.DeepCopy())
		controllerutil.AddFinalizer(cl, clusterv1alpha1.Finalizer)
		if err := r.Client.Patch(ctx, cl, patch); err != nil {
			return ctrl.Result{}, err
		}
	}

	before := cl.DeepCopy()
	status := cl.Status.DeepCopy()
	status.ObservedGeneration = cl.Generation
	if pull {
		return r.reconcilePull(ctx, cl, before, status)
	}

	if err := r.connect(ctx, cl); err != nil {
		r.Cache.Disconnect(cl.Name)
		setReady(status, metav1.ConditionFalse, clusterv1alpha1.ReasonCredentialsInvalid, err.Error(), cl.Generation)
		// Every problem at once: a duplicate shortName is told beside missing credentials.
		if serr := r.checkShortName(ctx, cl, status); serr != nil {
			return ctrl.Result{}, serr
		}
		return ctrl.Result{}, r.patchStatus(ctx, before, status, true)
	}

	renewIn := r.renewToken(ctx, cl, status)
	health, _ := r.Cache.Health(cl.Name)
	switch health.Readiness {
	case clustercache.ReadinessReady:
		setReady(status, metav1.ConditionTrue, clusterv1alpha1.ReasonProbeSucceeded, "the member's API server answers its health probe", cl.Generation)
	case clustercache.ReadinessNotReady:
		setReady(status, metav1.ConditionFalse, clusterv1alpha1.ReasonProbeFailed,
			"health probes keep failing; last error: "+health.LastError, cl.Generation)
	default:
		// No verdict yet (a restarted controller, or failures below the threshold): keep the
		// verdict already in status rather than flapping it to Unknown.
		if meta.FindStatusCondition(status.Conditions, clusterv1alpha1.ConditionReady) != nil {
			break
		}
		msg := "waiting for the first health probe"
		if health.LastError != "" {
			msg = fmt.Sprintf("probe failed (%d so far): %s", health.ConsecutiveFailures, health.LastError)
		}
		setReady(status, metav1.ConditionUnknown, clusterv1alpha1.ReasonProbing, msg, cl.Generation)
	}
	if !health.LastProbeTime.IsZero() {
		t := metav1.NewTime(health.LastProbeTime.Truncate(time.Second))
		status.LastProbeTime = &t
	}
	if health.Version != "" {
		status.KubernetesVersion = health.Version
	}
	if health.APIEnablements != nil {
		status.APIEnablements = health.APIEnablements
	}
	if health.Nodes != nil {
		status.NodeSummary = health.Nodes
		status.ResourceSummary = health.Resources
	}

	if err := r.checkShortName(ctx, cl, status); err != nil {
		return ctrl.Result{}, err
	}
	r.recordTransition(before, status)
	if err := r.patchStatus(ctx, before, status, false); err != nil {
		return ctrl.Result{}, err
	}
	log.V(2).Info("Reconciled cluster", "readiness", health.Readiness)
	return ctrl.Result{RequeueAfter: renewIn}, nil
}

// connect builds the member's REST config from the Cluster and its Secret and hands it to the
// cache; unchanged credentials keep the existing connection.
func (r *Reconciler) connect(ctx context.Context, cl *clusterv1alpha1.Cluster) error {
	cfg, fingerprint, err := MemberConfig(ctx, r.Client, cl, r.AllowExecPlugins)
	if err != nil {
		return err
	}
	return r.Cache.Connect(ctx, cl.Name, cfg, fingerprint)
}

// MemberConfig builds a member's REST config from its Cluster and credentials Secret, with a
// fingerprint of both (unchanged credentials keep a connection); errors name the field and fix.
func MemberConfig(ctx context.Context, c client.Reader, cl *clusterv1alpha1.Cluster, allowExecPlugins []string) (*rest.Config, string, error) {
	ref := cl.Spec.CredentialsSecretRef
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", fmt.Errorf("spec.credentialsSecretRef: secret %s/%s not found; run `flotilla join %s --kubeconfig MEMBER.kubeconfig --overwrite` to store credentials", ref.Namespace, ref.Name, cl.Name)
		}
		return nil, "", fmt.Errorf("spec.credentialsSecretRef: reading secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	data := secret.Data[clusterv1alpha1.CredentialsSecretKey]
	if len(data) == 0 {
		return nil, "", fmt.Errorf("spec.credentialsSecretRef: secret %s/%s has no %q key holding a kubeconfig", ref.Namespace, ref.Name, clusterv1alpha1.CredentialsSecretKey)
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, "", fmt.Errorf("spec.credentialsSecretRef: secret %s/%s: key %q is not a usable kubeconfig: %v", ref.Namespace, ref.Name, clusterv1alpha1.CredentialsSecretKey, err)
	}
	if err := kube.CheckMemberCredentials(kc, allowExecPlugins); err != nil {
		return nil, "", fmt.Errorf("spec.credentialsSecretRef: secret %s/%s: kubeconfig %w", ref.Namespace, ref.Name, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, "", fmt.Errorf("spec.credentialsSecretRef: secret %s/%s: key %q is not a usable kubeconfig: %v", ref.Namespace, ref.Name, clusterv1alpha1.CredentialsSecretKey, err)
	}
	cfg.Host = cl.Spec.Endpoint
	sum := sha256.Sum256(append([]byte(cl.Spec.Endpoint+"\x00"), data...))
	return cfg, hex.EncodeToString(sum[:]), nil
}

func setReady(status *clusterv1alpha1.ClusterStatus, s metav1.ConditionStatus, reason, msg string, gen int64) {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: clusterv1alpha1.ConditionReady, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen,
	})
}

func (r *Reconciler) recordTransition(before *clusterv1alpha1.Cluster, status *clusterv1alpha1.ClusterStatus) {
	if r.Recorder == nil {
		return
	}
	old := meta.FindStatusCondition(before.Status.Conditions, clusterv1alpha1.ConditionReady)
	cur := meta.FindStatusCondition(status.Conditions, clusterv1alpha1.ConditionReady)
	if cur == nil || (old != nil && old.Status == cur.Status) {
		return
	}
	switch cur.Status {
	case metav1.ConditionTrue:
		r.Recorder.Eventf(before, nil, corev1.EventTypeNormal, "ClusterReady", "Probe", "Cluster %s is Ready: %s", before.Name, cur.Message)
	case metav1.ConditionFalse:
		r.Recorder.Eventf(before, nil, corev1.EventTypeWarning, "ClusterNotReady", "Probe", "Cluster %s is not Ready (%s): %s", before.Name, cur.Reason, cur.Message)
	}
}

// patchStatus writes status when it changed, ignoring lastProbeTime unless it is older than
// HeartbeatInterval.
func (r *Reconciler) patchStatus(ctx context.Context, before *clusterv1alpha1.Cluster, status *clusterv1alpha1.ClusterStatus, force bool) error {
	if !force && !r.statusChanged(&before.Status, status) {
		return nil
	}
	after := before.DeepCopy()
	after.Status = *status
	if err := r.Client.Status().Patch(ctx, after, client.MergeFrom(before)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patching status of cluster %s: %w", before.Name, err)
	}
	return nil
}

func (r *Reconciler) statusChanged(old, cur *clusterv1alpha1.ClusterStatus) bool {
	a, b := old.DeepCopy(), cur.DeepCopy()
	a.LastProbeTime, b.LastProbeTime = nil, nil
	if a.Agent != nil && b.Agent != nil {
		a.Agent.LastSeen, b.Agent.LastSeen = nil, nil
	}
	if !apiequality.Semantic.DeepEqual(a, b) {
		return true
	}
	if cur.Agent != nil && cur.Agent.LastSeen != nil &&
		(old.Agent == nil || old.Agent.LastSeen == nil || cur.Agent.LastSeen.Sub(old.Agent.LastSeen.Time) >= lastSeenInterval) {
		return true
	}
	if cur.LastProbeTime == nil {
		return false
	}
	return old.LastProbeTime == nil || r.Clock.Since(old.LastProbeTime.Time) >= HeartbeatInterval
}

// finalize drains a deleted Cluster: its Works are deleted (the executor keeps, deletes or
// releases their member objects as spec.deletionPolicy says, while the connection stays),
// then its execution namespace, then the connection and the finalizer.
func (r *Reconciler) finalize(ctx context.Context, cl *clusterv1alpha1.Cluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(cl, clusterv1alpha1.Finalizer) {
		r.Cache.Disconnect(cl.Name)
		return ctrl.Result{}, nil
	}
	// Delete and Release need the member: a manager (re)started during the drain connects
	// first. Without credentials the executor leaves the objects in place. Sharded, the
	// replica owning the cluster holds the connection.
	pull := cl.Spec.SyncMode == clusterv1alpha1.SyncModePull
	if !pull && (r.Shard == nil || r.Shard.Owns(cl.Name)) {
		_ = r.connect(ctx, cl)
	}
	ns := kube.ExecutionNamespacePrefix + cl.Name
	works := &workv1alpha1.WorkList{}
	if err := r.Client.List(ctx, works, client.InNamespace(ns)); err != nil {
		return ctrl.Result{}, err
	}
	if len(works.Items) > 0 {
		// Works are in memory: the count left is told on the Cluster for `flotilla cluster unjoin`.
		msg := fmt.Sprintf("%d Works left to drain", len(works.Items))
		if c := meta.FindStatusCondition(cl.Status.Conditions, clusterv1alpha1.ConditionDraining); c == nil || c.Message != msg {
			patch := client.MergeFrom(cl.DeepCopy())
			meta.SetStatusCondition(&cl.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ConditionDraining, Status: metav1.ConditionTrue,
				Reason: clusterv1alpha1.ReasonDraining, Message: msg, ObservedGeneration: cl.Generation})
			if err := r.Client.Status().Patch(ctx, cl, patch); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
		}
		silent := pull && r.agentSilentFor(cl) >= r.agentSilence()
		for i := range works.Items {
			w := &works.Items[i]
			if silent {
				if err := r.releaseFromSilentAgent(ctx, w); err != nil {
					return ctrl.Result{}, err
				}
			}
			if w.DeletionTimestamp.IsZero() {
				if err := r.Client.Delete(ctx, w); client.IgnoreNotFound(err) != nil {
					return ctrl.Result{}, err
				}
			}
		}
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	if err := r.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	r.Cache.Disconnect(cl.Name)
	r.Cache.ForgetReported(cl.Name)
	return r.removeFinalizer(ctx, cl, ns)
}

func (r *Reconciler) removeFinalizer(ctx context.Context, cl *clusterv1alpha1.Cluster, ns string) (ctrl.Result, error) {
	patch := client.MergeFrom(cl.DeepCopy())
	controllerutil.RemoveFinalizer(cl, clusterv1alpha1.Finalizer)
	if err := r.Client.Patch(ctx, cl, patch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(cl, nil, corev1.EventTypeNormal, "Unjoined", "Unjoin", "Works drained (deletionPolicy %s); execution namespace %s deleted",
			orphanDefault(cl.Spec.DeletionPolicy), ns)
	}
	return ctrl.Result{}, nil
}

func orphanDefault(p clusterv1alpha1.ClusterDeletionPolicy) clusterv1alpha1.ClusterDeletionPolicy {
	if p == "" {
		return clusterv1alpha1.ClusterDeletionOrphan
	}
	return p
}

// checkShortName reports a shortName another Cluster had first (the older one keeps it; by
// name when both were created in the same second).
func (r *Reconciler) checkShortName(ctx context.Context, cl *clusterv1alpha1.Cluster, status *clusterv1alpha1.ClusterStatus) error {
	if cl.Spec.ShortName == "" {
		meta.RemoveStatusCondition(&status.Conditions, clusterv1alpha1.ConditionShortNameUnique)
		return nil
	}
	list := &clusterv1alpha1.ClusterList{}
	if err := r.Client.List(ctx, list); err != nil {
		return err
	}
	cond := metav1.Condition{Type: clusterv1alpha1.ConditionShortNameUnique, Status: metav1.ConditionTrue, Reason: clusterv1alpha1.ReasonUnique,
		Message: "no other cluster has shortName " + cl.Spec.ShortName, ObservedGeneration: cl.Generation}
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name == cl.Name || o.Spec.ShortName != cl.Spec.ShortName {
			continue
		}
		if o.CreationTimestamp.Before(&cl.CreationTimestamp) || (o.CreationTimestamp.Equal(&cl.CreationTimestamp) && o.Name < cl.Name) {
			cond.Status, cond.Reason = metav1.ConditionFalse, clusterv1alpha1.ReasonDuplicate
			cond.Message = fmt.Sprintf("cluster %s has shortName %s already; give this cluster another (flotilla join %s --kubeconfig MEMBER.kubeconfig --overwrite --short-name NAME, or edit spec.shortName)", o.Name, cl.Spec.ShortName, cl.Name)
			break
		}
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	return nil
}
