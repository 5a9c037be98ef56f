// Package targeting places Applications by metadata. For each Application it gathers the
// TargetPolicies of its namespace and the ClusterTargetPolicies whose appSelector matches its
// labels, resolves their clusterSelectors against the Clusters' labels (within the namespace's
// Team's clusters), and keeps one generated placement in step: a PropagationPolicy app-NAME in
// the Application's namespace, or a ClusterPropagationPolicy app-NAMESPACE-NAME when a
// ClusterTargetPolicy takes part (so the platform's rollout stays the platform's), plus the
// matching override policy when the target policies carry overrideRules. Scheduling, releases
// and members are the existing machinery's: there is no second scheduler here.
//
// It writes only the generated policies (labelled with the Application), the Placed
// condition, clusters and targetPolicies of Application status, and target policy status.
// When target policies contradict each other it changes nothing and says so. targetplan.PlanFor computes
// the placement without writing; Reconcile writes what it returns, and what-if previews it, so
// the two cannot differ.
package targeting

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1ac "github.com/flotilla-dev/flotilla/api/applyconfiguration/apps/v1alpha1"
	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/targetplan"
)

// StatusManager owns the placement part of Application status and target policy status.
const StatusManager = "flotilla-targeting"

// Labels on the generated policies, naming their Application.
const (
	AppNameLabel      = names.GeneratedAppNameLabel
	AppNamespaceLabel = names.GeneratedAppNamespaceLabel
)

// ConditionPlaced is the Application condition this package owns.
const ConditionPlaced = "Placed"

// Controller reconciles Applications into generated placement policies.
type Controller struct {
	Client   client.Client
	Recorder events.EventRecorder
}

// SetupWithManager registers the application placement controller and the target policy
// status controller.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).Named("targeting").
		// A relabelled cluster wakes every Application at once.
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		For(&appsv1alpha1.Application{}, builder.WithPredicates(placementInputsChanged())).
		Watches(&appsv1alpha1.TargetPolicy{}, handler.EnqueueRequestsFromMapFunc(c.appsIn(func(o client.Object) string { return o.GetNamespace() }))).
		Watches(&appsv1alpha1.ClusterTargetPolicy{}, handler.EnqueueRequestsFromMapFunc(c.appsIn(func(client.Object) string { return "" }))).
		Watches(&tenancyv1alpha1.Team{}, handler.EnqueueRequestsFromMapFunc(c.appsIn(func(o client.Object) string { return o.GetNamespace() }))).
		// Relabelling, joining or unjoining a cluster moves placements.
		Watches(&clusterv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(c.appsIn(func(client.Object) string { return "" })),
			builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, deletionStarted()))).
		// Generated policies changed or deleted by hand are put back; those of a deleted
		// Application are removed (also at start, for deletions missed while down).
		Watches(&policyv1alpha1.PropagationPolicy{}, handler.EnqueueRequestsFromMapFunc(appOfGenerated)).
		Watches(&policyv1alpha1.ClusterPropagationPolicy{}, handler.EnqueueRequestsFromMapFunc(appOfGenerated)).
		Watches(&policyv1alpha1.OverridePolicy{}, handler.EnqueueRequestsFromMapFunc(appOfGenerated)).
		Watches(&policyv1alpha1.ClusterOverridePolicy{}, handler.EnqueueRequestsFromMapFunc(appOfGenerated)).
		Complete(kube.RequeueConflicts(c))
	if err != nil {
		return err
	}
	ts := &targetStatus{Client: c.Client}
	if err := ctrl.NewControllerManagedBy(mgr).Named("targetpolicy").
		For(&appsv1alpha1.TargetPolicy{}).
		Watches(&appsv1alpha1.Application{}, handler.EnqueueRequestsFromMapFunc(ts.policiesOf)).
		Watches(&clusterv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(ts.all),
			builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, deletionStarted()))).
		Complete(kube.RequeueConflicts(ts)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("clustertargetpolicy").
		For(&appsv1alpha1.ClusterTargetPolicy{}).
		Watches(&appsv1alpha1.Application{}, handler.EnqueueRequestsFromMapFunc(ts.clusterPolicies)).
		Watches(&clusterv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(ts.clusterPolicies),
			builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, deletionStarted()))).
		Complete(reconcile.Func(ts.reconcileCluster))
}

// placementInputsChanged passes the Application updates placement depends on: its labels,
// its dependsOn (carried by the generated policy) and the kinds of templates it produced; a
// new commit in status alone changes nothing here.
func placementInputsChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldApp, ok1 := e.ObjectOld.(*appsv1alpha1.Application)
		newApp, ok2 := e.ObjectNew.(*appsv1alpha1.Application)
		if !ok1 || !ok2 {
			return true
		}
		return !reflect.DeepEqual(oldApp.Labels, newApp.Labels) || !reflect.DeepEqual(oldApp.Status.Objects, newApp.Status.Objects) ||
			!reflect.DeepEqual(oldApp.Spec.DependsOn, newApp.Spec.DependsOn) ||
			oldApp.DeletionTimestamp.IsZero() != newApp.DeletionTimestamp.IsZero() || oldApp.UID != newApp.UID
	}}
}

