// Package detector turns templates in the control plane into ResourceBindings. Any kind the
// control plane serves can be a template: the detector watches exactly the kinds that some
// propagation policy selects, starting a watch when a policy first names a kind (a CRD
// installed later is picked up when its kind becomes served), and for each template picks the
// policy that places it: highest priority, then the most specific selector (name over labels
// over kind alone), then a PropagationPolicy over a ClusterPropagationPolicy, then by name.
//
// It writes only bindings' spec (resource, policy, replicas, template hash, deletion and
// conflict rules), never the clusters (the scheduler's) and never members. Control-plane
// system objects are never propagated. A cluster-scoped template gets a ClusterResourceBinding
// and only ClusterPropagationPolicies place it. With the policy's groupBy, the binding records
// its group (KEY=VALUE of the template's label) for the scheduler.
package detector

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/match"
)

// BindingFinalizer holds a binding until its Works are gone; the binding controller owns it.
const BindingFinalizer = "work.flotilla.dev/binding"

// TemplateKey identifies a template of any kind.
type TemplateKey struct {
	GVK schema.GroupVersionKind
	types.NamespacedName
}

// Detector reconciles templates into bindings.
type Detector struct {
	Client client.Client
	// Interpreters answers what a kind means; nil serves the built-in interpreters only.
	Interpreters *interpret.Registry
	mgr          ctrl.Manager
	ctrl         controller.TypedController[TemplateKey]

	mu      sync.Mutex
	watched map[schema.GroupVersionKind]bool
}

// SetupWithManager registers the template controller and the policy controller that starts
// watches for the kinds policies select.
func (d *Detector) SetupWithManager(mgr ctrl.Manager) error {
	d.mgr = mgr
	d.watched = map[schema.GroupVersionKind]bool{}
	c, err := controller.NewTyped[TemplateKey]("detector", mgr, controller.TypedOptions[TemplateKey]{
		Reconciler: reconcile.TypedFunc[TemplateKey](d.Reconcile), MaxConcurrentReconciles: 4,
	})
	if err != nil {
		return err
	}
	d.ctrl = c
	// A policy change re-evaluates every template of the kinds it selects.
	for _, p := range []client.Object{&policyv1alpha1.PropagationPolicy{}, &policyv1alpha1.ClusterPropagationPolicy{}} {
		if err := c.Watch(source.TypedKind(mgr.GetCache(), p, handler.TypedEnqueueRequestsFromMapFunc(d.templatesOfPolicy))); err != nil {
			return err
		}
	}
	// A kind's customization changing re-reads the replicas of every template of the kind.
	if d.Interpreters != nil {
		if err := c.Watch(source.TypedChannel(d.Interpreters.Subscribe(), handler.TypedEnqueueRequestsFromMapFunc(
			func(ctx context.Context, kind *unstructured.Unstructured) []TemplateKey {
				var keys []TemplateKey
				for _, b := range BindingsOfKind(ctx, d.Client, kind.GroupVersionKind()) {
					r := b.BindingSpec().Resource
					keys = append(keys, TemplateKey{GVK: kind.GroupVersionKind(), NamespacedName: client.ObjectKey{Namespace: r.Namespace, Name: r.Name}})
				}
				return keys
			}))); err != nil {
			return err
		}
	}
	return ctrl.NewControllerManagedBy(mgr).Named("detector-policies").
		For(&policyv1alpha1.PropagationPolicy{}).
		Watches(&policyv1alpha1.ClusterPropagationPolicy{}, &handler.EnqueueRequestForObject{}).
		Complete(reconcile.Func(d.reconcilePolicy))
}

func selectorsOf(o client.Object) []policyv1alpha1.ResourceSelector {
	switch p := o.(type) {
	case *policyv1alpha1.PropagationPolicy:
		return p.Spec.ResourceSelectors
	case *policyv1alpha1.ClusterPropagationPolicy:
		return p.Spec.ResourceSelectors
	}
	return nil
}

// reconcilePolicy makes sure the kinds a policy selects are watched; a kind not served yet is
// retried, so a CRD installed later is picked up.
func (d *Detector) reconcilePolicy(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var sels []policyv1alpha1.ResourceSelector
	if req.Namespace != "" {
		p := &policyv1alpha1.PropagationPolicy{}
		if err := d.Client.Get(ctx, req.NamespacedName, p); err == nil {
			sels = p.Spec.ResourceSelectors
		}
	}
	cp := &policyv1alpha1.ClusterPropagationPolicy{}
	if err := d.Client.Get(ctx, client.ObjectKey{Name: req.Name}, cp); err == nil {
		sels = append(sels, cp.Spec.ResourceSelectors...)
	}
	retry := false
	for _, s := range sels {
		if err := d.ensureWatch(ctx, schema.FromAPIVersionAndKind(s.APIVersion, s.Kind)); err != nil {
			ctrl.LoggerFrom(ctx).Info("Kind not served yet; retrying", "apiVersion", s.APIVersion, "kind", s.Kind, "error", err.Error())
			retry = true
		}
	}
	if retry {
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	}
	return reconcile.Result{}, nil
}

