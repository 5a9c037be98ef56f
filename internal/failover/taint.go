package failover

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
)

// TaintController taints clusters that stay not Ready past GracePeriod.
type TaintController struct {
	Client      client.Client
	Recorder    events.EventRecorder
	GracePeriod time.Duration
	Clock       clock.PassiveClock
}

// SetupWithManager registers the controller.
func (c *TaintController) SetupWithManager(mgr ctrl.Manager) error {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).Named("cluster-failover").
		For(&clusterv1alpha1.Cluster{}).
		Complete(kube.RequeueConflicts(c))
}

// Reconcile adds or removes the unreachable taint.
func (c *TaintController) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cl := &clusterv1alpha1.Cluster{}
	if err := c.Client.Get(ctx, req.NamespacedName, cl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cl.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	ready := meta.FindStatusCondition(cl.Status.Conditions, clusterv1alpha1.ConditionReady)
	tainted := kube.Unreachable(cl)
	if ready == nil {
		return ctrl.Result{}, nil // not probed yet
	}
	if ready.Status == metav1.ConditionTrue {
		if !tainted {
			return ctrl.Result{}, nil
		}
		// A hold-down as long as the grace period: a flapping cluster does not pull every
		// Divided workload back and forth.
		if wait := c.GracePeriod + time.Second - c.Clock.Since(ready.LastTransitionTime.Time); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		return ctrl.Result{}, c.setTaint(ctx, cl, false, "the cluster has been Ready for the grace period again; placements may return")
	}
	if tainted {
		return ctrl.Result{}, nil
	}
	// Condition times keep whole seconds: the cluster turned not Ready at most a second after
	// lastTransitionTime, so the grace period is counted from the end of that second and never
	// cut short.
	notReadyFor := c.Clock.Since(ready.LastTransitionTime.Time)
	if wait := c.GracePeriod + time.Second - notReadyFor; wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	return ctrl.Result{}, c.setTaint(ctx, cl, true, "not Ready for "+notReadyFor.Round(time.Second).String()+" (grace period "+c.GracePeriod.String()+"): "+ready.Message)
}

func (c *TaintController) setTaint(ctx context.Context, cl *clusterv1alpha1.Cluster, on bool, why string) error {
	patch := client.MergeFromWithOptions(cl.DeepCopy(), client.MergeFromWithOptimisticLock{})
	kept := cl.Spec.Taints[:0:0]
	for _, t := range cl.Spec.Taints {
		if t.Key != names.UnreachableTaintKey || t.Effect != clusterv1alpha1.TaintEffectNoExecute { // only ours
			kept = append(kept, t)
		}
	}
	if on {
		now := metav1.NewTime(c.Clock.Now())
		kept = append(kept, clusterv1alpha1.Taint{Key: names.UnreachableTaintKey, Effect: clusterv1alpha1.TaintEffectNoExecute, TimeAdded: &now})
	}
	cl.Spec.Taints = kept
	if err := c.Client.Patch(ctx, cl, patch); err != nil {
		return err // a conflict is retried with the fresh object
	}
	kind, reason := corev1.EventTypeNormal, "Untainted"
	if on {
		kind, reason = corev1.EventTypeWarning, "TaintedUnreachable"
	}
	c.Recorder.Eventf(cl, nil, kind, reason, "Failover", "%s", why)
	return nil
}
