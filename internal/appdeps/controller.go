// Package appdeps reports, on each Application with spec.dependsOn, whether its dependencies
// let it run: the DependenciesReady condition, False with reason DependencyCycle naming the
// cycle ("dependency cycle: shop/api -> shop/db -> shop/api"), DependencyNotFound naming a
// dependency that does not exist or that the Application's Team may not read (the same words
// for both), or WaitingForDependencies naming the clusters held, what they wait for and since
// when; True once no cluster waits.
//
// It writes only that condition (server-side apply with its own field manager); holding is
// the binding controller's, and the verdicts are package dependency's, so the two cannot
// disagree. It reads bindings' stored status: a hold is written at once, so the condition
// trails it by one write.
package appdeps

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1ac "github.com/flotilla-dev/flotilla/api/applyconfiguration/apps/v1alpha1"
	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/dependency"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
)

// StatusManager owns the DependenciesReady condition of Applications.
const StatusManager = "flotilla-dependencies"

// Indexes of Applications: by the bindings of their templates, and by the Applications they
// depend on (NAMESPACE/NAME).
const (
	bindingIndex   = "status.objects.binding"
	dependsOnIndex = "spec.dependsOn.application"
)

// recheck looks again while a dependency is missing: another team's Application appearing,
// or a Team's groups changing, reach this controller through no watch.
const recheck = 30 * time.Second

// Controller writes the DependenciesReady condition of Applications.
type Controller struct {
	Client client.Client
	deps   *dependency.Reader
}

// SetupWithManager registers the controller.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	c.deps = &dependency.Reader{Client: c.Client}
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(context.Background(), &appsv1alpha1.Application{}, bindingIndex, func(o client.Object) []string {
		app := o.(*appsv1alpha1.Application)
		if len(app.Spec.DependsOn) == 0 {
			return nil
		}
		var out []string
		for _, obj := range app.Status.Objects {
			out = append(out, names.Binding(obj.Kind, obj.Name))
		}
		return out
	}); err != nil {
		return err
	}
	if err := idx.IndexField(context.Background(), &appsv1alpha1.Application{}, dependsOnIndex, func(o client.Object) []string {
		var out []string
		for _, d := range dependsOn(o.(*appsv1alpha1.Application)) {
			out = append(out, d.String())
		}
		return out
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("appdependencies").
		For(&appsv1alpha1.Application{}).
		// A binding's holds changing, and an Application a cycle or a missing dependency names.
		Watches(&workv1alpha1.ResourceBinding{}, handler.EnqueueRequestsFromMapFunc(c.appsOf(bindingIndex, func(o client.Object) string { return o.GetName() }))).
		Watches(&appsv1alpha1.Application{}, handler.EnqueueRequestsFromMapFunc(c.appsOf(dependsOnIndex, func(o client.Object) string {
			return client.ObjectKeyFromObject(o).String()
		}))).
		Complete(kube.RequeueConflicts(c))
}

func (c *Controller) appsOf(index string, key func(client.Object) string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var apps appsv1alpha1.ApplicationList
		opts := []client.ListOption{client.MatchingFields{index: key(o)}}
		if index == bindingIndex {
			opts = append(opts, client.InNamespace(o.GetNamespace()))
		}
		if err := c.Client.List(ctx, &apps, opts...); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for i := range apps.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&apps.Items[i])})
		}
		return reqs
	}
}

// dependsOn are the Applications app depends on.
func dependsOn(app *appsv1alpha1.Application) []types.NamespacedName {
	var out []types.NamespacedName
	for _, d := range app.Spec.DependsOn {
		ns := d.Namespace
		if ns == "" {
			ns = app.Namespace
		}
		out = append(out, types.NamespacedName{Namespace: ns, Name: d.Name})
	}
	return out
}

