package scheduler

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

func cl(name, region string) clusterv1alpha1.Cluster {
	return clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"region": region}}}
}

func clusterNames(cs []clusterv1alpha1.Cluster) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestSpread(t *testing.T) {
	fleet := []clusterv1alpha1.Cluster{cl("a1", "a"), cl("a2", "a"), cl("b1", "b"), cl("c1", "c")}
	got, err := spread([]policyv1alpha1.SpreadConstraint{{SpreadByField: "region", MinGroups: 2, MaxGroups: 2}}, fleet)
	if err != nil {
		t.Fatal(err)
	}
	// The two groups with most clusters (a, then b before c by name).
	if diff := cmp.Diff([]string{"a1", "a2", "b1"}, clusterNames(got)); diff != "" {
		t.Errorf("spread (-want +got):\n%s", diff)
	}
	got, err = spread([]policyv1alpha1.SpreadConstraint{{SpreadByField: "cluster", MinGroups: 1, MaxGroups: 1}}, fleet)
	if err != nil || len(got) != 1 {
		t.Errorf("one cluster group: %v %v", clusterNames(got), err)
	}
	_, err = spread([]policyv1alpha1.SpreadConstraint{{SpreadByLabel: "region", MinGroups: 4}}, fleet)
	if err == nil || !strings.Contains(err.Error(), "needs at least 4 groups, the candidate clusters form 3") {
		t.Errorf("too few groups: %v", err)
	}
}

func TestTolerates(t *testing.T) {
	noSchedule := []clusterv1alpha1.Taint{{Key: "dedicated", Value: "gpu", Effect: clusterv1alpha1.TaintEffectNoSchedule}}
	tests := []struct {
		name   string
		tols   []policyv1alpha1.Toleration
		taints []clusterv1alpha1.Taint
		want   bool
	}{
		{"untainted", nil, nil, true},
		{"prefer no schedule never excludes", nil, []clusterv1alpha1.Taint{{Key: "x", Effect: clusterv1alpha1.TaintEffectPreferNoSchedule}}, true},
		{"not tolerated", nil, noSchedule, false},
		{"equal matches", []policyv1alpha1.Toleration{{Key: "dedicated", Operator: "Equal", Value: "gpu"}}, noSchedule, true},
		{"equal with another value", []policyv1alpha1.Toleration{{Key: "dedicated", Operator: "Equal", Value: "cpu"}}, noSchedule, false},
		{"exists on the key", []policyv1alpha1.Toleration{{Key: "dedicated", Operator: "Exists"}}, noSchedule, true},
		{"exists on everything", []policyv1alpha1.Toleration{{Operator: "Exists"}}, noSchedule, true},
		{"other effect", []policyv1alpha1.Toleration{{Key: "dedicated", Operator: "Exists", Effect: "NoExecute"}}, noSchedule, false},
		{"same effect", []policyv1alpha1.Toleration{{Key: "dedicated", Operator: "Equal", Value: "gpu", Effect: "NoSchedule"}}, noSchedule, true},
		{"equal without a key tolerates nothing", []policyv1alpha1.Toleration{{Operator: "Equal", Value: "gpu"}}, noSchedule, false},
		{"every taint needs a toleration", []policyv1alpha1.Toleration{{Key: "dedicated", Operator: "Exists"}},
			append(slices.Clone(noSchedule), clusterv1alpha1.Taint{Key: "cluster.flotilla.dev/unreachable", Effect: clusterv1alpha1.TaintEffectNoExecute}), false},
		{"each tolerated", []policyv1alpha1.Toleration{{Key: "dedicated", Operator: "Exists"}, {Key: "cluster.flotilla.dev/unreachable", Operator: "Exists", Effect: "NoExecute"}},
			append(slices.Clone(noSchedule), clusterv1alpha1.Taint{Key: "cluster.flotilla.dev/unreachable", Effect: clusterv1alpha1.TaintEffectNoExecute}), true},
	}
	for _, tt := range tests {
		if got := tolerates(tt.tols, tt.taints); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
