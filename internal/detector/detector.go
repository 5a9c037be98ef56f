// Package detector turns templates in the control plane into ResourceBindings. Any kind the
// control plane serves can be a template: the detector watches exactly the kinds that some
// propagation policy selects, starting a watch when a policy first names a kind (a CRD
// installed later is picked up when its kind becomes served), and for each template picks the
// policy that places it: highest priority, then the most specific selector (name over labels
// over kind alone), then a PropagationPolicy over a ClusterPropagationPolicy, then by name.
//
// It writes only bindings' spec (resource, policy, replicas, template hash, deletion and
// conflict rules), never the clusters (the scheduler's) and never members; and the status of
// workload templates that no policy places (Unplaced), which nothing else would write. Control-plane
// system objects are never propagated. A cluster-scoped template gets a ClusterResourceBinding
// and only ClusterPropagationPolicies place it. With the policy's groupBy, the binding records
// its group (KEY=VALUE of the template's label) for the scheduler.
package detector

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/match"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/render"
)

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
	// Recorder reports policy problems and ties between policies; nil records nothing.
	Recorder events.EventRecorder

	toldIgnored sync.Map // template UID/pointer -> the generation last warned of
	mgr         ctrl.Manager
	ctrl        controller.TypedController[TemplateKey]

	mu      sync.Mutex
	watched map[schema.GroupVersionKind]bool
}

