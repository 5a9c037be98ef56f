package binding

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// clusterState adds what the cluster itself says to a cluster's status: lost when it is not
// Ready, suspended when writes to it are, and since when the workload is Degraded there.
func (c *Controller) clusterState(ctx context.Context, b workv1alpha1.Binding, cs *workv1alpha1.ClusterStatus) {
	bs := b.BindingSpec()
	cs.Suspended = bs.Suspended(cs.Cluster)
	cl := &clusterv1alpha1.Cluster{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: cs.Cluster}, cl, client.UnsafeDisableDeepCopy); err == nil && !meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ConditionReady) {
		cs.Lost, cs.Health = true, workv1alpha1.HealthUnknown
		cs.Message = fmt.Sprintf("cluster %s is not Ready; the workload there is lost until it returns", cs.Cluster)
	}
	if cs.Health != workv1alpha1.HealthDegraded {
		return
	}
	for _, old := range b.BindingStatus().Clusters {
		if old.Cluster == cs.Cluster && old.DegradedSince != nil {
			cs.DegradedSince = old.DegradedSince
			return
		}
	}
	now := metav1.NewMicroTime(time.Now())
	if c.Clock != nil {
		now = metav1.NewMicroTime(c.Clock.Now())
	}
	cs.DegradedSince = &now
}

// Failover is the binding controller's third seam, a controller of its own: it finishes
// graceful evictions whose replacements are available or whose grace period passed, and moves
// a workload off clusters where it stayed Degraded past the policy's toleration (application
// failover). It writes only the binding's spec.gracefulEvictionTasks (which the scheduler
// opens for cluster failover) and spec.failedClusters, and events; it reads the binding's
// status (written by the binding controller), the Works and the Clusters.
type Failover struct {
	// Client reads Works in Works, everything else in the control plane.
	Client client.Client
	// Works holds the Works, in this process's memory.
	Works    *workstore.Store
	Recorder events.EventRecorder
	// Clock tells the time of tolerations and grace periods; the real clock when nil.
	Clock clock.PassiveClock
}

// SetupWithManager registers the failover controller: a binding's status (its clusters'
// health), its Works' and a cluster's readiness bring it back.
func (c *Failover) SetupWithManager(mgr ctrl.Manager) error {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).Named("binding-failover").
		For(&workv1alpha1.ResourceBinding{}).
		Watches(&workv1alpha1.ClusterResourceBinding{}, &handler.EnqueueRequestForObject{}).
		WatchesRawSource(c.Works.Source(enqueueBindingAfter(releasedStatusSettle))).
		Watches(&clusterv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(c.evicting), builder.WithPredicates(readinessChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(kube.RequeueConflicts(c))
}

// evicting maps a cluster to the bindings with an eviction task on it.
func (c *Failover) evicting(ctx context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	list := &workv1alpha1.ResourceBindingList{}
	if err := c.Client.List(ctx, list); err == nil {
		for i := range list.Items {
			if _, ok := list.Items[i].Spec.EvictionFor(o.GetName()); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
	}
	clusterList := &workv1alpha1.ClusterResourceBindingList{}
	if err := c.Client.List(ctx, clusterList); err == nil {
		for i := range clusterList.Items {
			if _, ok := clusterList.Items[i].Spec.EvictionFor(o.GetName()); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&clusterList.Items[i])})
			}
		}
	}
	return reqs
}

// Reconcile runs one failover pass on a binding.
func (c *Failover) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := workv1alpha1.NewBinding(req.Namespace, req.Name)
	if err := c.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}
	// The Works are only read (whether replacements run): the store's own, not copies.
	list := &workv1alpha1.WorkList{}
	if err := c.Client.List(ctx, list, client.UnsafeDisableDeepCopy, client.MatchingLabels{
		workv1alpha1.BindingNamespaceLabel: b.GetNamespace(), workv1alpha1.BindingNameLabel: b.GetName(),
	}); err != nil {
		return ctrl.Result{}, err
	}
	works := map[string]*workv1alpha1.Work{}
	for i := range list.Items {
		if w := &list.Items[i]; w.DeletionTimestamp.IsZero() {
			works[w.Labels[workv1alpha1.ClusterLabel]] = w
		}
	}
	after, err := c.failover(ctx, b, works, b.BindingSpec().TemplateGeneration)
	return ctrl.Result{RequeueAfter: after}, err
}