func deletionStarted() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
		CreateFunc: func(event.CreateEvent) bool { return true },
		DeleteFunc: func(event.DeleteEvent) bool { return true },
	}
}

// appsIn lists the Applications of a namespace ("" for all).
func (c *Controller) appsIn(ns func(client.Object) string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var apps appsv1alpha1.ApplicationList
		if err := c.Client.List(ctx, &apps, client.InNamespace(ns(o))); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(apps.Items))
		for _, a := range apps.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&a)})
		}
		return out
	}
}

func appOfGenerated(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	name, ns := l[AppNameLabel], l[AppNamespaceLabel]
	if name == "" || ns == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// Target policies place Applications through PropagationPolicies made for them.
// +kubebuilder:rbac:groups=apps.flotilla.dev,resources=targetpolicies;clustertargetpolicies;applications,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.flotilla.dev,resources=targetpolicies/status;clustertargetpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=policy.flotilla.dev,resources=propagationpolicies;clusterpropagationpolicies,verbs=get;list;watch;create;update;patch;delete

// Reconcile keeps the Application's generated placement in step with its target policies.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := &appsv1alpha1.Application{}
	if err := c.Client.Get(ctx, req.NamespacedName, app); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, c.removeGenerated(ctx, req.Namespace, req.Name, nil)
	}
	if !app.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	plan, err := targetplan.PlanFor(ctx, c.Client, app, nil)
	if err != nil {
		return ctrl.Result{}, err
	}
	st := placedStatus{TargetPolicies: plan.TargetPolicies, Clusters: plan.Clusters}
	placed := metav1.ConditionFalse
	switch {
	case plan.Placed():
		var taken *nameTakenError
		if err := c.generate(ctx, app, &plan); errors.As(err, &taken) {
			return ctrl.Result{}, c.writeStatus(ctx, app, st, metav1.ConditionFalse, appsv1alpha1.ReasonPolicyNameTaken, taken.Error())
		} else if err != nil {
			return ctrl.Result{}, err
		}
		placed = metav1.ConditionTrue
	case plan.Keep:
		// Nothing moves: the generated placement stays as it was.
	default:
		if err := c.removeGenerated(ctx, app.Namespace, app.Name, nil); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, c.writeStatus(ctx, app, st, placed, plan.Reason, plan.Message)
}

// generate writes the planned placement (and overrides) for the Application, and removes the
// other kind's when the set of target policies changed between namespaced and platform-wide.
func (c *Controller) generate(ctx context.Context, app *appsv1alpha1.Application, plan *targetplan.Plan) error {
	generatedLabels := map[string]string{AppNameLabel: app.Name, AppNamespaceLabel: app.Namespace}
	overrides := policyv1alpha1.OverrideSpec{ResourceSelectors: plan.Spec.ResourceSelectors, OverrideRules: plan.OverrideRules}
	var pp, op client.Object
	if plan.Kind == "ClusterPropagationPolicy" {
		cpp := &policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: plan.Name, Labels: generatedLabels}, Spec: plan.Spec}
		if plan.RolloutWrittenBy != "" {
			cpp.Annotations = map[string]string{policyv1alpha1.RolloutWrittenByAnnotation: "TargetPolicy " + plan.RolloutWrittenBy}
		}
		pp = cpp
		if len(plan.OverrideRules) > 0 {
			op = &policyv1alpha1.ClusterOverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: plan.Name, Labels: generatedLabels}, Spec: overrides}
		}
	} else {
		owner := []metav1.OwnerReference{{APIVersion: appsv1alpha1.GroupVersion.String(), Kind: "Application", Name: app.Name, UID: app.UID}}
		pp = &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: plan.Namespace, Name: plan.Name, Labels: generatedLabels, OwnerReferences: owner}, Spec: plan.Spec}
		if len(plan.OverrideRules) > 0 {
			op = &policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: plan.Namespace, Name: plan.Name, Labels: generatedLabels, OwnerReferences: owner}, Spec: overrides}
		}
	}
	if err := c.ensure(ctx, app, pp); err != nil {
		return err
	}
	if op != nil {
		if err := c.ensure(ctx, app, op); err != nil {
			return err
		}
	}
	// The other kind, overrides no longer wanted, and any named by an earlier naming go.
	return c.removeGenerated(ctx, app.Namespace, app.Name, kept(pp, op))
}

// nameTakenError: the generated placement's name belongs to a policy not generated for the
// Application; reported on it, not retried.
type nameTakenError struct{ msg string }

func (e *nameTakenError) Error() string { return e.msg }

// kept names the generated policies to keep, by type and name.
func kept(objs ...client.Object) []string {
	var k []string
	for _, o := range objs {
		if o != nil {
			k = append(k, fmt.Sprintf("%T/%s", o, o.GetName()))
		}
	}
	return k
}

