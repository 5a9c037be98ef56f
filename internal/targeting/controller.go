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
// When target policies contradict each other it changes nothing and says so.
package targeting

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/match"
)

// StatusManager owns the placement part of Application status and target policy status.
const StatusManager = "flotilla-targeting"

// Labels on the generated policies, naming their Application.
const (
	AppNameLabel      = "apps.flotilla.dev/application"
	AppNamespaceLabel = "apps.flotilla.dev/application-namespace"
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
		Complete(c)
	if err != nil {
		return err
	}
	ts := &targetStatus{Client: c.Client}
	if err := ctrl.NewControllerManagedBy(mgr).Named("targetpolicy").
		For(&appsv1alpha1.TargetPolicy{}).
		Watches(&appsv1alpha1.Application{}, handler.EnqueueRequestsFromMapFunc(ts.policiesOf)).
		Watches(&clusterv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(ts.all),
			builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, deletionStarted()))).
		Complete(ts); err != nil {
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
// and the kinds of templates it produced; a new commit in status alone changes nothing here.
func placementInputsChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldApp, ok1 := e.ObjectOld.(*appsv1alpha1.Application)
		newApp, ok2 := e.ObjectNew.(*appsv1alpha1.Application)
		if !ok1 || !ok2 {
			return true
		}
		return !reflect.DeepEqual(oldApp.Labels, newApp.Labels) || !reflect.DeepEqual(oldApp.Status.Objects, newApp.Status.Objects) ||
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

// target is one target policy that selects the Application.
type target struct {
	ref     string // NAMESPACE/NAME or NAME
	cluster bool
	spec    *appsv1alpha1.TargetSpec
}

// Reconcile keeps the Application's generated placement in step with its target policies.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := &appsv1alpha1.Application{}
	if err := c.Client.Get(ctx, req.NamespacedName, app); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, c.removeGenerated(ctx, req.Namespace, req.Name, "")
	}
	if !app.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	targets, err := c.targetsOf(ctx, app)
	if err != nil {
		return ctrl.Result{}, err
	}
	st := placedStatus{}
	for _, t := range targets {
		st.TargetPolicies = append(st.TargetPolicies, t.ref)
	}
	if len(targets) == 0 {
		if err := c.removeGenerated(ctx, app.Namespace, app.Name, ""); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, c.writeStatus(ctx, app, st, metav1.ConditionFalse, appsv1alpha1.ReasonNoTarget,
			"no TargetPolicy of namespace "+app.Namespace+" nor ClusterTargetPolicy selects the application's labels: it runs nowhere")
	}
	if field, a, b := conflict(targets); field != "" {
		// Nothing moves: the generated placement stays as it was.
		st.Clusters = slices.Clone(app.Status.Clusters)
		return ctrl.Result{}, c.writeStatus(ctx, app, st, metav1.ConditionFalse, appsv1alpha1.ReasonTargetConflict,
			fmt.Sprintf("target policies %s and %s both set %s and disagree: make them agree or set it in one of them; the placement in force is unchanged", a.describe(), b.describe(), field))
	}
	clusters, left, err := c.clusters(ctx, app, targets)
	if err != nil {
		return ctrl.Result{}, err
	}
	st.Clusters = clusters
	msg := fmt.Sprintf("placed on %d clusters by %s", len(clusters), strings.Join(st.TargetPolicies, ", "))
	if len(left) > 0 {
		msg += fmt.Sprintf("; left out %s: not among Team %s/%s's clusters (spec.clusters.selector)", strings.Join(left, ", "), app.Namespace, tenancyv1alpha1.TeamName)
	}
	if len(app.Status.Objects) == 0 {
		return ctrl.Result{}, c.writeStatus(ctx, app, st, metav1.ConditionFalse, appsv1alpha1.ReasonNoTarget, "the application has produced no templates yet")
	}
	if len(clusters) == 0 {
		if err := c.removeGenerated(ctx, app.Namespace, app.Name, ""); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, c.writeStatus(ctx, app, st, metav1.ConditionFalse, appsv1alpha1.ReasonClustersNotAllowed, "no cluster matches the clusterSelectors of "+strings.Join(st.TargetPolicies, ", ")+strings.TrimPrefix(msg, fmt.Sprintf("placed on %d clusters by %s", len(clusters), strings.Join(st.TargetPolicies, ", "))))
	}
	if err := c.generate(ctx, app, targets, clusters); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, c.writeStatus(ctx, app, st, metav1.ConditionTrue, appsv1alpha1.ReasonPlaced, msg)
}

func (t target) describe() string {
	if t.cluster {
		return "ClusterTargetPolicy " + t.ref
	}
	return "TargetPolicy " + t.ref
}

