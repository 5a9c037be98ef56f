package e2e

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/demo"
)

// errorRate is the share of failed requests in the clusters a regex argument names.
func errorRate(arg string) string {
	return `(sum(rate(demo_requests_total{code="500",cluster=~"{{args.` + arg + `}}"}[10s])) / sum(rate(demo_requests_total{cluster=~"{{args.` + arg + `}}"}[10s])))`
}

// Canary versus baseline across clusters, on real Prometheus data from the traffic simulator:
// a version that fails 3% of requests where the stable one fails 1% passes a fixed threshold
// of 5% in the canary wave, but the comparison of the canary clusters' error rate with the
// baseline clusters' (the release's canary-cluster-regex and baseline-cluster-regex
// arguments, in one query) is 3 > 1.5, so the release rolls back by itself.
func TestCompareAnalysisFailsACanaryWorseThanItsBaseline(t *testing.T) {
	g := newG(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns, app := "compare", "shop"
	members := map[string]kubernetes.Interface{}
	for _, m := range []string{"east", "west", "europe"} {
		cfg, err := fleet.RESTConfig(m)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		members[m] = kubernetes.NewForConfigOrDie(cfg)
	}
	traffic := &demo.Traffic{Members: members, Namespace: ns, Name: app, RequestsPerTick: 100} // 1000 requests a second per cluster: 3% stays well clear of 5%
	target, err := traffic.Serve(ctx, "127.0.0.1:0")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	binary, err := demo.FindPrometheus(ctx, io.Discard)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "needs Debian's prometheus (.ci/run installs it)")
	prom, err := demo.StartPrometheus(ctx, binary, filepath.Join(t.TempDir(), "prometheus"), target)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(prom.Stop)

	ensureNamespace(t, cp, ns)
	metric := func(name, query, success string) rolloutv1alpha1.Metric {
		return rolloutv1alpha1.Metric{Name: name, InitialDelay: "12s", Interval: "2s", Count: ptr.To[int32](3), SuccessCondition: success,
			Provider: rolloutv1alpha1.MetricProvider{Prometheus: &rolloutv1alpha1.PrometheusMetric{Address: prom.URL, Query: query}}}
	}
	// The same judgement in the compare form: the canary clusters' error rate against the
	// baseline clusters', measured by two queries, at most 1.5 times worse.
	compareForm := metric("compare-form", errorRate("canary-cluster-regex"), "")
	compareForm.Baseline = &rolloutv1alpha1.MetricProvider{Prometheus: &rolloutv1alpha1.PrometheusMetric{Address: prom.URL, Query: errorRate("baseline-cluster-regex")}}
	compareForm.Compare = &rolloutv1alpha1.Comparison{MaxRatio: "1.5"}
	// baseline without compare is refused by the API server, naming the rule.
	halfDone := &rolloutv1alpha1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: "half-done", Namespace: ns},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{Metrics: []rolloutv1alpha1.Metric{*compareForm.DeepCopy()}}}
	halfDone.Spec.Metrics[0].Compare = nil
	halfDone.Spec.Metrics[0].Provider.Prometheus.Query = "vector(1)"
	halfDone.Spec.Metrics[0].Baseline = &rolloutv1alpha1.MetricProvider{Prometheus: &rolloutv1alpha1.PrometheusMetric{Address: prom.URL, Query: "vector(1)"}}
	g.Expect(cp.Create(ctx, halfDone)).To(gomega.MatchError(gomega.ContainSubstring("baseline and compare go together")))
	template := &rolloutv1alpha1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: "canary-vs-baseline", Namespace: ns},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Args: []rolloutv1alpha1.Argument{{Name: "canary-cluster-regex"}, {Name: "baseline-cluster-regex"}},
			Metrics: []rolloutv1alpha1.Metric{
				metric("threshold", errorRate("canary-cluster-regex"), "result[0] < 0.05"),
				metric("compare", errorRate("canary-cluster-regex")+" / "+errorRate("baseline-cluster-regex"), "result[0] <= 1.5"),
				compareForm,
				// Each cluster of the wave on its own: the query templated by the cluster's name.
				metric("per-cluster", `sum(rate(demo_requests_total{code="500",cluster="{{cluster.name}}"}[10s])) / sum(rate(demo_requests_total{cluster="{{cluster.name}}"}[10s]))`, "all(result, {# < 0.05})"),
			},
		}}
	gate := policyv1alpha1.Gates{Analysis: &policyv1alpha1.AnalysisGate{Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: template.Name}}}}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: app}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west", "europe"}}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "canary", ClusterNames: []string{"east"}, Gates: gate},
				{Name: "rest", ClusterNames: []string{"west", "europe"}},
			}},
		}}
	labels := map[string]string{"app": app}
	shop := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: app, Image: "registry.example/shop:1.0"}}}}}}
	createAll(t, g, template, policy, shop)
	for _, m := range []string{"east", "west", "europe"} {
		g.Eventually(func() string { return memberImage(t, m, ns, app) }).Should(gomega.Equal("registry.example/shop:1.0"), m)
	}
	setImage(t, g, shop, "registry.example/shop:1.1-worse")
	const rel = "shop-deployment-r2"
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).WithTimeout(2 * time.Minute).
		Should(gomega.Equal(rolloutv1alpha1.ReleaseRolledBack))
	run := &rolloutv1alpha1.AnalysisRun{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: rel + "-canary"}, run)).To(gomega.Succeed())
	phases := map[string]rolloutv1alpha1.AnalysisPhase{}
	for _, r := range run.Status.MetricResults {
		phases[r.Name] = r.Phase
		for _, m := range r.Measurements {
			t.Logf("%s: %s %s", r.Name, m.Phase, m.Value)
		}
	}
	g.Expect(phases).To(gomega.HaveKeyWithValue("compare", rolloutv1alpha1.AnalysisFailed), "%+v", run.Status.MetricResults)
	g.Expect(phases).To(gomega.HaveKeyWithValue("compare-form", rolloutv1alpha1.AnalysisFailed), "%+v", run.Status.MetricResults)
	for _, r := range run.Status.MetricResults {
		if r.Name == "per-cluster" {
			g.Expect(r.Measurements).NotTo(gomega.BeEmpty())
			g.Expect(r.Measurements[0].Value).To(gomega.MatchRegexp(`^\{"east":0\.0[0-9]+\}$`), "one value for the wave's one cluster")
		}
	}
	for _, r := range run.Status.MetricResults {
		if r.Name == "compare-form" && len(r.Measurements) > 0 {
			m := r.Measurements[len(r.Measurements)-1]
			g.Expect(m.Value).To(gomega.And(gomega.ContainSubstring(`"canary":`), gomega.ContainSubstring(`"baseline":`)))
			g.Expect(m.Message).To(gomega.ContainSubstring("worse than allowed"))
			g.Expect(m.Value).NotTo(gomega.ContainSubstring(`"canary":1,`), "the canary's own error rate, not the refused template's query")
		}
	}
	g.Expect(phases["threshold"]).NotTo(gomega.Equal(rolloutv1alpha1.AnalysisFailed), "3%% stays under the fixed 5%% threshold: %+v", run.Status.MetricResults)
	for _, m := range []string{"west", "europe"} {
		g.Expect(memberImage(t, m, ns, app)).To(gomega.Equal("registry.example/shop:1.0"), "the rest never ran the worse version")
	}
	g.Eventually(func() string { return memberImage(t, "east", ns, app) }).Should(gomega.Equal("registry.example/shop:1.0"), "east rolled back")
}
