package detector

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/workloadstatus"
)

// Unplaced writes the honest status of workload templates no policy places (the base
// Deployment of an Argo Rollouts workloadRef, say). It writes only templates without a
// binding: once a policy places one, the binding controller owns its status.
type Unplaced struct {
	Client client.Client
	gvk    schema.GroupVersionKind
	// detector says whether a policy selects a template whose binding is not written yet.
	detector *Detector
}

// SetupUnplaced registers one controller per workload kind.
func SetupUnplaced(mgr ctrl.Manager) error {
	d := &Detector{Client: mgr.GetClient()}
	for _, gvk := range workloadstatus.UnplacedKinds {
		u := &Unplaced{Client: mgr.GetClient(), gvk: gvk, detector: d}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		bindingToTemplate := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			b, ok := o.(*workv1alpha1.ResourceBinding)
			if !ok || b.Spec.Resource.Kind != gvk.Kind || b.Spec.Resource.APIVersion != gvk.GroupVersion().String() {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: b.Spec.Resource.Namespace, Name: b.Spec.Resource.Name}}}
		})
		if err := ctrl.NewControllerManagedBy(mgr).Named("unplaced-"+gvk.Kind).
			For(obj, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			// A binding going away (its policy deleted) leaves the template unplaced again.
			Watches(&workv1alpha1.ResourceBinding{}, bindingToTemplate, builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return false }, UpdateFunc: func(event.UpdateEvent) bool { return false },
			})).
			Complete(u); err != nil {
			return err
		}
	}
	return nil
}

// Reconcile writes the template's status when no binding places it.
func (u *Unplaced) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(u.gvk)
	if err := u.Client.Get(ctx, req.NamespacedName, tmpl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !tmpl.GetDeletionTimestamp().IsZero() || kube.IsSystemObject(tmpl) {
		return ctrl.Result{}, nil
	}
	b := &workv1alpha1.ResourceBinding{}
	err := u.Client.Get(ctx, client.ObjectKey{Namespace: tmpl.GetNamespace(), Name: names.Binding(u.gvk.Kind, tmpl.GetName())}, b)
	if err == nil {
		return ctrl.Result{}, nil // placed: the binding controller writes its status
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	// A policy selects it and its binding is on its way: not unplaced.
	if m, err := u.detector.bestPolicy(ctx, tmpl); err != nil {
		return ctrl.Result{}, err
	} else if m != nil {
		return ctrl.Result{}, nil
	}
	msg := fmt.Sprintf("no propagation policy places this %s: it runs in no cluster", u.gvk.Kind)
	return ctrl.Result{}, workloadstatus.WriteUnplaced(ctx, u.Client, tmpl, "NoPolicy", msg, false)
}
