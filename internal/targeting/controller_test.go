package targeting

import (
	"strings"
	"testing"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConflictNamesBothPoliciesAndTheField(t *testing.T) {
	divided := &policyv1alpha1.ReplicaScheduling{Type: "Divided"}
	duplicated := &policyv1alpha1.ReplicaScheduling{Type: "Duplicated"}
	cases := []struct {
		name    string
		targets []target
		field   string
	}{
		{"one sets it", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: divided}}, {ref: "b", spec: &appsv1alpha1.TargetSpec{}}}, ""},
		{"both agree", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: divided}}, {ref: "b", spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: divided.DeepCopy()}}}, ""},
		{"replicas differ", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: divided}}, {ref: "b", spec: &appsv1alpha1.TargetSpec{}}, {ref: "c", cluster: true, spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: duplicated}}}, "spec.replicaScheduling"},
		{"rollouts differ", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "x"}}}}},
			{ref: "b", spec: &appsv1alpha1.TargetSpec{Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "y"}}}}}}, "spec.rollout"},
		{"deletion differs", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{DeletionPolicy: policyv1alpha1.DeletionOrphan}}, {ref: "b", spec: &appsv1alpha1.TargetSpec{DeletionPolicy: policyv1alpha1.DeletionDelete}}}, "spec.deletionPolicy"},
	}
	for _, c := range cases {
		field, a, b := conflict(c.targets)
		if field != c.field {
			t.Errorf("%s: conflict field %q, want %q", c.name, field, c.field)
		}
		if field != "" && (a.ref == "" || b.ref == "" || a.ref == b.ref) {
			t.Errorf("%s: conflict names %q and %q, want two policies", c.name, a.ref, b.ref)
		}
	}
	_, a, b := conflict(cases[2].targets)
	if a.describe() != "TargetPolicy a" || !strings.HasPrefix(b.describe(), "ClusterTargetPolicy c") {
		t.Errorf("conflict describes %q and %q", a.describe(), b.describe())
	}
}

func TestFirstTakesTheFirstSetValue(t *testing.T) {
	ts := []target{{spec: &appsv1alpha1.TargetSpec{}}, {spec: &appsv1alpha1.TargetSpec{DeletionPolicy: policyv1alpha1.DeletionOrphan}}}
	if got := first(ts, func(s *appsv1alpha1.TargetSpec) policyv1alpha1.DeletionPolicy { return s.DeletionPolicy }); got != policyv1alpha1.DeletionOrphan {
		t.Errorf("first deletion policy %q", got)
	}
	if got := first(ts, func(s *appsv1alpha1.TargetSpec) *policyv1alpha1.RolloutStrategy { return s.Rollout }); got != nil {
		t.Errorf("no rollout set, got %v", got)
	}
}

func TestSelectorsOnePerKindByApplicationLabel(t *testing.T) {
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Status: appsv1alpha1.ApplicationStatus{Objects: []appsv1alpha1.ApplicationObject{
		{APIVersion: "v1", Kind: "ConfigMap", Name: "a"}, {APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, {APIVersion: "v1", Kind: "ConfigMap", Name: "b"},
	}}}
	for _, platform := range []bool{false, true} {
		sels := selectors(app, platform)
		if len(sels) != 2 || sels[0].Kind != "Deployment" || sels[1].Kind != "ConfigMap" {
			t.Fatalf("selectors %+v", sels)
		}
		for _, s := range sels {
			if s.LabelSelector.MatchLabels[appsv1alpha1.ApplicationLabel] != "web" {
				t.Errorf("selector %+v does not select by the application label", s)
			}
			if platform != (s.Namespace == "shop") {
				t.Errorf("platform=%v: selector namespace %q", platform, s.Namespace)
			}
		}
	}
}
