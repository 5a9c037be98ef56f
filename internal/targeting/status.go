package targeting

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1ac "github.com/flotilla-dev/flotilla/api/applyconfiguration/apps/v1alpha1"
	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/match"
)

// targetStatus writes what each target policy selects now: applications and clusters.
type targetStatus struct{ Client client.Client }

func (ts *targetStatus) policiesOf(ctx context.Context, o client.Object) []reconcile.Request {
	var l appsv1alpha1.TargetPolicyList
	if err := ts.Client.List(ctx, &l, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(l.Items))
	for _, p := range l.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return out
}

func (ts *targetStatus) all(ctx context.Context, _ client.Object) []reconcile.Request {
	var l appsv1alpha1.TargetPolicyList
	if err := ts.Client.List(ctx, &l); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(l.Items))
	for _, p := range l.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return out
}

func (ts *targetStatus) clusterPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	var l appsv1alpha1.ClusterTargetPolicyList
	if err := ts.Client.List(ctx, &l); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(l.Items))
	for _, p := range l.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return out
}

// Reconcile writes a TargetPolicy's status.
func (ts *targetStatus) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &appsv1alpha1.TargetPolicy{}
	if err := ts.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, ts.write(ctx, p, p.Generation, &p.Spec, &p.Status, client.InNamespace(p.Namespace))
}

func (ts *targetStatus) reconcileCluster(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &appsv1alpha1.ClusterTargetPolicy{}
	if err := ts.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, ts.write(ctx, p, p.Generation, &p.Spec, &p.Status)
}

func (ts *targetStatus) write(ctx context.Context, p client.Object, gen int64, spec *appsv1alpha1.TargetSpec, cur *appsv1alpha1.TargetStatus, scope ...client.ListOption) error {
	var apps appsv1alpha1.ApplicationList
	if err := ts.Client.List(ctx, &apps, scope...); err != nil {
		return err
	}
	var cls clusterv1alpha1.ClusterList
	if err := ts.Client.List(ctx, &cls); err != nil {
		return err
	}
	st := appsv1alpha1.TargetStatus{ObservedGeneration: gen}
	for _, a := range apps.Items {
		if match.Labels(&spec.AppSelector, a.Labels) {
			st.Applications = append(st.Applications, a.Namespace+"/"+a.Name)
		}
	}
	for _, c := range cls.Items {
		if c.DeletionTimestamp.IsZero() && match.Labels(&spec.ClusterSelector, c.Labels) {
			st.Clusters = append(st.Clusters, c.Name)
		}
	}
	slices.Sort(st.Applications)
	slices.Sort(st.Clusters)
	msg := fmt.Sprintf("selects %d applications and %d clusters; each application's Placed condition says where it runs", len(st.Applications), len(st.Clusters))
	cond := metav1.Condition{Type: appsv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: appsv1alpha1.ReasonPlaced, Message: msg, ObservedGeneration: gen, LastTransitionTime: metav1.Now()}
	if old := meta.FindStatusCondition(cur.Conditions, cond.Type); old != nil && old.Status == cond.Status {
		cond.LastTransitionTime = old.LastTransitionTime
		if old.Message == msg && old.ObservedGeneration == gen && slices.Equal(cur.Applications, st.Applications) && slices.Equal(cur.Clusters, st.Clusters) {
			return nil
		}
	}
	st.Conditions = []metav1.Condition{cond}
	return ts.Client.Status().Apply(ctx, targetStatusApply(p, &st), client.FieldOwner(StatusManager), client.ForceOwnership)
}

// targetStatusApply is st as an apply configuration of p's status (a TargetPolicy, or a
// ClusterTargetPolicy when p has no namespace): each field present exactly when TargetStatus
// serializes it, its omitempty fields left out when empty.
func targetStatusApply(p client.Object, st *appsv1alpha1.TargetStatus) runtime.ApplyConfiguration {
	s := appsv1alpha1ac.TargetStatus().
		WithConditions(kube.Conditions(st.Conditions)...).
		WithApplications(st.Applications...).
		WithClusters(st.Clusters...)
	if st.ObservedGeneration != 0 {
		s.WithObservedGeneration(st.ObservedGeneration)
	}
	if p.GetNamespace() == "" {
		return appsv1alpha1ac.ClusterTargetPolicy(p.GetName()).WithStatus(s)
	}
	return appsv1alpha1ac.TargetPolicy(p.GetName(), p.GetNamespace()).WithStatus(s)
}
