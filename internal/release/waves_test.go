package release

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

func clusters(n int, labels func(i int) map[string]string) []clusterv1alpha1.Cluster {
	var out []clusterv1alpha1.Cluster
	for i := range n {
		out = append(out, clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%02d", i), Labels: labels(i)}})
	}
	return out
}

func waveNames(ws []Wave) map[string][]string {
	out := map[string][]string{}
	for _, w := range ws {
		out[w.Name] = w.Clusters
	}
	return out
}

func TestPercentageWaves(t *testing.T) {
	s := &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
		{Name: "canary", Percentage: ptr.To[int32](10)}, {Name: "early", Percentage: ptr.To[int32](20)}, {Name: "all", Percentage: ptr.To[int32](70)},
	}}
	got := ResolveWaves(s, clusters(10, func(int) map[string]string { return nil }))
	want := map[string][]string{"canary": {"c00"}, "early": {"c01", "c02"}, "all": {"c03", "c04", "c05", "c06", "c07", "c08", "c09"}}
	if diff := cmp.Diff(want, waveNames(got)); diff != "" {
		t.Errorf("1:2:7 over 10 clusters (-want +got):\n%s", diff)
	}
	// Three clusters: rounding up gives the first wave one cluster, never zero.
	got = ResolveWaves(s, clusters(3, func(int) map[string]string { return nil }))
	want = map[string][]string{"canary": {"c00"}, "early": {"c01"}, "all": {"c02"}}
	if diff := cmp.Diff(want, waveNames(got)); diff != "" {
		t.Errorf("1:2:7 over 3 clusters (-want +got):\n%s", diff)
	}
}

func TestSelectorWavesAndTheRest(t *testing.T) {
	s := &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
		{Name: "staging", ClusterSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"env": "staging"}}},
		{Name: "eu", ClusterNames: []string{"c03", "c00"}}, // c00 is staging already: the first wave keeps it
	}}
	env := func(i int) map[string]string {
		if i < 2 {
			return map[string]string{"env": "staging"}
		}
		return map[string]string{"env": "prod"}
	}
	got := ResolveWaves(s, clusters(5, env))
	want := map[string][]string{"staging": {"c00", "c01"}, "eu": {"c03"}, RestWave: {"c02", "c04"}}
	if diff := cmp.Diff(want, waveNames(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got[len(got)-1].Name != RestWave || got[len(got)-1].Spec != nil {
		t.Errorf("the rest wave comes last and has no spec: %+v", got[len(got)-1])
	}
}

func TestAWaveThatSelectsNothingStaysEmpty(t *testing.T) {
	s := &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
		{Name: "gpu", ClusterSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"gpu": "true"}}},
		{Name: "all", Percentage: ptr.To[int32](100)},
	}}
	got := ResolveWaves(s, clusters(2, func(int) map[string]string { return nil }))
	if len(got) != 2 || len(got[0].Clusters) != 0 || len(got[1].Clusters) != 2 {
		t.Errorf("got %+v", got)
	}
}
