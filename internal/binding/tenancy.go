package binding

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/match"
	"github.com/flotilla-dev/flotilla/internal/render"
)

// Tenancy: namespaced objects (PropagationPolicy, OverridePolicy) are a tenant's input and
// Cluster* policies the platform's. Flotilla writes to members with its own, broad identity,
// so this controller holds the line in what it renders: a ResourceBinding places only a
// namespaced template of its own namespace, by a policy that selects it; overrides never change
// what object is written; and workloads placed by a namespaced PropagationPolicy meet the
// platform's Pod Security level before they reach a Work. Admission keeps users from writing
// bindings at all; these checks hold even if it is missing or bypassed.

// conditionStalled on a binding says it is refused (it names a template or policy it may not
// use), or a customization fails; see summarize.
const conditionStalled = workv1alpha1.ConditionStalled

const (
	kindPropagationPolicy        = "PropagationPolicy"
	kindClusterPropagationPolicy = "ClusterPropagationPolicy"
)

// foreignReference is why a binding may not be rendered judging by its spec alone: a
// ResourceBinding names a template or a PropagationPolicy of another namespace, or a
// ClusterResourceBinding a namespaced template or a PropagationPolicy. Empty when it may.
func foreignReference(b workv1alpha1.Binding) string {
	bs := b.BindingSpec()
	ref := bs.PolicyRef
	if b.GetNamespace() == "" {
		switch {
		case ref.Kind != kindClusterPropagationPolicy:
			return fmt.Sprintf("ClusterResourceBinding %s: spec.policyRef is %s %s; only a ClusterPropagationPolicy places cluster-scoped templates, so nothing is written",
				b.GetName(), ref.Kind, qualified(ref.Namespace, ref.Name))
		case bs.Resource.Namespace != "":
			return fmt.Sprintf("ClusterResourceBinding %s: spec.resource.namespace is %q; a ClusterResourceBinding places cluster-scoped templates only (namespaced templates get a ResourceBinding in their namespace), so nothing is written",
				b.GetName(), bs.Resource.Namespace)
		}
		return ""
	}
	switch {
	case bs.Resource.Namespace == "":
		return fmt.Sprintf("ResourceBinding %s/%s: spec.resource names %s %s without a namespace; a ResourceBinding places templates of its own namespace only (cluster-scoped templates are placed by ClusterPropagationPolicies), so nothing is written",
			b.GetNamespace(), b.GetName(), bs.Resource.Kind, bs.Resource.Name)
	case bs.Resource.Namespace != b.GetNamespace():
		return fmt.Sprintf("ResourceBinding %s/%s: spec.resource.namespace is %q; a ResourceBinding places templates of its own namespace %q only, so nothing is written",
			b.GetNamespace(), b.GetName(), bs.Resource.Namespace, b.GetNamespace())
	case ref.Kind == kindPropagationPolicy && ref.Namespace != b.GetNamespace():
		return fmt.Sprintf("ResourceBinding %s/%s: spec.policyRef names PropagationPolicy %s; a PropagationPolicy places templates of its own namespace only, so nothing is written",
			b.GetNamespace(), b.GetName(), qualified(ref.Namespace, ref.Name))
	case ref.Kind != kindPropagationPolicy && ref.Kind != kindClusterPropagationPolicy:
		return fmt.Sprintf("ResourceBinding %s/%s: spec.policyRef.kind is %q; give PropagationPolicy or ClusterPropagationPolicy",
			b.GetNamespace(), b.GetName(), ref.Kind)
	}
	return ""
}

// scopeMismatch is why a binding may not place its template judging by the template kind's
// scope: a ResourceBinding places namespaced kinds only, a ClusterResourceBinding
// cluster-scoped ones. Empty when the scope fits.
func scopeMismatch(b workv1alpha1.Binding, namespaced bool) string {
	r := b.BindingSpec().Resource
	switch {
	case b.GetNamespace() != "" && !namespaced:
		return fmt.Sprintf("ResourceBinding %s/%s: spec.resource names %s %s, a cluster-scoped kind; a ResourceBinding places namespaced templates of its own namespace only (cluster-scoped templates are placed by ClusterPropagationPolicies), so nothing is written",
			b.GetNamespace(), b.GetName(), r.Kind, r.Name)
	case b.GetNamespace() == "" && namespaced:
		return fmt.Sprintf("ClusterResourceBinding %s: spec.resource names %s %s, a namespaced kind; namespaced templates get a ResourceBinding in their namespace, so nothing is written",
			b.GetName(), r.Kind, r.Name)
	}
	return ""
}