func (d *Detector) ensureWatch(ctx context.Context, gvk schema.GroupVersionKind) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watched[gvk] {
		return nil
	}
	if _, err := d.mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	h := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o *unstructured.Unstructured) []TemplateKey {
		return []TemplateKey{{GVK: gvk, NamespacedName: client.ObjectKeyFromObject(o)}}
	})
	if err := d.ctrl.Watch(source.TypedKind[*unstructured.Unstructured, TemplateKey](d.mgr.GetCache(), obj, h)); err != nil {
		return err
	}
	d.watched[gvk] = true
	return nil
}

func (d *Detector) templatesOfPolicy(ctx context.Context, o client.Object) []TemplateKey {
	var keys []TemplateKey
	for _, s := range selectorsOf(o) {
		gvk := schema.FromAPIVersionAndKind(s.APIVersion, s.Kind)
		d.mu.Lock()
		watched := d.watched[gvk]
		d.mu.Unlock()
		if !watched {
			continue // the watch, once started, lists them all
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		var opts []client.ListOption
		if o.GetNamespace() != "" {
			opts = append(opts, client.InNamespace(o.GetNamespace()))
		}
		if err := d.Client.List(ctx, list, opts...); err != nil {
			continue
		}
		for _, item := range list.Items {
			if o.GetNamespace() != "" && item.GetNamespace() == "" {
				continue // a PropagationPolicy never places cluster-scoped templates
			}
			keys = append(keys, TemplateKey{GVK: gvk, NamespacedName: client.ObjectKeyFromObject(&item)})
		}
	}
	return keys
}

// Reconcile creates, updates or deletes the binding of one template.
func (d *Detector) Reconcile(ctx context.Context, key TemplateKey) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("kind", key.GVK.Kind, "template", key.NamespacedName.String())
	bindingKey := client.ObjectKey{Namespace: key.Namespace, Name: BindingName(key.GVK.Kind, key.Name)}
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(key.GVK)
	if err := d.Client.Get(ctx, key.NamespacedName, tmpl); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, d.deleteBinding(ctx, bindingKey)
		}
		return reconcile.Result{}, err
	}
	if !tmpl.GetDeletionTimestamp().IsZero() || IsSystemObject(tmpl) {
		return reconcile.Result{}, nil
	}
	best, err := d.bestPolicy(ctx, tmpl)
	if err != nil {
		return reconcile.Result{}, err
	}
	if best == nil {
		return reconcile.Result{}, d.deleteBinding(ctx, bindingKey)
	}
	replicas, _, err := d.Interpreters.For(key.GVK).GetReplicas(tmpl)
	if err != nil {
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("reading replicas of %s %s: %w", key.GVK.Kind, key.NamespacedName, err))
	}
	group := ""
	if key := best.spec.GroupBy; key != "" {
		if v, ok := tmpl.GetLabels()[key]; ok {
			group = key + "=" + v
		}
	}
	spec := workv1alpha1.ResourceBindingSpec{
		Resource: workv1alpha1.ObjectReference{
			APIVersion: tmpl.GetAPIVersion(), Kind: tmpl.GetKind(), Namespace: tmpl.GetNamespace(), Name: tmpl.GetName(), UID: string(tmpl.GetUID()),
		},
		PolicyRef:          best.ref,
		Replicas:           replicas,
		TemplateHash:       templateHash(tmpl),
		TemplateGeneration: tmpl.GetGeneration(),
		DeletionPolicy:     string(orDefault(best.spec.DeletionPolicy, policyv1alpha1.DeletionDelete)),
		ConflictResolution: string(orDefault(best.spec.ConflictResolution, policyv1alpha1.ConflictAbort)),
		PropagateDeps:      best.spec.PropagateDeps,
		Group:              group,
	}
	binding := workv1alpha1.NewBinding(bindingKey.Namespace, bindingKey.Name)
	err = d.Client.Get(ctx, bindingKey, binding)
	switch {
	case apierrors.IsNotFound(err):
		binding = workv1alpha1.NewBinding(bindingKey.Namespace, bindingKey.Name)
		// Created with the binding controller's finalizer: one write less per template.
		binding.SetFinalizers([]string{BindingFinalizer})
		binding.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: tmpl.GetAPIVersion(), Kind: tmpl.GetKind(), Name: tmpl.GetName(), UID: tmpl.GetUID()}})
		*binding.BindingSpec() = spec
		log.Info("Creating binding", "binding", bindingKey.String(), "policy", best.ref.Name)
		return reconcile.Result{}, d.Client.Create(ctx, binding)
	case err != nil:
		return reconcile.Result{}, err
	}
	spec.Clusters = binding.BindingSpec().Clusters   // the scheduler's
	spec.Revisions = binding.BindingSpec().Revisions // the release controller's
	// Failover's, and the user's switches (set with the CLI).
	old := binding.BindingSpec()
	spec.GracefulEvictionTasks, spec.FailedClusters = old.GracefulEvictionTasks, old.FailedClusters
	spec.Suspend, spec.UnmanagedClusters = old.Suspend, old.UnmanagedClusters
	if apiequality.Semantic.DeepEqual(spec, *binding.BindingSpec()) {
		return reconcile.Result{}, nil
	}
	patch := client.MergeFrom(binding.DeepCopyObject().(client.Object))
	*binding.BindingSpec() = spec
	return reconcile.Result{}, d.Client.Patch(ctx, binding, patch)
}

