package release

import (
	"sort"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/match"
)

// RestWave names the implicit last wave of the clusters no wave selects.
const RestWave = "rest"

// Wave is a wave with its clusters resolved.
type Wave struct {
	Name     string
	Clusters []string
	// Lost are the wave's placed clusters that failover declared lost (see withoutLost): the
	// wave goes on without them and lists them as Left.
	Lost []string
	Spec *policyv1alpha1.Wave // nil for the rest wave
}

// ResolveWaves assigns the clusters a template is placed on to the strategy's waves.
//
// Waves that select by label or by name claim their clusters first, in wave order (a cluster
// belongs to the first wave that selects it). Percentage waves then share the clusters left, in
// name order: each takes ceil(percentage x left / 100) of them, as many as remain, and the wave
// that brings the sum to 100 takes all that remain. So 10/20/70 is 1, 2 and 7 clusters of 10,
// and 1, 1 and 1 of 3: a small fleet still gets a real first wave. Clusters no wave takes form
// a last wave named "rest".
func ResolveWaves(strategy *policyv1alpha1.RolloutStrategy, placed []clusterv1alpha1.Cluster) []Wave {
	sorted := append([]clusterv1alpha1.Cluster(nil), placed...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	waves := make([]Wave, len(strategy.Waves))
	claimed := map[string]bool{}
	for i := range strategy.Waves {
		w := &strategy.Waves[i]
		waves[i] = Wave{Name: w.Name, Spec: w}
		if w.Percentage != nil {
			continue
		}
		for _, cl := range sorted {
			if claimed[cl.Name] || !selects(w, &cl) {
				continue
			}
			claimed[cl.Name] = true
			waves[i].Clusters = append(waves[i].Clusters, cl.Name)
		}
	}
	var left []string
	for _, cl := range sorted {
		if !claimed[cl.Name] {
			left = append(left, cl.Name)
		}
	}
	cumulative, taken := int32(0), 0
	for i := range strategy.Waves {
		p := strategy.Waves[i].Percentage
		if p == nil {
			continue
		}
		cumulative += *p
		upTo := min(taken+(int(*p)*len(left)+99)/100, len(left))
		if cumulative >= 100 {
			upTo = len(left)
		}
		waves[i].Clusters = append(waves[i].Clusters, left[taken:upTo]...)
		taken = upTo
	}
	if rest := left[taken:]; len(rest) > 0 {
		waves = append(waves, Wave{Name: RestWave, Clusters: append([]string(nil), rest...)})
	}
	return waves
}

func selects(w *policyv1alpha1.Wave, cl *clusterv1alpha1.Cluster) bool {
	if w.ClusterSelector != nil {
		return match.Labels(w.ClusterSelector, cl.Labels)
	}
	for _, n := range w.ClusterNames {
		if n == cl.Name {
			return true
		}
	}
	return false
}