// SetupWithManager registers the template controller and the policy controller that starts
// watches for the kinds policies select.
func (d *Detector) SetupWithManager(mgr ctrl.Manager) error {
	d.mgr = mgr
	d.watched = map[schema.GroupVersionKind]bool{}
	c, err := controller.NewTyped[TemplateKey]("detector", mgr, controller.TypedOptions[TemplateKey]{
		Reconciler: reconcile.TypedFunc[TemplateKey](d.Reconcile), MaxConcurrentReconciles: 16, // passes wait on the control plane: a bulk apply queues with fewer
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
				for _, b := range kube.BindingsOfKind(ctx, d.Client, kind.GroupVersionKind()) {
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

// ConditionReady on a policy says whether each of its selectors can select anything; the
// detector's policy controller is its only writer.
const ConditionReady = "Ready"

// reconcilePolicy makes sure the kinds a policy selects are watched (a kind not served yet is
// retried, so a CRD installed later is picked up) and reports on the policy what would
// otherwise fail silently: kinds the control plane does not serve, a PropagationPolicy's
// selector naming another namespace, and a rollout admission cannot check (header regexes).
func (d *Detector) reconcilePolicy(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var policy client.Object
	var sels []policyv1alpha1.ResourceSelector
	var status *policyv1alpha1.PropagationPolicyStatus
	var rollout *policyv1alpha1.RolloutStrategy
	if req.Namespace != "" {
		p := &policyv1alpha1.PropagationPolicy{}
		if err := d.Client.Get(ctx, req.NamespacedName, p); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		policy, sels, status, rollout = p, p.Spec.ResourceSelectors, &p.Status, p.Spec.Rollout
	} else {
		p := &policyv1alpha1.ClusterPropagationPolicy{}
		if err := d.Client.Get(ctx, req.NamespacedName, p); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		policy, sels, status, rollout = p, p.Spec.ResourceSelectors, &p.Status, p.Spec.Rollout
	}
	var problems []string
	retry := false
	for i, s := range sels {
		if err := d.ensureWatch(ctx, schema.FromAPIVersionAndKind(s.APIVersion, s.Kind)); err != nil {
			var denied *notAllowedError
			switch {
			case errors.As(err, &denied):
				problems = append(problems, fmt.Sprintf("spec.resourceSelectors[%d]: %v (checked again every 5s)", i, denied))
			case !meta.IsNoMatchError(err):
				ctrl.LoggerFrom(ctx).Info("Cannot watch kind yet; retrying", "apiVersion", s.APIVersion, "kind", s.Kind, "error", err.Error())
				problems = append(problems, fmt.Sprintf("spec.resourceSelectors[%d]: kind %s of %s cannot be watched yet (checked again every 5s)", i, s.Kind, s.APIVersion))
			default:
				ctrl.LoggerFrom(ctx).Info("Kind not served yet; retrying", "apiVersion", s.APIVersion, "kind", s.Kind, "error", err.Error())
				problems = append(problems, fmt.Sprintf("spec.resourceSelectors[%d]: the control plane does not serve kind %s of %s; fix apiVersion and kind, or install its CRD (checked again every 5s)", i, s.Kind, s.APIVersion))
			}
			retry = true
		}
		if req.Namespace != "" && s.Namespace != "" && s.Namespace != req.Namespace {
			problems = append(problems, fmt.Sprintf("spec.resourceSelectors[%d].namespace: %q is not this policy's namespace %q, and a PropagationPolicy selects only in its own namespace; remove the field, or place that namespace's templates with a policy there or a ClusterPropagationPolicy", i, s.Namespace, req.Namespace))
		}
	}
	reason := "InvalidSelector"
	if rollout != nil {
		// What admission cannot check (a header regex is compiled here, as RE2): a release
		// of this policy would be held by it, so the policy says it first.
		if err := rollout.Validate("spec.rollout"); err != nil {
			if len(problems) == 0 {
				reason = "InvalidRollout"
			}
			problems = append(problems, err.Error())
		}
	}
	cond := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Valid", Message: "every selector can select templates", ObservedGeneration: policy.GetGeneration()}
	if len(problems) > 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reason, strings.Join(problems, "; ")
	}
	if err := d.setPolicyCondition(ctx, policy, status, cond); err != nil {
		return reconcile.Result{}, err
	}
	if retry {
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	}
	return reconcile.Result{}, nil
}

// setPolicyCondition writes the Ready condition when it changed; the patch touches only the
// status the detector owns.
func (d *Detector) setPolicyCondition(ctx context.Context, policy client.Object, status *policyv1alpha1.PropagationPolicyStatus, cond metav1.Condition) error {
	old := meta.FindStatusCondition(status.Conditions, cond.Type)
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message && status.ObservedGeneration == policy.GetGeneration() {
		return nil
	}
	patch := client.MergeFrom(policy.DeepCopyObject().(client.Object))
	meta.SetStatusCondition(&status.Conditions, cond)
	status.ObservedGeneration = policy.GetGeneration()
	if err := d.Client.Status().Patch(ctx, policy, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	if cond.Status == metav1.ConditionFalse && d.Recorder != nil {
		d.Recorder.Eventf(policy, nil, corev1.EventTypeWarning, cond.Reason, "Validate", "%s", cond.Message)
	}
	return nil
}

func (d *Detector) ensureWatch(ctx context.Context, gvk schema.GroupVersionKind) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watched[gvk] {
		return nil
	}
	m, err := d.mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	if err := d.mayWatch(ctx, m.Resource); err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	h := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o *unstructured.Unstructured) []TemplateKey {
		return []TemplateKey{{GVK: gvk, NamespacedName: client.ObjectKeyFromObject(o)}}
	})
	if err := d.ctrl.Watch(source.TypedKind[*unstructured.Unstructured, TemplateKey](d.mgr.GetCache(), obj, h, templateChanged)); err != nil {
		return err
	}
	d.watched[gvk] = true
	return nil
}

// notAllowedError says the controller-manager's roles do not let it watch a kind.
type notAllowedError struct {
	resource schema.GroupResource
	verbs    []string
}

func (e *notAllowedError) Error() string {
	return fmt.Sprintf("the controller-manager may not %s %s: give it get, list and watch on %s (and get, update and patch on its status) with a ClusterRole labelled flotilla.dev/aggregate-to-controller-manager: \"true\" (docs/install.md: What the controller-manager may do)",
		strings.Join(e.verbs, " or "), e.resource, e.resource)
}

// mayWatch asks the control plane whether the manager may list and watch a kind before it
// starts a watch that would otherwise fail in its log only, over and over.
func (d *Detector) mayWatch(ctx context.Context, gvr schema.GroupVersionResource) error {
	var missing []string
	for _, verb := range []string{"list", "watch"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource, Verb: verb},
		}}
		if err := d.Client.Create(ctx, review); err != nil {
			return fmt.Errorf("asking whether the controller-manager may %s %s: %w", verb, gvr.GroupResource(), err)
		}
		if !review.Status.Allowed {
			missing = append(missing, verb)
		}
	}
	if len(missing) > 0 {
		return &notAllowedError{resource: gvr.GroupResource(), verbs: missing}
	}
	return nil
}

