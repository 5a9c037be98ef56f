package e2e

import (
	"context"
	"testing"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
				ClusterAffinity:   &policyv1alpha1.ClusterAffinity{LabelSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"env": "prod"}}},
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

func durationString(s string) *intstr.IntOrString {
	v := intstr.FromString(s)
	return &v
}

func withGates(gates policyv1alpha1.Gates) func(*policyv1alpha1.PropagationPolicy) {
	return func(p *policyv1alpha1.PropagationPolicy) {
		p.Spec.Rollout = &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "all", Percentage: ptr.To[int32](100), Gates: gates}}}
	}
}

func withSteps(steps ...policyv1alpha1.CanaryStep) func(*policyv1alpha1.PropagationPolicy) {
	return func(p *policyv1alpha1.PropagationPolicy) {
		p.Spec.Rollout = &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "all", Percentage: ptr.To[int32](100), Steps: steps}}}
	}
}

// Durations come as Go duration strings or, as Argo Rollouts writes them, whole seconds.
func TestRolloutDurationsTakeStringsAndSeconds(t *testing.T) {
	g := newG(t)
	p := validPolicy()
	p.Name = "durations"
	withSteps(policyv1alpha1.CanaryStep{SetWeight: ptr.To[int32](20)}, policyv1alpha1.CanaryStep{Pause: &policyv1alpha1.PauseStep{Duration: policyv1alpha1.DurationSeconds(30)}})(p)
	p.Spec.Rollout.Waves[0].Gates.BakeTime = durationString("1m30s")
	p.Spec.Rollout.ProgressDeadline = policyv1alpha1.DurationSeconds(600)
	createAll(t, g, p)
	got := &policyv1alpha1.PropagationPolicy{}
	g.Expect(cp.Get(context.Background(), client.ObjectKeyFromObject(p), got)).To(gomega.Succeed())
	for field, v := range map[string]*intstr.IntOrString{
		"pause": got.Spec.Rollout.Waves[0].Steps[1].Pause.Duration, "bakeTime": got.Spec.Rollout.Waves[0].Gates.BakeTime, "progressDeadline": got.Spec.Rollout.ProgressDeadline,
	} {
		d, set, err := policyv1alpha1.ParseDuration(field, v)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(set).To(gomega.BeTrue())
		g.Expect(d).To(gomega.BeNumerically(">", 0), field)
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
		{"label key with a space", func(p *policyv1alpha1.PropagationPolicy) {
			p.Spec.ResourceSelectors[0].LabelSelector.MatchLabels = map[string]policyv1alpha1.LabelValue{"my app": "web"}
		}, "spec.resourceSelectors[0].labelSelector.matchLabels: Invalid value: matchLabels: a key is"},
		{"label value with a slash", func(p *policyv1alpha1.PropagationPolicy) {
			p.Spec.ResourceSelectors[0].LabelSelector.MatchLabels = map[string]policyv1alpha1.LabelValue{"app": "web/v2"}
		}, "a label value is empty or up to 63"},
		{"expression key starting with a dash", func(p *policyv1alpha1.PropagationPolicy) {
			p.Spec.ResourceSelectors[0].LabelSelector.MatchExpressions[0].Key = "-skip"
		}, "spec.resourceSelectors[0].labelSelector.matchExpressions[0].key"},
		{"expression value with a space", func(p *policyv1alpha1.PropagationPolicy) {
			p.Spec.ResourceSelectors[0].LabelSelector.MatchExpressions[0] = policyv1alpha1.LabelSelectorRequirement{Key: "tier", Operator: "In", Values: []string{"front end"}}
		}, "spec.resourceSelectors[0].labelSelector.matchExpressions[0].values[0]"},
		{"bakeTime that is no duration", withGates(policyv1alpha1.Gates{BakeTime: durationString("abc")}),
			"spec.rollout.waves[0].gates.bakeTime: Invalid value: \"abc\": bakeTime: write a duration such as 90s"},
		{"negative bakeTime", withGates(policyv1alpha1.Gates{BakeTime: durationString("-5s")}), "spec.rollout.waves[0].gates.bakeTime"},
		{"negative bakeTime in seconds", withGates(policyv1alpha1.Gates{BakeTime: policyv1alpha1.DurationSeconds(-5)}), "spec.rollout.waves[0].gates.bakeTime"},
		{"progressDeadline in words", func(p *policyv1alpha1.PropagationPolicy) {
			withGates(policyv1alpha1.Gates{})(p)
			p.Spec.Rollout.ProgressDeadline = durationString("ten minutes")
		}, "spec.rollout.progressDeadline: Invalid value: \"ten minutes\": progressDeadline: write a duration"},
		{"pause duration in words", withSteps(policyv1alpha1.CanaryStep{Pause: &policyv1alpha1.PauseStep{Duration: durationString("5 minutes")}}),
			"spec.rollout.waves[0].steps[0].pause.duration: Invalid value: \"5 minutes\": pause.duration: write a duration"},
		{"negative pause in seconds", withSteps(policyv1alpha1.CanaryStep{Pause: &policyv1alpha1.PauseStep{Duration: policyv1alpha1.DurationSeconds(-1)}}),
			"spec.rollout.waves[0].steps[0].pause.duration"},
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
