package e2e

import (
	"context"
	"testing"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

func validPolicy() *policyv1alpha1.PropagationPolicy {
	return &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{
				APIVersion: "apps/v1", Kind: "Deployment",
				LabelSelector: &policyv1alpha1.LabelSelector{MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{
					{Key: "flotilla.dev/skip", Operator: "DoesNotExist"},
				}},
			}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity:   &policyv1alpha1.ClusterAffinity{LabelSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: "region", MinGroups: 2}},
				ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{
					Type: policyv1alpha1.ReplicaSchedulingDivided, DivisionPreference: policyv1alpha1.DivisionWeighted,
					WeightPreference: &policyv1alpha1.WeightPreference{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}, Weight: 1},
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"west"}}, Weight: 1},
					}},
				},
			},
		},
	}
}

// A well-formed policy is accepted; nonsense is refused at admission with a message naming
// the field and the fix.
func TestInvalidPropagationPoliciesAreRejected(t *testing.T) {
	ctx := context.Background()
	g := newG(t)
	ok := validPolicy()
	g.Expect(cp.Create(ctx, ok)).To(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), ok) })

	rs := func(p *policyv1alpha1.PropagationPolicy) *policyv1alpha1.ReplicaScheduling {
		return p.Spec.Placement.ReplicaScheduling
	}
	cases := []struct {
		name   string
		mutate func(*policyv1alpha1.PropagationPolicy)
		want   string
	}{
		{"no resource selectors", func(p *policyv1alpha1.PropagationPolicy) { p.Spec.ResourceSelectors = nil }, "spec.resourceSelectors"},
		{"zero total weight", func(p *policyv1alpha1.PropagationPolicy) {
			for i := range rs(p).WeightPreference.StaticWeightList {
				rs(p).WeightPreference.StaticWeightList[i].Weight = 0
			}
		}, "the weights add up to zero"},
		{"negative weight", func(p *policyv1alpha1.PropagationPolicy) { rs(p).WeightPreference.StaticWeightList[0].Weight = -1 },
			"spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight"},
		{"unknown replica scheduling type", func(p *policyv1alpha1.PropagationPolicy) { rs(p).Type = "Scattered" },
			`spec.placement.replicaScheduling.type: Unsupported value: "Scattered"`},
		{"divided without preference", func(p *policyv1alpha1.PropagationPolicy) { rs(p).DivisionPreference = ""; rs(p).WeightPreference = nil },
			"type Divided needs divisionPreference"},
		{"duplicated with weights", func(p *policyv1alpha1.PropagationPolicy) { rs(p).Type = policyv1alpha1.ReplicaSchedulingDuplicated },
			"type Duplicated takes no divisionPreference or weightPreference"},
		{"static and dynamic weights", func(p *policyv1alpha1.PropagationPolicy) {
			rs(p).WeightPreference.DynamicWeight = policyv1alpha1.DynamicWeightAvailableReplicas
		},
			"give exactly one of staticWeightList and dynamicWeight"},
		{"minGroups above maxGroups", func(p *policyv1alpha1.PropagationPolicy) { p.Spec.Placement.SpreadConstraints[0].MaxGroups = 1 },
			"minGroups must not exceed maxGroups"},
		{"spread by nothing", func(p *policyv1alpha1.PropagationPolicy) { p.Spec.Placement.SpreadConstraints[0].SpreadByField = "" },
			"give exactly one of spreadByField and spreadByLabel"},
		{"empty cluster affinity", func(p *policyv1alpha1.PropagationPolicy) {
			p.Spec.Placement.ClusterAffinity = &policyv1alpha1.ClusterAffinity{}
		},
			"clusterAffinity selects nothing"},
		{"malformed label expression", func(p *policyv1alpha1.PropagationPolicy) {
			p.Spec.ResourceSelectors[0].LabelSelector.MatchExpressions[0].Operator = "In"
		}, "In and NotIn need at least one value"},
		{"unknown label operator", func(p *policyv1alpha1.PropagationPolicy) {
			p.Spec.ResourceSelectors[0].LabelSelector.MatchExpressions[0].Operator = "Near"
		}, `spec.resourceSelectors[0].labelSelector.matchExpressions[0].operator: Unsupported value: "Near"`},
		{"name and label selector", func(p *policyv1alpha1.PropagationPolicy) { p.Spec.ResourceSelectors[0].Name = "web" },
			"name and labelSelector select the same thing two ways"},
		{"bad kind", func(p *policyv1alpha1.PropagationPolicy) { p.Spec.ResourceSelectors[0].Kind = "deployment" }, "spec.resourceSelectors[0].kind"},
		{"bad apiVersion", func(p *policyv1alpha1.PropagationPolicy) { p.Spec.ResourceSelectors[0].APIVersion = "apps" }, "spec.resourceSelectors[0].apiVersion"},
		{"priority out of range", func(p *policyv1alpha1.PropagationPolicy) { p.Spec.Priority = ptr.To[int32](5000) }, "spec.priority"},
		{"unknown deletion policy", func(p *policyv1alpha1.PropagationPolicy) { p.Spec.DeletionPolicy = "Shred" }, `spec.deletionPolicy: Unsupported value: "Shred"`},
		{"both affinity forms", func(p *policyv1alpha1.PropagationPolicy) {
			p.Spec.Placement.ClusterAffinities = []policyv1alpha1.ClusterAffinityTerm{{AffinityName: "primary", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}}}
		}, "give clusterAffinity or the ordered clusterAffinities, not both"},
		{"exists toleration with value", func(p *policyv1alpha1.PropagationPolicy) {
			p.Spec.Placement.ClusterTolerations = []policyv1alpha1.Toleration{{Key: "k", Operator: "Exists", Value: "v"}}
		}, "a toleration with operator Exists takes no value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newG(t)
			p := validPolicy()
			p.Name = "invalid"
			c.mutate(p)
			err := cp.Create(ctx, p)
			if err == nil {
				_ = cp.Delete(ctx, p)
			}
			g.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want an Invalid error, got %v", err)
			g.Expect(err.Error()).To(gomega.ContainSubstring(c.want))
		})
	}
}