// targetsOf lists the target policies selecting the Application, namespaced first, by name.
func (c *Controller) targetsOf(ctx context.Context, app *appsv1alpha1.Application) ([]target, error) {
	var tps appsv1alpha1.TargetPolicyList
	if err := c.Client.List(ctx, &tps, client.InNamespace(app.Namespace)); err != nil {
		return nil, err
	}
	var ctps appsv1alpha1.ClusterTargetPolicyList
	if err := c.Client.List(ctx, &ctps); err != nil {
		return nil, err
	}
	var out []target
	for i := range tps.Items {
		p := &tps.Items[i]
		if p.DeletionTimestamp.IsZero() && match.Labels(&p.Spec.AppSelector, app.Labels) {
			out = append(out, target{ref: p.Namespace + "/" + p.Name, spec: &p.Spec})
		}
	}
	for i := range ctps.Items {
		p := &ctps.Items[i]
		if p.DeletionTimestamp.IsZero() && match.Labels(&p.Spec.AppSelector, app.Labels) {
			out = append(out, target{ref: p.Name, cluster: true, spec: &p.Spec})
		}
	}
	slices.SortStableFunc(out, func(a, b target) int {
		if a.cluster != b.cluster {
			if a.cluster {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.ref, b.ref)
	})
	return out, nil
}

// conflict names the first field two target policies set differently.
func conflict(ts []target) (string, target, target) {
	fields := []struct {
		name string
		get  func(*appsv1alpha1.TargetSpec) any
		set  func(*appsv1alpha1.TargetSpec) bool
	}{
		{"spec.replicaScheduling", func(s *appsv1alpha1.TargetSpec) any { return s.ReplicaScheduling }, func(s *appsv1alpha1.TargetSpec) bool { return s.ReplicaScheduling != nil }},
		{"spec.rollout", func(s *appsv1alpha1.TargetSpec) any { return s.Rollout }, func(s *appsv1alpha1.TargetSpec) bool { return s.Rollout != nil }},
		{"spec.deletionPolicy", func(s *appsv1alpha1.TargetSpec) any { return s.DeletionPolicy }, func(s *appsv1alpha1.TargetSpec) bool { return s.DeletionPolicy != "" }},
	}
	for _, f := range fields {
		var first *target
		for i := range ts {
			if !f.set(ts[i].spec) {
				continue
			}
			if first == nil {
				first = &ts[i]
				continue
			}
			if !equality.Semantic.DeepEqual(f.get(first.spec), f.get(ts[i].spec)) {
				return f.name, *first, ts[i]
			}
		}
	}
	return "", target{}, target{}
}

// first returns the first target's value of a field that is set.
func first[T any](ts []target, get func(*appsv1alpha1.TargetSpec) T) T {
	var zero T
	for _, t := range ts {
		if v := get(t.spec); !reflect.ValueOf(&v).Elem().IsZero() {
			return v
		}
	}
	return zero
}

// clusters is the union of the targets' clusters, less those the Team does not allow.
func (c *Controller) clusters(ctx context.Context, app *appsv1alpha1.Application, ts []target) (in, left []string, err error) {
	var cls clusterv1alpha1.ClusterList
	if err := c.Client.List(ctx, &cls); err != nil {
		return nil, nil, err
	}
	team := &tenancyv1alpha1.Team{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: tenancyv1alpha1.TeamName}, team); client.IgnoreNotFound(err) != nil {
		return nil, nil, err
	}
	var allowed func(*clusterv1alpha1.Cluster) bool = func(*clusterv1alpha1.Cluster) bool { return true }
	if team.Spec.Clusters != nil {
		sel, err := metav1.LabelSelectorAsSelector(&team.Spec.Clusters.Selector)
		if err != nil {
			return nil, nil, fmt.Errorf("Team %s/%s spec.clusters.selector: %w", team.Namespace, team.Name, err)
		}
		allowed = func(cl *clusterv1alpha1.Cluster) bool { return sel.Matches(labels.Set(cl.Labels)) }
	}
	for i := range cls.Items {
		cl := &cls.Items[i]
		if !cl.DeletionTimestamp.IsZero() {
			continue
		}
		if !slices.ContainsFunc(ts, func(t target) bool { return match.Labels(&t.spec.ClusterSelector, cl.Labels) }) {
			continue
		}
		if allowed(cl) {
			in = append(in, cl.Name)
		} else {
			left = append(left, cl.Name)
		}
	}
	slices.Sort(in)
	slices.Sort(left)
	return in, left, nil
}

// generated names the policies made for an Application.
func generatedName(app *appsv1alpha1.Application, cluster bool) string {
	if cluster {
		return "app-" + app.Namespace + "-" + app.Name
	}
	return "app-" + app.Name
}