// templateChanged lets through the template updates a binding can depend on: its spec (the
// generation), labels, annotations, owners and deletion. The status Flotilla writes back to
// every template is not one, and would otherwise cost a detector pass per status write. A kind
// that tracks no generation (a ConfigMap's data) has every update let through.
var templateChanged = predicate.TypedFuncs[*unstructured.Unstructured]{
	UpdateFunc: func(e event.TypedUpdateEvent[*unstructured.Unstructured]) bool {
		before, after := e.ObjectOld, e.ObjectNew
		return after.GetGeneration() == 0 || before.GetGeneration() != after.GetGeneration() ||
			!maps.Equal(before.GetLabels(), after.GetLabels()) || !maps.Equal(before.GetAnnotations(), after.GetAnnotations()) ||
			!before.GetDeletionTimestamp().Equal(after.GetDeletionTimestamp()) ||
			!apiequality.Semantic.DeepEqual(before.GetOwnerReferences(), after.GetOwnerReferences())
	},
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

// The detector turns templates into bindings; templates' own kinds are granted apart, by the
// flotilla:controller-manager:templates roles (config/rbac/templates.yaml).
// +kubebuilder:rbac:groups=work.flotilla.dev,resources=resourcebindings;clusterresourcebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy.flotilla.dev,resources=propagationpolicies;clusterpropagationpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.flotilla.dev,resources=propagationpolicies/status;clusterpropagationpolicies/status,verbs=get;update;patch

// Reconcile creates, updates or deletes the binding of one template.
func (d *Detector) Reconcile(ctx context.Context, key TemplateKey) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("kind", key.GVK.Kind, "template", key.NamespacedName.String())
	bindingKey := client.ObjectKey{Namespace: key.Namespace, Name: names.Binding(key.GVK.Kind, key.Name)}
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(key.GVK)
	if err := d.Client.Get(ctx, key.NamespacedName, tmpl); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, d.deleteBinding(ctx, bindingKey)
		}
		return reconcile.Result{}, err
	}
	if !tmpl.GetDeletionTimestamp().IsZero() || kube.IsSystemObject(tmpl) {
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
		DriftCorrection:    driftCorrection(best.spec.DriftCorrection),
		DependsOn:          dependsOn(best.spec.DependsOn, tmpl.GetNamespace()),
	}
	d.warnIgnoredNothing(best.ref, best.spec.DriftCorrection, tmpl)
	// The user's switches, from the template: the detector is their only writer here.
	spec.Suspend, spec.UnmanagedClusters = workv1alpha1.SwitchesFrom(tmpl.GetAnnotations())
	binding := workv1alpha1.NewBinding(bindingKey.Namespace, bindingKey.Name)
	err = d.Client.Get(ctx, bindingKey, binding)
	switch {
	case apierrors.IsNotFound(err):
		binding = workv1alpha1.NewBinding(bindingKey.Namespace, bindingKey.Name)
		// Created with the binding controller's finalizer: one write less per template.
		binding.SetFinalizers([]string{names.BindingFinalizer})
		binding.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: tmpl.GetAPIVersion(), Kind: tmpl.GetKind(), Name: tmpl.GetName(), UID: tmpl.GetUID()}})
		*binding.BindingSpec() = spec
		log.Info("Creating binding", "binding", bindingKey.String(), "policy", best.ref.Name)
		return reconcile.Result{}, d.Client.Create(ctx, binding)
	case err != nil:
		return reconcile.Result{}, err
	}
	spec.Clusters = binding.BindingSpec().Clusters   // the scheduler's
	spec.Revisions = binding.BindingSpec().Revisions // the release controller's
	// Failover's.
	old := binding.BindingSpec()
	spec.GracefulEvictionTasks, spec.FailedClusters = old.GracefulEvictionTasks, old.FailedClusters
	if apiequality.Semantic.DeepEqual(spec, *binding.BindingSpec()) {
		return reconcile.Result{}, nil
	}
	patch := client.MergeFrom(binding.DeepCopyObject().(client.Object))
	*binding.BindingSpec() = spec
	return reconcile.Result{}, d.Client.Patch(ctx, binding, patch)
}