// unplacedBy is why a binding's ClusterPropagationPolicy does not place its template: the
// policy is gone or does not select it. A ClusterPropagationPolicy is the platform's word, and
// its placements skip the Pod Security check, so a binding only claims one that selects its
// template (a binding written by hand, or one the detector has not caught up with yet: the
// detector updates or removes such bindings, which brings them back here). A PropagationPolicy
// of the binding's own namespace grants nothing beyond that namespace, so it is not looked up.
// Empty when the binding may be rendered.
func (c *Controller) unplacedBy(ctx context.Context, b workv1alpha1.Binding, tmpl *unstructured.Unstructured) (string, error) {
	ref := b.BindingSpec().PolicyRef
	if ref.Kind != kindClusterPropagationPolicy {
		return "", nil
	}
	p := &policyv1alpha1.ClusterPropagationPolicy{}
	err := c.Client.Get(ctx, client.ObjectKey{Name: ref.Name}, p)
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("%s: spec.policyRef names ClusterPropagationPolicy %s, which does not exist; nothing is written until the policy that selects %s %s is named",
			bindingRef(b), ref.Name, tmpl.GetKind(), qualified(tmpl.GetNamespace(), tmpl.GetName())), nil
	}
	if err != nil {
		return "", err
	}
	if _, ok := match.Resource(p.Spec.ResourceSelectors, tmpl); !ok {
		return fmt.Sprintf("%s: spec.policyRef names ClusterPropagationPolicy %s, which does not select %s %s; nothing is written until the policy that selects it is named",
			bindingRef(b), ref.Name, tmpl.GetKind(), qualified(tmpl.GetNamespace(), tmpl.GetName())), nil
	}
	return "", nil
}

// refuse reports a binding that may not be rendered (Stalled and Applied=False, and an event
// when the reason is new) and writes no Work. Its Works, if any, stay as they are.
func (c *Controller) refuse(ctx context.Context, b workv1alpha1.Binding, msg string) (ctrl.Result, error) {
	ctrl.LoggerFrom(ctx).Info("Refusing binding", "binding", bindingRef(b), "reason", msg)
	newest, _ := c.Board.Of(b) // what history and releases have seen, written or not
	status := newest.DeepCopy()
	gen := b.GetGeneration()
	old := meta.FindStatusCondition(status.Conditions, conditionStalled)
	newReason := old == nil || old.Status != metav1.ConditionTrue || old.Message != msg
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: conditionStalled, Status: metav1.ConditionTrue, Reason: "Refused", Message: msg, ObservedGeneration: gen})
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.ConditionApplied, Status: metav1.ConditionFalse, Reason: "Refused", Message: msg, ObservedGeneration: gen})
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: workv1alpha1.ReasonRefused, Message: msg, ObservedGeneration: gen})
	meta.RemoveStatusCondition(&status.Conditions, workv1alpha1.ConditionReconciling)
	c.Board.Put(b, status)
	if !apiequality.Semantic.DeepEqual(status, b.BindingStatus()) {
		if err := writeStatus(ctx, c.Client, b, status); err != nil {
			return ctrl.Result{}, err
		}
	}
	if newReason && c.Recorder != nil {
		c.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "Refused", "Render", "%s", msg)
	}
	// The binding's next change brings it back; until then there is nothing to retry.
	return ctrl.Result{}, reconcile.TerminalError(errors.New(msg))
}

// podSecurityLevel is the Pod Security level a binding's workloads must meet: the platform's
// for every namespaced template, whichever policy placed it, since a tenant can label a
// template so that a broad ClusterPropagationPolicy selects it; none ("") for cluster-scoped
// templates and for the namespaces the platform exempts (--pod-security-exempt-namespaces).
func (c *Controller) podSecurityLevel(b workv1alpha1.Binding) string {
	ns := b.BindingSpec().Resource.Namespace
	if ns == "" || slices.Contains(c.PodSecurityExemptNamespaces, ns) {
		return ""
	}
	if c.PodSecurityLevel == "" {
		return render.DefaultPodSecurityLevel
	}
	return c.PodSecurityLevel
}

// overrideAndCheck applies the overriders to a rendered manifest policy by policy, refuses
// any that change its identity (naming the policy), and then checks its pod template against
// the Pod Security level when one applies.
func overrideAndCheck(manifest *unstructured.Unstructured, overriders []namedOverriders, cluster, level string) error {
	before := &unstructured.Unstructured{}
	before.SetAPIVersion(manifest.GetAPIVersion())
	before.SetKind(manifest.GetKind())
	before.SetNamespace(manifest.GetNamespace())
	before.SetName(manifest.GetName())
	for _, o := range overriders {
		if err := render.Override(manifest, []policyv1alpha1.Overriders{o.Overriders}); err != nil {
			return &renderError{fmt.Errorf("%s for cluster %s: %w; fix its overriders", o.policy, cluster, err)}
		}
		if err := render.CheckIdentity(before, manifest); err != nil {
			return &renderError{fmt.Errorf("%s for cluster %s: %w", o.policy, cluster, err)}
		}
	}
	if level == "" {
		return nil
	}
	if err := render.CheckPodSecurity(manifest, level); err != nil {
		return &renderError{fmt.Errorf("cluster %s: %w; nothing is written to this cluster", cluster, err)}
	}
	return nil
}

func bindingRef(b workv1alpha1.Binding) string {
	if b.GetNamespace() == "" {
		return "ClusterResourceBinding " + b.GetName()
	}
	return "ResourceBinding " + b.GetNamespace() + "/" + b.GetName()
}

func qualified(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
