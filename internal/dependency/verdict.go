package dependency

import (
	"fmt"
	"strings"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// Dep is one dependency of a workload as the user named it, resolved to the bindings that place
// its templates.
type Dep struct {
	// Name is how messages name it: "Application shop/db", "StatefulSet shop/db".
	Name string
	// Missing: not found or not readable (the same words for both, so nothing leaks).
	Missing bool
	// Bindings place its templates, each with its newest status.
	Bindings []Placed
}

// Placed is one binding of a dependency and its newest status.
type Placed struct {
	Binding workv1alpha1.Binding
	Status  *workv1alpha1.ResourceBindingStatus
}

// Verdict says why the dependent may not run in cluster yet, naming the first dependency it
// waits for; "" when every dependency runs there Healthy at its current revision.
func Verdict(cluster string, deps []Dep) string {
	var waits []string
	for _, d := range deps {
		if why := waitOn(cluster, d); why != "" {
			waits = append(waits, d.Name+" "+why)
		}
	}
	return strings.Join(waits, "; ")
}

// waitOn says why one dependency does not run ready in cluster, "" when it does.
func waitOn(cluster string, d Dep) string {
	if d.Missing {
		return "is not found or not readable"
	}
	if len(d.Bindings) == 0 {
		return "has no templates placed yet"
	}
	for _, p := range d.Bindings {
		if why := clusterReady(cluster, p); why != "" {
			if len(d.Bindings) > 1 {
				bs := p.Binding.BindingSpec()
				return fmt.Sprintf("(%s %s) %s", bs.Resource.Kind, bs.Resource.Name, why)
			}
			return why
		}
	}
	return ""
}

// clusterReady says why one binding's template does not run ready in cluster: placed there,
// applied, Healthy, and at the revision the cluster is to run.
func clusterReady(cluster string, p Placed) string {
	bs := p.Binding.BindingSpec()
	if !placedIn(bs, cluster) {
		return "is not placed in cluster " + cluster
	}
	if p.Status == nil {
		return "is not applied in cluster " + cluster + " yet"
	}
	for _, cs := range p.Status.Clusters {
		if cs.Cluster != cluster {
			continue
		}
		switch {
		case !cs.Applied:
			return "is not applied in cluster " + cluster + " yet"
		case cs.Health != workv1alpha1.HealthHealthy:
			return fmt.Sprintf("is %s in cluster %s", cs.Health, cluster)
		case bs.Revisions != nil && cs.Revision != bs.Revisions.RevisionFor(cluster):
			return fmt.Sprintf("runs revision %d of %d in cluster %s", cs.Revision, bs.Revisions.RevisionFor(cluster), cluster)
		}
		return ""
	}
	return "is not applied in cluster " + cluster + " yet"
}

func placedIn(bs *workv1alpha1.ResourceBindingSpec, cluster string) bool {
	for _, t := range bs.Clusters {
		if t.Name == cluster {
			return true
		}
	}
	return false
}

// FindCycle follows next from start, depth first, and returns the first path that comes back
// to start (start first and last), or nil. It visits at most limit nodes, so a huge graph
// costs a bounded walk; cycles not through start are another node's to report.
func FindCycle[N comparable](start N, next func(N) []N, limit int) []N {
	seen := map[N]bool{}
	var path []N
	var walk func(N) []N
	walk = func(n N) []N {
		path = append(path, n)
		for _, m := range next(n) {
			if m == start {
				return append(append([]N(nil), path...), start)
			}
			if seen[m] || len(seen) >= limit {
				continue
			}
			seen[m] = true
			if c := walk(m); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		return nil
	}
	seen[start] = true
	return walk(start)
}

// CycleMessage is how a cycle is reported: "dependency cycle: shop/api -> shop/db -> shop/api".
func CycleMessage[N any](cycle []N, name func(N) string) string {
	parts := make([]string, len(cycle))
	for i, n := range cycle {
		parts[i] = name(n)
	}
	return "dependency cycle: " + strings.Join(parts, " -> ")
}