// warnIgnoredNothing tells, on the template, of an ignoreFields pointer of its policy that
// names no element of a list the template sets (a container name misspelt, an index past the
// end): it ignores nothing, so drift there is still corrected. Admission cannot see the
// templates a policy will select, and the same pointer may fit another of them, so the policy
// stays valid. Once per template generation and pointer.
func (d *Detector) warnIgnoredNothing(ref workv1alpha1.PolicyReference, dc *policyv1alpha1.DriftCorrection, tmpl *unstructured.Unstructured) {
	if dc == nil || d.Recorder == nil {
		return
	}
	for i, p := range dc.IgnoreFields {
		if !render.PointerMissesElement(tmpl.Object, p) {
			continue
		}
		// One entry per template and pointer, holding the generation last told of: bounded by
		// what the fleet holds, not by how often templates change.
		key := string(tmpl.GetUID()) + "/" + p
		if told, _ := d.toldIgnored.Swap(key, tmpl.GetGeneration()); told == tmpl.GetGeneration() {
			continue
		}
		d.Recorder.Eventf(tmpl, nil, corev1.EventTypeWarning, "IgnoreFieldMatchesNothing", "Select",
			"%s %s: spec.driftCorrection.ignoreFields[%d] %q names no element of a list %s %s sets, so it ignores nothing; check the container name or index (by name: /spec/template/spec/containers/NAME/image)",
			ref.Kind, strings.TrimPrefix(ref.Namespace+"/"+ref.Name, "/"), i, p, tmpl.GetKind(), tmpl.GetName())
	}
}

// driftCorrection copies the policy's driftCorrection with its default filled in, so the
// binding shows the mode in force.
func driftCorrection(d *policyv1alpha1.DriftCorrection) *workv1alpha1.DriftCorrection {
	out := &workv1alpha1.DriftCorrection{Mode: string(policyv1alpha1.DriftCorrect)}
	if d != nil {
		out.Mode = string(orDefault(d.Mode, policyv1alpha1.DriftCorrect))
		out.IgnoreFields = append([]string(nil), d.IgnoreFields...)
	}
	return out
}

// dependsOn is the policy's dependsOn with each namespace filled in (the template's own when
// unset), so the binding says exactly where its dependencies are.
func dependsOn(deps []policyv1alpha1.DependencySelector, namespace string) []policyv1alpha1.DependencySelector {
	var out []policyv1alpha1.DependencySelector
	for _, d := range deps {
		d = *d.DeepCopy()
		if d.Namespace == "" {
			d.Namespace = namespace
		}
		out = append(out, d)
	}
	return out
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

// templateHash covers what the renderer reads: everything but status and server-set metadata.
func templateHash(u *unstructured.Unstructured) string {
	c := u.DeepCopy()
	delete(c.Object, "status")
	meta := map[string]any{"labels": c.GetLabels(), "annotations": workv1alpha1.WithoutSwitches(c.GetAnnotations())}
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
		if s, ok := match.Resource(p.Spec.ResourceSelectors, tmpl); ok && p.DeletionTimestamp.IsZero() {
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
		if s, ok := match.Resource(p.Spec.ResourceSelectors, tmpl); ok && p.DeletionTimestamp.IsZero() {
			matches = append(matches, policyMatch{ref: workv1alpha1.PolicyReference{Kind: "ClusterPropagationPolicy", Name: p.Name},
				spec: &p.Spec, priority: ptrOr(p.Spec.Priority), specificity: s})
		}
	}
	if len(matches) == 0 {
		return nil, nil
	}
	sort.SliceStable(matches, func(i, j int) bool {
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
	if len(matches) > 1 {
		a, b := matches[0], matches[1]
		if a.priority == b.priority && a.specificity == b.specificity && a.namespaced == b.namespaced && d.Recorder != nil {
			// Only the name broke the tie: say so, since the user probably meant one of them to win.
			d.Recorder.Eventf(tmpl, nil, corev1.EventTypeWarning, "PolicyConflict", "Select",
				"%s %s and %s select %s %s with the same priority %d and equally specific selectors; %s wins by name order. Give the one you mean a higher spec.priority",
				a.ref.Kind, policyName(a.ref), policyName(b.ref), tmpl.GetKind(), tmpl.GetName(), a.priority, policyName(a.ref))
		}
	}
	return &matches[0], nil
}

func policyName(r workv1alpha1.PolicyReference) string {
	if r.Namespace != "" {
		return r.Namespace + "/" + r.Name
	}
	return r.Name
}

func ptrOr(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
