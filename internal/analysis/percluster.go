package analysis

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// clusterReference matches {{cluster.name}} and {{cluster.labels.KEY}}.
var clusterReference = regexp.MustCompile(`\{\{\s*cluster\.(name|labels\.([^{}\s]+))\s*\}\}`)

// ClusterLabels answers a member cluster's labels (its Cluster object's), for metrics that
// query each cluster of the wave.
type ClusterLabels func(ctx context.Context, cluster string) (map[string]string, error)

func perCluster(s string) bool { return clusterReference.MatchString(s) }

// substituteCluster replaces {{cluster.name}} and {{cluster.labels.KEY}}; a label the cluster
// does not have is an error naming it.
func substituteCluster(s, name string, labels map[string]string) (string, error) {
	var missing string
	out := clusterReference.ReplaceAllStringFunc(s, func(ref string) string {
		m := clusterReference.FindStringSubmatch(ref)
		if m[1] == "name" {
			return name
		}
		v, ok := labels[m[2]]
		if !ok && missing == "" {
			missing = m[2]
		}
		return v
	})
	if missing != "" {
		return "", fmt.Errorf("cluster %s has no label %q; label it (kubectl label cluster %s %s=...) or fix the template", name, missing, name, missing)
	}
	return out, nil
}

// measurePerCluster queries each cluster of the wave, with the address and query templated
// by that cluster's name and labels (its own Prometheus, or one federated endpoint with a
// cluster matcher). The result is one number per cluster in the wave's order, which
// conditions see as a list (`all(result, {# < 0.05})`); the measurement records them by
// cluster.
func (p *PrometheusProvider) measurePerCluster(ctx context.Context, run *rolloutv1alpha1.AnalysisRun, address, query string, timeoutSeconds int32) (any, string, error) {
	if len(run.Spec.Clusters) == 0 {
		return nil, "", fmt.Errorf("provider.prometheus: {{cluster.*}} queries each cluster of the wave, and this run names none (it runs outside a wave)")
	}
	if p.ClusterLabels == nil {
		return nil, "", fmt.Errorf("provider.prometheus: {{cluster.*}} needs the clusters' labels, which this controller cannot read")
	}
	values := make([]float64, 0, len(run.Spec.Clusters))
	parts := make([]string, 0, len(run.Spec.Clusters))
	for _, name := range run.Spec.Clusters {
		labels, err := p.ClusterLabels(ctx, name)
		if err != nil {
			return nil, "", fmt.Errorf("cluster %s: %w", name, err)
		}
		addr, err := substituteCluster(address, name, labels)
		if err != nil {
			return nil, "", fmt.Errorf("provider.prometheus.address: %w", err)
		}
		q, err := substituteCluster(query, name, labels)
		if err != nil {
			return nil, "", fmt.Errorf("provider.prometheus.query: %w", err)
		}
		v, _, err := p.query(ctx, addr, q, timeoutSeconds)
		if err != nil {
			return nil, "", fmt.Errorf("cluster %s: %w", name, err)
		}
		f, err := scalar(v)
		if err != nil {
			return nil, "", fmt.Errorf("cluster %s: %w", name, err)
		}
		values = append(values, f)
		parts = append(parts, fmt.Sprintf("%q:%s", name, formatFloat(f)))
	}
	return values, "{" + strings.Join(parts, ",") + "}", nil
}