func orDefault[T ~string](v, def T) T {
	if v == "" {
		return def
	}
	return v
}

func (d *Detector) deleteBinding(ctx context.Context, key client.ObjectKey) error {
	if err := d.Client.Delete(ctx, workv1alpha1.NewBinding(key.Namespace, key.Name)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// BindingName is the name of a template's binding: NAME-KIND, like the objects it places.
func BindingName(kind, name string) string {
	n := name + "-" + strings.ToLower(kind)
	if len(n) > 253 {
		sum := sha256.Sum256([]byte(n))
		n = n[:240] + "-" + hex.EncodeToString(sum[:])[:12]
	}
	return n
}

// templateHash covers what the renderer reads: everything but status and server-set metadata.
func templateHash(u *unstructured.Unstructured) string {
	c := u.DeepCopy()
	delete(c.Object, "status")
	meta := map[string]any{"labels": c.GetLabels(), "annotations": c.GetAnnotations()}
	c.Object["metadata"] = meta
	data, _ := json.Marshal(c.Object)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

type policyMatch struct {
	ref         workv1alpha1.PolicyReference
	spec        *policyv1alpha1.PropagationSpec
	priority    int32
	specificity int
	namespaced  bool
}

// bestPolicy returns the policy that places the template, or nil.
func (d *Detector) bestPolicy(ctx context.Context, tmpl *unstructured.Unstructured) (*policyMatch, error) {
	var matches []policyMatch
	pps := &policyv1alpha1.PropagationPolicyList{}
	if tmpl.GetNamespace() != "" { // cluster-scoped templates are ClusterPropagationPolicies' only
		if err := d.Client.List(ctx, pps, client.InNamespace(tmpl.GetNamespace())); err != nil {
			return nil, err
		}
	}
	for i := range pps.Items {
		p := &pps.Items[i]
		if s, ok := match.Resource(p.Spec.ResourceSelectors, tmpl, true); ok && p.DeletionTimestamp.IsZero() {
			matches = append(matches, policyMatch{ref: workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: p.Namespace, Name: p.Name},
				spec: &p.Spec, priority: ptrOr(p.Spec.Priority), specificity: s, namespaced: true})
		}
	}
	cpps := &policyv1alpha1.ClusterPropagationPolicyList{}
	if err := d.Client.List(ctx, cpps); err != nil {
		return nil, err
	}
	for i := range cpps.Items {
		p := &cpps.Items[i]
		if s, ok := match.Resource(p.Spec.ResourceSelectors, tmpl, false); ok && p.DeletionTimestamp.IsZero() {
			matches = append(matches, policyMatch{ref: workv1alpha1.PolicyReference{Kind: "ClusterPropagationPolicy", Name: p.Name},
				spec: &p.Spec, priority: ptrOr(p.Spec.Priority), specificity: s})
		}
	}
	if len(matches) == 0 {
		return nil, nil
	}
	sort.Slice(matches, func(i, j int) bool {
		a, b := matches[i], matches[j]
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		if a.specificity != b.specificity {
			return a.specificity > b.specificity
		}
		if a.namespaced != b.namespaced {
			return a.namespaced
		}
		return a.ref.Name < b.ref.Name
	})
	return &matches[0], nil
}

func ptrOr(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// BindingsOfKind lists the bindings whose template is of the kind, namespaced and
// cluster-scoped alike: what must be interpreted again when the kind's customization changes.
func BindingsOfKind(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind) []workv1alpha1.Binding {
	var out []workv1alpha1.Binding
	apiVersion := gvk.GroupVersion().String()
	rbs := &workv1alpha1.ResourceBindingList{}
	if err := c.List(ctx, rbs); err == nil {
		for i := range rbs.Items {
			if r := rbs.Items[i].Spec.Resource; r.APIVersion == apiVersion && r.Kind == gvk.Kind {
				out = append(out, &rbs.Items[i])
			}
		}
	}
	crbs := &workv1alpha1.ClusterResourceBindingList{}
	if err := c.List(ctx, crbs); err == nil {
		for i := range crbs.Items {
			if r := crbs.Items[i].Spec.Resource; r.APIVersion == apiVersion && r.Kind == gvk.Kind {
				out = append(out, &crbs.Items[i])
			}
		}
	}
	return out
}
