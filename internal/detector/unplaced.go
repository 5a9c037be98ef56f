package detector

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
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
)

// unplacedKinds are the workload kinds whose tools (kubectl rollout status, Argo CD, kstatus)
// read status.observedGeneration; the template of such a kind that no policy places gets an
// honest status: its generation observed, no replicas anywhere, Propagated=False.
var unplacedKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"},
	{Group: "apps", Version: "v1", Kind: "ReplicaSet"},
}

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
	for _, gvk := range unplacedKinds {
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
	return ctrl.Result{}, WriteUnplacedStatus(ctx, u.Client, tmpl, "NoPolicy", msg, false)
}

// WriteUnplacedStatus writes the status of a workload template that runs in no cluster, saying
// why (reason, msg). failed: nothing will run it until its policy or the fleet changes (no
// cluster can take it), so a Deployment also reads Progressing=False ProgressDeadlineExceeded
// and `kubectl rollout status`, Argo CD and kstatus report a failure instead of waiting.
// Kinds other than the built-in workloads are left alone.
func WriteUnplacedStatus(ctx context.Context, c client.Client, tmpl *unstructured.Unstructured, reason, msg string, failed bool) error {
	if !slices.Contains(unplacedKinds, tmpl.GroupVersionKind()) {
		return nil
	}
	current, _, _ := unstructured.NestedMap(tmpl.Object, "status")
	want := unplacedStatus(tmpl.GetKind(), tmpl, current, reason, msg, failed)
	if apiequality.Semantic.DeepEqual(normalized(current), normalized(want)) {
		return nil
	}
	// A merge patch without resourceVersion: the status is derived again on the next event.
	patch := map[string]any{"status": want}
	for k := range current {
		if _, kept := want[k]; !kept {
			want[k] = nil
		}
	}
	data, _ := json.Marshal(patch)
	return client.IgnoreNotFound(c.Status().Patch(ctx, tmpl, client.RawPatch(types.MergePatchType, data)))
}

// unplacedStatus is what is true of a template nobody runs: its generation observed, no
// replicas, and why.
func unplacedStatus(kind string, tmpl *unstructured.Unstructured, current map[string]any, reason, msg string, failed bool) map[string]any {
	cond := map[string]any{"type": names.ConditionPropagated, "status": "False", "reason": reason, "message": msg}
	since := ""
	conds, _ := current["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == names.ConditionPropagated && m["status"] == "False" {
			since, _ = m["lastTransitionTime"].(string)
		}
	}
	if since == "" {
		since = tmpl.GetCreationTimestamp().UTC().Format("2006-01-02T15:04:05Z")
		if t, ok := current["observedGeneration"]; ok && t != nil {
			since = time.Now().UTC().Format(time.RFC3339) // it was placed until now
		}
	}
	cond["lastTransitionTime"] = since
	if kind == "Deployment" {
		cond["lastUpdateTime"] = since
	}
	conditions := []any{cond}
	if failed && kind == "Deployment" {
		conditions = append(conditions, map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
			"message": msg, "lastTransitionTime": since, "lastUpdateTime": since})
	}
	out := map[string]any{"observedGeneration": tmpl.GetGeneration(), "conditions": conditions}
	if kind == "StatefulSet" || kind == "ReplicaSet" {
		out["replicas"] = int64(0) // required by their status schemas
	}
	if kind == "DaemonSet" {
		for _, f := range []string{"currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"} {
			out[f] = int64(0)
		}
	}
	return out
}

func normalized(m map[string]any) any {
	data, _ := json.Marshal(m)
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}