// selectors select the Application's templates, one per kind.
func selectors(app *appsv1alpha1.Application, cluster bool) []policyv1alpha1.ResourceSelector {
	var out []policyv1alpha1.ResourceSelector
	seen := map[string]bool{}
	for _, o := range app.Status.Objects {
		k := o.APIVersion + "/" + o.Kind
		if seen[k] {
			continue
		}
		seen[k] = true
		s := policyv1alpha1.ResourceSelector{APIVersion: o.APIVersion, Kind: o.Kind,
			LabelSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{appsv1alpha1.ApplicationLabel: policyv1alpha1.LabelValue(app.Name)}}}
		if cluster {
			s.Namespace = app.Namespace
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b policyv1alpha1.ResourceSelector) int {
		return cmp.Or(cmp.Compare(a.APIVersion, b.APIVersion), cmp.Compare(a.Kind, b.Kind))
	})
	if len(out) > 64 {
		out = out[:64]
	}
	return out
}

// generate writes the placement (and overrides) for the Application, and removes the other
// kind's when the set of target policies changed between namespaced and platform-wide.
func (c *Controller) generate(ctx context.Context, app *appsv1alpha1.Application, ts []target, clusters []string) error {
	platform := slices.ContainsFunc(ts, func(t target) bool { return t.cluster })
	spec := policyv1alpha1.PropagationSpec{
		ResourceSelectors: selectors(app, platform),
		Placement: policyv1alpha1.Placement{
			ClusterAffinity:   affinity(ts, clusters),
			ReplicaScheduling: first(ts, func(s *appsv1alpha1.TargetSpec) *policyv1alpha1.ReplicaScheduling { return s.ReplicaScheduling }),
		},
		Rollout:        first(ts, func(s *appsv1alpha1.TargetSpec) *policyv1alpha1.RolloutStrategy { return s.Rollout }),
		DeletionPolicy: first(ts, func(s *appsv1alpha1.TargetSpec) policyv1alpha1.DeletionPolicy { return s.DeletionPolicy }),
	}
	var rules []policyv1alpha1.OverrideRule
	for _, t := range ts {
		rules = append(rules, t.spec.OverrideRules...)
	}
	if len(rules) > 32 {
		rules = rules[:32]
	}
	name := generatedName(app, platform)
	generatedLabels := map[string]string{AppNameLabel: app.Name, AppNamespaceLabel: app.Namespace}

	var pp, op client.Object
	if platform {
		pp = &policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: generatedLabels}, Spec: spec}
		if len(rules) > 0 {
			op = &policyv1alpha1.ClusterOverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: generatedLabels},
				Spec: policyv1alpha1.OverrideSpec{ResourceSelectors: spec.ResourceSelectors, OverrideRules: rules}}
		}
	} else {
		owner := []metav1.OwnerReference{{APIVersion: appsv1alpha1.GroupVersion.String(), Kind: "Application", Name: app.Name, UID: app.UID}}
		pp = &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: name, Labels: generatedLabels, OwnerReferences: owner}, Spec: spec}
		if len(rules) > 0 {
			op = &policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: name, Labels: generatedLabels, OwnerReferences: owner},
				Spec: policyv1alpha1.OverrideSpec{ResourceSelectors: spec.ResourceSelectors, OverrideRules: rules}}
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
	// The other kind, and overrides no longer wanted, go.
	return c.removeGenerated(ctx, app.Namespace, app.Name, kindsKept(pp, op))
}

// affinity is one target's clusterSelector as it stands, so relabelling a cluster needs no
// rewrite of the placement (the scheduler follows cluster labels); several targets' union is
// their clusters by name.
func affinity(ts []target, clusters []string) *policyv1alpha1.ClusterAffinity {
	if len(ts) == 1 {
		return &policyv1alpha1.ClusterAffinity{LabelSelector: ts[0].spec.ClusterSelector.DeepCopy()}
	}
	return &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}
}

func kindsKept(objs ...client.Object) string {
	var k []string
	for _, o := range objs {
		if o != nil {
			k = append(k, fmt.Sprintf("%T", o))
		}
	}
	return strings.Join(k, ",")
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
	if specOf(cur) == nil || !equality.Semantic.DeepEqual(specOf(cur), specOf(want)) || !reflect.DeepEqual(cur.GetLabels(), want.GetLabels()) {
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
func (c *Controller) removeGenerated(ctx context.Context, ns, name, keep string) error {
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
			if keep != "" && slices.Contains(strings.Split(keep, ","), fmt.Sprintf("%T", o)) {
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
	return kube.ApplyStatus(ctx, c.Client, app, appsv1alpha1.GroupVersion.WithKind("Application"), &st, StatusManager)
}
