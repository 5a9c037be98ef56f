package kube

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// PolicyIndex indexes bindings by the policy that placed them (spec.policyRef, which the
// detector writes), so a policy change reaches its own bindings without listing every binding.
const PolicyIndex = "spec.policyRef"

func policyKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// IndexBindingsByPolicy registers PolicyIndex for ResourceBindings and ClusterResourceBindings;
// call it once per manager, before the controllers that use BindingsOfPolicy start.
func IndexBindingsByPolicy(ctx context.Context, indexer client.FieldIndexer) error {
	for _, obj := range []client.Object{&workv1alpha1.ResourceBinding{}, &workv1alpha1.ClusterResourceBinding{}} {
		if err := indexer.IndexField(ctx, obj, PolicyIndex, func(o client.Object) []string {
			ref := o.(workv1alpha1.Binding).BindingSpec().PolicyRef
			return []string{policyKey(ref.Kind, ref.Namespace, ref.Name)}
		}); err != nil {
			return err
		}
	}
	return nil
}

// BindingsOfPolicy lists the bindings a PropagationPolicy or ClusterPropagationPolicy placed,
// through PolicyIndex.
func BindingsOfPolicy(ctx context.Context, c client.Reader, policy client.Object) []reconcile.Request {
	key := policyKey("ClusterPropagationPolicy", "", policy.GetName())
	if policy.GetNamespace() != "" {
		key = policyKey("PropagationPolicy", policy.GetNamespace(), policy.GetName())
	}
	var reqs []reconcile.Request
	list := &workv1alpha1.ResourceBindingList{}
	if err := c.List(ctx, list, client.MatchingFields{PolicyIndex: key}); err == nil {
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	if policy.GetNamespace() != "" {
		return reqs // a PropagationPolicy places only templates of its namespace
	}
	clusterList := &workv1alpha1.ClusterResourceBindingList{}
	if err := c.List(ctx, clusterList, client.MatchingFields{PolicyIndex: key}); err == nil {
		for i := range clusterList.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&clusterList.Items[i])})
		}
	}
	return reqs
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