// failover finishes graceful evictions whose replacements are available or whose grace
// period passed, and moves the workload off clusters where it stayed Degraded past the
// policy's toleration. It returns when to look again.
func (c *Failover) failover(ctx context.Context, b workv1alpha1.Binding, works map[string]*workv1alpha1.Work, templateGeneration int64) (time.Duration, error) {
	bs := b.BindingSpec()
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	p := &failoverPass{c: c, b: b, bs: bs, now: c.Clock.Now()}
	for _, f := range bs.FailedClusters {
		if f.TemplateGeneration == bs.TemplateGeneration { // a spec change lifts the exclusion
			p.failed = append(p.failed, f)
		}
	}
	p.keepEvictions(ctx, replacementsUp(bs, works))
	p.moveOffDegraded(ctx)
	if apiequality.Semantic.DeepEqual(p.tasks, bs.GracefulEvictionTasks) && apiequality.Semantic.DeepEqual(p.failed, bs.FailedClusters) {
		return p.after, nil
	}
	patch := client.MergeFromWithOptions(b.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	bs.GracefulEvictionTasks, bs.FailedClusters = p.tasks, p.failed
	if err := c.Client.Patch(ctx, b, patch); err != nil {
		return p.after, err
	}
	for _, emit := range p.pending {
		emit()
	}
	return p.after, nil
}

// failoverPass is one failover decision over a binding: the eviction tasks and failed
// clusters it keeps, the events it will emit once they are written, and when to look again.
type failoverPass struct {
	c   *Failover
	b   workv1alpha1.Binding
	bs  *workv1alpha1.ResourceBindingSpec
	now time.Time
	// failed and tasks are what the binding's spec will say (nil when none).
	failed []workv1alpha1.FailedCluster
	tasks  []workv1alpha1.GracefulEvictionTask
	// pending events go out only once the change they report is written: a conflict retries
	// the whole decision, and must not repeat them.
	pending []func()
	after   time.Duration
}

func (p *failoverPass) event(kind, reason, format string, args ...any) {
	p.pending = append(p.pending, func() { p.c.event(p.b, kind, reason, format, args...) })
}

// soon brings the next look forward to d from now.
func (p *failoverPass) soon(d time.Duration) {
	if d > 0 && (p.after == 0 || d < p.after) {
		p.after = d
	}
}

// replacementsUp: every placed cluster applied its Work's current spec (not an earlier
// generation's status) and is healthy.
func replacementsUp(bs *workv1alpha1.ResourceBindingSpec, works map[string]*workv1alpha1.Work) bool {
	up := len(bs.Clusters) > 0
	for _, t := range bs.Clusters {
		w := works[t.Name]
		if slices.Contains(bs.UnmanagedClusters, t.Name) {
			continue
		}
		if w == nil {
			up = false
			continue
		}
		applied := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.ConditionApplied)
		if applied == nil || applied.Status != metav1.ConditionTrue || applied.ObservedGeneration != w.Generation || w.Status.Health != workv1alpha1.HealthHealthy {
			up = false
		}
	}
	return up
}

// keepEvictions keeps the graceful eviction tasks still running: one of a cluster failover
// until the cluster is back, one of an application failover until the template changes, a
// graceful one until its replacements are up or its grace period passed.
func (p *failoverPass) keepEvictions(ctx context.Context, replacementsUp bool) {
	for _, t := range p.bs.GracefulEvictionTasks {
		switch t.PurgeMode {
		case workv1alpha1.PurgeNever:
			if t.Reason == workv1alpha1.EvictionReasonApplicationFailover && !excluded(p.failed, t.Cluster) {
				p.event(corev1.EventTypeNormal, "EvictionDone", "the template changed; the old placement on %s goes", t.Cluster)
				continue
			}
			if t.Reason == workv1alpha1.EvictionReasonClusterFailover && p.c.clusterBack(ctx, t.Cluster) {
				p.event(corev1.EventTypeNormal, "EvictionDone", "cluster %s is back; its old placement goes", t.Cluster)
				continue
			}
		case workv1alpha1.PurgeGraceful:
			// creationTimestamp keeps whole seconds: the task began at most a second after it
			// says, and its grace period is never cut short.
			deadline := t.CreationTimestamp.Add(time.Duration(t.GracePeriodSeconds)*time.Second + time.Second)
			if replacementsUp {
				p.event(corev1.EventTypeNormal, "EvictionDone", "replacements for %s are available; its old placement goes", t.Cluster)
				continue
			}
			if !p.now.Before(deadline) {
				p.event(corev1.EventTypeWarning, "EvictionTimedOut", "replacements for %s are not available after %ds; its old placement goes anyway", t.Cluster, t.GracePeriodSeconds)
				continue
			}
			p.soon(deadline.Sub(p.now))
		default:
			continue
		}
		p.tasks = append(p.tasks, t)
	}
}