// Reconcile works out and writes one Application's DependenciesReady condition.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := &appsv1alpha1.Application{}
	if err := c.Client.Get(ctx, req.NamespacedName, app); err != nil || !app.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	old := meta.FindStatusCondition(app.Status.Conditions, appsv1alpha1.ConditionDependenciesReady)
	if len(app.Spec.DependsOn) == 0 {
		if old == nil {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, c.write(ctx, app, nil) // gives the condition up, so it goes
	}
	cond, err := c.verdict(ctx, app)
	if err != nil {
		return ctrl.Result{}, err
	}
	cond.Type, cond.ObservedGeneration, cond.LastTransitionTime = appsv1alpha1.ConditionDependenciesReady, app.Generation, metav1.Now()
	if old != nil && old.Status == cond.Status {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	var res ctrl.Result
	if cond.Reason == appsv1alpha1.ReasonDependencyNotFound || cond.Reason == appsv1alpha1.ReasonWaitingForDependencies {
		res.RequeueAfter = recheck
	}
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message && old.ObservedGeneration == cond.ObservedGeneration {
		return res, nil
	}
	return res, c.write(ctx, app, &cond)
}

// verdict is the condition's status, reason and message: a cycle first (it never resolves by
// waiting), then dependencies not found or not readable, then the clusters held.
func (c *Controller) verdict(ctx context.Context, app *appsv1alpha1.Application) (metav1.Condition, error) {
	start := client.ObjectKeyFromObject(app)
	next := func(k types.NamespacedName) []types.NamespacedName {
		a := app
		if k != start {
			a = &appsv1alpha1.Application{}
			if c.Client.Get(ctx, k, a) != nil {
				return nil
			}
		}
		var out []types.NamespacedName
		for _, d := range dependsOn(a) {
			if ok, err := c.deps.Readable(ctx, a.Namespace, d.Namespace); err == nil && ok {
				out = append(out, d) // a cycle through what a team may not read is not followed
			}
		}
		return out
	}
	if cycle := dependency.FindCycle(start, next, 64); cycle != nil {
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: appsv1alpha1.ReasonDependencyCycle,
			Message: dependency.CycleMessage(cycle, types.NamespacedName.String) + "; remove one of these dependencies (spec.dependsOn)"}, nil
	}
	var missing []string
	for _, d := range dependsOn(app) {
		ok, err := c.deps.Readable(ctx, app.Namespace, d.Namespace)
		if err != nil {
			return metav1.Condition{}, err
		}
		if ok && c.Client.Get(ctx, d, &appsv1alpha1.Application{}) == nil {
			continue
		}
		missing = append(missing, "Application "+d.String())
	}
	if len(missing) > 0 {
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: appsv1alpha1.ReasonDependencyNotFound,
			Message: fmt.Sprintf("spec.dependsOn: %s not found or not readable by the namespace's Team; the application waits in every cluster", strings.Join(missing, ", "))}, nil
	}
	waits, err := c.waits(ctx, app)
	if err != nil {
		return metav1.Condition{}, err
	}
	if len(waits) > 0 {
		return metav1.Condition{Status: metav1.ConditionFalse, Reason: appsv1alpha1.ReasonWaitingForDependencies, Message: truncate(strings.Join(waits, "; "))}, nil
	}
	return metav1.Condition{Status: metav1.ConditionTrue, Reason: appsv1alpha1.ReasonDependenciesReady,
		Message: "no cluster waits for a dependency"}, nil
}

// waits are the clusters where a template of app waits for dependencies: "m3: waits since
// 15:04:05Z for Application shop/db is Degraded in cluster m3", one per cluster.
func (c *Controller) waits(ctx context.Context, app *appsv1alpha1.Application) ([]string, error) {
	byCluster := map[string]string{}
	for _, o := range app.Status.Objects {
		b := workv1alpha1.NewBinding(app.Namespace, names.Binding(o.Kind, o.Name))
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return nil, err
			}
			continue
		}
		for _, cs := range b.BindingStatus().Clusters {
			if cs.WaitingFor == "" || byCluster[cs.Cluster] != "" {
				continue
			}
			since := ""
			if cs.WaitingSince != nil {
				since = " since " + cs.WaitingSince.UTC().Format(time.RFC3339)
			}
			byCluster[cs.Cluster] = fmt.Sprintf("%s: waits%s for %s", cs.Cluster, since, cs.WaitingFor)
		}
	}
	var out []string
	for _, w := range byCluster {
		out = append(out, w)
	}
	sort.Strings(out)
	return out, nil
}

func truncate(s string) string {
	if len(s) > 32000 {
		return s[:31997] + "..."
	}
	return s
}

// write applies the condition (nil gives it up).
func (c *Controller) write(ctx context.Context, app *appsv1alpha1.Application, cond *metav1.Condition) error {
	s := appsv1alpha1ac.ApplicationStatus()
	if cond != nil {
		s.WithConditions(kube.Conditions([]metav1.Condition{*cond})...)
	}
	return c.Client.Status().Apply(ctx, appsv1alpha1ac.Application(app.Name, app.Namespace).WithStatus(s), client.FieldOwner(StatusManager), client.ForceOwnership)
}
