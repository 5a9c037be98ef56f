package kube

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// Policy reads the PropagationPolicy or ClusterPropagationPolicy a binding names, and its spec.
func Policy(ctx context.Context, c client.Reader, ref workv1alpha1.PolicyReference) (client.Object, *policyv1alpha1.PropagationSpec, error) {
	if ref.Kind == "ClusterPropagationPolicy" {
		p := &policyv1alpha1.ClusterPropagationPolicy{}
		if err := c.Get(ctx, client.ObjectKey{Name: ref.Name}, p); err != nil {
			return nil, nil, err
		}
		return p, &p.Spec, nil
	}
	p := &policyv1alpha1.PropagationPolicy{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, p); err != nil {
		return nil, nil, err
	}
	return p, &p.Spec, nil
}