// moveOffDegraded fails the workload over from clusters where it stayed Degraded past the
// application failover's toleration, with a graceful eviction unless the policy purges at once.
func (p *failoverPass) moveOffDegraded(ctx context.Context) {
	bs, clusters := p.bs, p.b.BindingStatus().Clusters
	degraded := 0
	for _, cs := range clusters {
		if cs.Health == workv1alpha1.HealthDegraded {
			degraded++
		}
	}
	// Degraded in more than half of several clusters is the workload's own fault (a bad
	// image, a bad config), not a cluster's: moving it would only spread the damage. And until
	// the template changes, it fails over from at most as many clusters as it is placed on, so
	// a broken version does not walk the whole fleet one toleration at a time.
	placed := len(clusters)
	spreadDamage := degraded > 1 && degraded*2 > placed
	app := p.c.applicationFailover(ctx, bs)
	if app == nil || spreadDamage || len(p.failed) >= placed {
		return
	}
	toleration := time.Duration(app.TolerationSeconds) * time.Second
	for _, cs := range clusters {
		if len(p.failed) >= placed {
			break // the limit holds within one pass too
		}
		if cs.DegradedSince == nil || cs.Suspended || excluded(p.failed, cs.Cluster) {
			continue
		}
		if wait := cs.DegradedSince.Add(toleration).Sub(p.now); wait > 0 {
			p.soon(wait)
			continue
		}
		at := metav1.NewTime(p.now.Truncate(time.Second))
		msg := fmt.Sprintf("Degraded in %s since %s, over the toleration of %ds: %s", cs.Cluster, cs.DegradedSince.UTC().Format(time.RFC3339), app.TolerationSeconds, cs.Message)
		p.failed = append(p.failed, workv1alpha1.FailedCluster{Cluster: cs.Cluster, TemplateGeneration: bs.TemplateGeneration, Message: truncate(msg, 1024), Time: at})
		p.event(corev1.EventTypeWarning, "ApplicationFailover", "moving off %s: %s", cs.Cluster, msg)
		mode := string(app.PurgeMode)
		if mode == "" {
			mode = workv1alpha1.PurgeGraceful
		}
		if mode == workv1alpha1.PurgeImmediately {
			continue
		}
		replicas := int32(0)
		for _, t := range bs.Clusters {
			if t.Name == cs.Cluster {
				replicas = t.Replicas
			}
		}
		grace := app.GracePeriodSeconds
		if grace <= 0 {
			grace = 600
		}
		p.tasks = append(p.tasks, workv1alpha1.GracefulEvictionTask{Cluster: cs.Cluster, Replicas: replicas, Reason: workv1alpha1.EvictionReasonApplicationFailover,
			Message: truncate(msg, 1024), PurgeMode: mode, GracePeriodSeconds: grace, CreationTimestamp: at})
	}
}

// clusterBack reports a cluster that is Ready and no longer tainted unreachable.
func (c *Failover) clusterBack(ctx context.Context, name string) bool {
	cl := &clusterv1alpha1.Cluster{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, cl, client.UnsafeDisableDeepCopy); err != nil {
		return false
	}
	return meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ConditionReady) && !kube.Unreachable(cl)
}

func excluded(failed []workv1alpha1.FailedCluster, cluster string) bool {
	for _, f := range failed {
		if f.Cluster == cluster {
			return true
		}
	}
	return false
}

// applicationFailover reads the binding's policy's application failover settings.
func (c *Failover) applicationFailover(ctx context.Context, bs *workv1alpha1.ResourceBindingSpec) *policyv1alpha1.ApplicationFailoverBehavior {
	var spec *policyv1alpha1.PropagationSpec
	if bs.PolicyRef.Kind == "ClusterPropagationPolicy" {
		p := &policyv1alpha1.ClusterPropagationPolicy{}
		if c.Client.Get(ctx, client.ObjectKey{Name: bs.PolicyRef.Name}, p) != nil {
			return nil
		}
		spec = &p.Spec
	} else {
		p := &policyv1alpha1.PropagationPolicy{}
		if c.Client.Get(ctx, client.ObjectKey{Namespace: bs.PolicyRef.Namespace, Name: bs.PolicyRef.Name}, p) != nil {
			return nil
		}
		spec = &p.Spec
	}
	if spec.Failover == nil {
		return nil
	}
	return spec.Failover.Application
}

func (c *Failover) event(b workv1alpha1.Binding, kind, reason, format string, args ...any) {
	if c.Recorder != nil {
		c.Recorder.Eventf(b, nil, kind, reason, "Failover", format, args...)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
