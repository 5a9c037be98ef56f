package scheduler

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// Preview schedules a binding as Reconcile would, with the policy spec and clusters given
// instead of those stored, and writes nothing: what-if questions use it. A nil spec means the
// binding's own policy.
func (c *Controller) Preview(ctx context.Context, b workv1alpha1.Binding, spec *policyv1alpha1.PropagationSpec, clusters []clusterv1alpha1.Cluster) ([]workv1alpha1.TargetCluster, error) {
	bs := b.BindingSpec()
	if spec == nil {
		var err error
		if spec, err = c.policySpec(ctx, bs.PolicyRef); err != nil {
			return nil, err
		}
	}
	allowed, _, err := c.teamAllowed(ctx, b.GetNamespace(), clusters)
	if err != nil {
		return nil, err
	}
	var out []workv1alpha1.TargetCluster
	if bs.Group == "" {
		out, _, err = c.schedule(ctx, b, []schema.GroupVersionKind{gvkOf(bs)}, spec, allowed)
	} else {
		out, _, err = c.scheduleInGroup(ctx, b, spec, allowed)
	}
	return out, err
}
