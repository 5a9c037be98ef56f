package dependency

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

func placed(name string, clusters []string, revs *workv1alpha1.Revisions, st ...workv1alpha1.ClusterStatus) Placed {
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name + "-statefulset"}}
	b.Spec.Resource = workv1alpha1.ObjectReference{Kind: "StatefulSet", Name: name}
	for _, c := range clusters {
		b.Spec.Clusters = append(b.Spec.Clusters, workv1alpha1.TargetCluster{Name: c})
	}
	b.Spec.Revisions = revs
	return Placed{Binding: b, Status: &workv1alpha1.ResourceBindingStatus{Clusters: st}}
}

func healthy(cluster string, rev int64) workv1alpha1.ClusterStatus {
	return workv1alpha1.ClusterStatus{Cluster: cluster, Applied: true, Health: workv1alpha1.HealthHealthy, Revision: rev}
}

// A cluster may run the dependent once every dependency runs there Healthy at the revision
// that cluster is to run; each other case names the dependency and why, for that cluster alone.
func TestVerdict(t *testing.T) {
	revs := &workv1alpha1.Revisions{Latest: 3, Stable: 2, Pins: []workv1alpha1.RevisionPin{{Cluster: "m1", Revision: 3}}}
	cases := []struct {
		name    string
		cluster string
		deps    []Dep
		want    string
	}{
		{"no dependencies", "m1", nil, ""},
		{"healthy", "m1", []Dep{{Name: "Application shop/db", Bindings: []Placed{placed("db", []string{"m1", "m2"}, nil, healthy("m1", 0), healthy("m2", 0))}}}, ""},
		{"degraded in this cluster only", "m3",
			[]Dep{{Name: "Application shop/db", Bindings: []Placed{placed("db", []string{"m1", "m3"}, nil, healthy("m1", 0),
				workv1alpha1.ClusterStatus{Cluster: "m3", Applied: true, Health: workv1alpha1.HealthProgressing})}}},
			"Application shop/db is Progressing in cluster m3"},
		{"healthy elsewhere", "m1",
			[]Dep{{Name: "Application shop/db", Bindings: []Placed{placed("db", []string{"m1", "m3"}, nil, healthy("m1", 0),
				workv1alpha1.ClusterStatus{Cluster: "m3", Applied: true, Health: workv1alpha1.HealthDegraded})}}}, ""},
		{"not placed here", "m2", []Dep{{Name: "Application shop/db", Bindings: []Placed{placed("db", []string{"m1"}, nil, healthy("m1", 0))}}},
			"Application shop/db is not placed in cluster m2"},
		{"not applied yet", "m1", []Dep{{Name: "StatefulSet shop/db", Bindings: []Placed{placed("db", []string{"m1"}, nil)}}},
			"StatefulSet shop/db is not applied in cluster m1 yet"},
		{"missing", "m1", []Dep{{Name: "Application other/db", Missing: true}}, "Application other/db is not found or not readable"},
		{"no templates", "m1", []Dep{{Name: "Application shop/db"}}, "Application shop/db has no templates placed yet"},
		{"at the pinned revision", "m1", []Dep{{Name: "StatefulSet shop/db", Bindings: []Placed{placed("db", []string{"m1"}, revs, healthy("m1", 3))}}}, ""},
		{"behind the pinned revision", "m1", []Dep{{Name: "StatefulSet shop/db", Bindings: []Placed{placed("db", []string{"m1"}, revs, healthy("m1", 2))}}},
			"StatefulSet shop/db runs revision 2 of 3 in cluster m1"},
		{"stable revision where unpinned", "m2", []Dep{{Name: "StatefulSet shop/db", Bindings: []Placed{placed("db", []string{"m2"}, revs, healthy("m2", 2))}}}, ""},
		{"one template of many names itself", "m1", []Dep{{Name: "Application shop/db", Bindings: []Placed{
			placed("db", []string{"m1"}, nil, healthy("m1", 0)), placed("cache", []string{"m1"}, nil)}}},
			"Application shop/db (StatefulSet cache) is not applied in cluster m1 yet"},
		{"every dependency waited for is named", "m1", []Dep{{Name: "Application shop/db", Missing: true}, {Name: "Application shop/mq", Missing: true}},
			"Application shop/db is not found or not readable; Application shop/mq is not found or not readable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Verdict(tc.cluster, tc.deps); got != tc.want {
				t.Errorf("Verdict(%s) = %q, want %q", tc.cluster, got, tc.want)
			}
		})
	}
}

// A cycle through the start is found and named in order; cycles elsewhere, and a graph larger
// than the limit, are not walked past it.
func TestFindCycle(t *testing.T) {
	graph := map[string][]string{
		"shop/api": {"shop/db"}, "shop/db": {"shop/api"},
		"shop/web": {"shop/api"},
		"a":        {"b"}, "b": {"c"}, "c": {"b"},
		"self": {"self"},
	}
	next := func(n string) []string { return graph[n] }
	cases := []struct {
		start string
		want  string
	}{
		{"shop/api", "dependency cycle: shop/api -> shop/db -> shop/api"},
		{"shop/web", ""},
		{"a", ""},
		{"b", "dependency cycle: b -> c -> b"},
		{"self", "dependency cycle: self -> self"},
		{"lonely", ""},
	}
	for _, tc := range cases {
		got := ""
		if c := FindCycle(tc.start, next, 64); c != nil {
			got = CycleMessage(c, func(s string) string { return s })
		}
		if got != tc.want {
			t.Errorf("FindCycle(%s) = %q, want %q", tc.start, got, tc.want)
		}
	}
	chain := func(n int) []int {
		if n < 1000 {
			return []int{n + 1}
		}
		return []int{0}
	}
	if c := FindCycle(0, chain, 10); c != nil {
		t.Errorf("a cycle past the limit was walked: %v", c[:3])
	}
	if c := FindCycle(0, chain, 2000); len(c) != 1002 || !strings.HasPrefix(CycleMessage(c[:2], func(i int) string { return "x" }), "dependency cycle") {
		t.Errorf("a long cycle within the limit: got %d nodes", len(c))
	}
}