// ensure creates or updates one generated policy when its spec differs.
func (c *Controller) ensure(ctx context.Context, app *appsv1alpha1.Application, want client.Object) error {
	cur := want.DeepCopyObject().(client.Object)
	err := c.Client.Get(ctx, client.ObjectKeyFromObject(want), cur)
	if apierrors.IsNotFound(err) {
		if err := c.Client.Create(ctx, want); err != nil {
			return fmt.Errorf("creating %T %s: %w", want, want.GetName(), err)
		}
		c.Recorder.Eventf(app, want, corev1.EventTypeNormal, appsv1alpha1.ReasonPlaced, "Generate", "generated %s %s", kindOf(want), want.GetName())
		return nil
	}
	if err != nil {
		return err
	}
	if l := cur.GetLabels(); l[AppNameLabel] != app.Name || l[AppNamespaceLabel] != app.Namespace {
		// Not generated for this Application: never taken over, never fought over.
		return &nameTakenError{fmt.Sprintf("%s %s exists and was not generated for Application %s/%s (labels %s=%q, %s=%q): rename or delete it, or rename the Application",
			kindOf(want), want.GetName(), app.Namespace, app.Name, AppNamespaceLabel, l[AppNamespaceLabel], AppNameLabel, l[AppNameLabel])}
	}
	if specOf(cur) == nil || !equality.Semantic.DeepEqual(specOf(cur), specOf(want)) || !reflect.DeepEqual(cur.GetLabels(), want.GetLabels()) ||
		cur.GetAnnotations()[policyv1alpha1.RolloutWrittenByAnnotation] != want.GetAnnotations()[policyv1alpha1.RolloutWrittenByAnnotation] {
		want.SetResourceVersion(cur.GetResourceVersion())
		if len(want.GetOwnerReferences()) == 0 {
			want.SetOwnerReferences(cur.GetOwnerReferences())
		}
		if err := c.Client.Update(ctx, want); err != nil {
			return fmt.Errorf("updating %s %s: %w", kindOf(want), want.GetName(), err)
		}
	}
	return nil
}

func specOf(o client.Object) any {
	switch p := o.(type) {
	case *policyv1alpha1.PropagationPolicy:
		return &p.Spec
	case *policyv1alpha1.ClusterPropagationPolicy:
		return &p.Spec
	case *policyv1alpha1.OverridePolicy:
		return &p.Spec
	case *policyv1alpha1.ClusterOverridePolicy:
		return &p.Spec
	}
	return nil
}

func kindOf(o client.Object) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", o), "*v1alpha1.")
}

// removeGenerated deletes the Application's generated policies except the kinds kept.
func (c *Controller) removeGenerated(ctx context.Context, ns, name string, keep []string) error {
	sel := client.MatchingLabels{AppNameLabel: name, AppNamespaceLabel: ns}
	lists := []client.ObjectList{&policyv1alpha1.PropagationPolicyList{}, &policyv1alpha1.OverridePolicyList{},
		&policyv1alpha1.ClusterPropagationPolicyList{}, &policyv1alpha1.ClusterOverridePolicyList{}}
	for _, l := range lists {
		opts := []client.ListOption{sel}
		switch l.(type) {
		case *policyv1alpha1.PropagationPolicyList, *policyv1alpha1.OverridePolicyList:
			opts = append(opts, client.InNamespace(ns))
		}
		if err := c.Client.List(ctx, l, opts...); err != nil {
			return err
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return err
		}
		for _, it := range items {
			o := it.(client.Object)
			if slices.Contains(keep, fmt.Sprintf("%T/%s", o, o.GetName())) {
				continue
			}
			if err := c.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}

// placedStatus is the part of Application status this package owns.
type placedStatus struct {
	Conditions     []metav1.Condition `json:"conditions,omitempty"`
	Clusters       []string           `json:"clusters,omitempty"`
	TargetPolicies []string           `json:"targetPolicies,omitempty"`
}

func (c *Controller) writeStatus(ctx context.Context, app *appsv1alpha1.Application, st placedStatus, s metav1.ConditionStatus, reason, msg string) error {
	cond := metav1.Condition{Type: ConditionPlaced, Status: s, Reason: reason, Message: msg, ObservedGeneration: app.Generation, LastTransitionTime: metav1.Now()}
	old := meta.FindStatusCondition(app.Status.Conditions, ConditionPlaced)
	if old != nil && old.Status == s {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	if old != nil && old.Status == s && old.Reason == reason && old.Message == msg &&
		slices.Equal(app.Status.Clusters, st.Clusters) && slices.Equal(app.Status.TargetPolicies, st.TargetPolicies) {
		return nil
	}
	st.Conditions = []metav1.Condition{cond}
	return c.Client.Status().Apply(ctx, st.apply(app), client.FieldOwner(StatusManager), client.ForceOwnership)
}

// apply is st as an apply configuration of the Application's status: the Placed condition,
// and clusters and targetPolicies when not empty (a list left out is given up, so removed).
func (st placedStatus) apply(app *appsv1alpha1.Application) *appsv1alpha1ac.ApplicationApplyConfiguration {
	s := appsv1alpha1ac.ApplicationStatus().
		WithConditions(kube.Conditions(st.Conditions)...).
		WithClusters(st.Clusters...).
		WithTargetPolicies(st.TargetPolicies...)
	return appsv1alpha1ac.Application(app.Name, app.Namespace).WithStatus(s)
}
