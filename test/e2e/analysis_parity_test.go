package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// Analysis templates ported from Argo Rollouts with mistakes are refused at admission, each
// with a message naming the field and the fix; the same rules hold for a
// ClusterAnalysisTemplate.
func TestAnalysisTemplateMistakesAreRefused(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "analysis-admission"
	ensureNamespace(t, cp, ns)
	prom := func(query string) rolloutv1alpha1.MetricProvider {
		return rolloutv1alpha1.MetricProvider{Prometheus: &rolloutv1alpha1.PrometheusMetric{Address: "http://prometheus:9090", Query: query}}
	}
	web := func(url string, headers ...rolloutv1alpha1.WebMetricHeader) rolloutv1alpha1.MetricProvider {
		return rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: url, Headers: headers}}
	}
	metric := func(p rolloutv1alpha1.MetricProvider) rolloutv1alpha1.Metric {
		return rolloutv1alpha1.Metric{Name: "m", SuccessCondition: "result[0] >= 0.9", Provider: p}
	}
	fromImage := &policyv1alpha1.ArgumentValueFrom{FieldRef: &policyv1alpha1.ArgumentFieldRef{FieldPath: "spec.template.spec.containers[0].image"}}
	for _, tc := range []struct {
		name string
		spec rolloutv1alpha1.AnalysisTemplateSpec
		want string // empty: accepted
	}{
		{name: "declared", spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Args:    []rolloutv1alpha1.Argument{{Name: "version", ValueFrom: fromImage}, {Name: "service", Value: ptr.To("web")}},
			Metrics: []rolloutv1alpha1.Metric{metric(prom(`rate(ok{service="{{args.service}}",version="{{ args.version }}"}[5m])`))},
			DryRun:  []rolloutv1alpha1.DryRun{{MetricName: "*"}}, MeasurementRetention: []rolloutv1alpha1.MeasurementRetention{{MetricName: "m", Limit: 20}},
			Inconclusive: rolloutv1alpha1.InconclusiveFail,
		}},
		{name: "undeclared-in-query", spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Args:    []rolloutv1alpha1.Argument{{Name: "service"}},
			Metrics: []rolloutv1alpha1.Metric{metric(prom(`rate(ok{service="{{args.service}}",version="{{args.version}}"}[5m])`))},
		}, want: "does not declare"},
		{name: "undeclared-in-url", spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Metrics: []rolloutv1alpha1.Metric{metric(web("http://metrics/?v={{args.version}}"))},
		}, want: "does not declare"},
		{name: "undeclared-in-header", spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Metrics: []rolloutv1alpha1.Metric{metric(web("http://metrics/", rolloutv1alpha1.WebMetricHeader{Key: "X-Version", Value: "{{args.version}}"}))},
		}, want: "does not declare"},
		{name: "value-and-valuefrom", spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Args:    []rolloutv1alpha1.Argument{{Name: "version", Value: ptr.To("2"), ValueFrom: fromImage}},
			Metrics: []rolloutv1alpha1.Metric{metric(prom("up"))},
		}, want: "set value or valueFrom, not both"},
		{name: "valuefrom-two-ways", spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Args: []rolloutv1alpha1.Argument{{Name: "version", ValueFrom: &policyv1alpha1.ArgumentValueFrom{
				FieldRef: fromImage.FieldRef, PodTemplateHashValue: ptr.To(policyv1alpha1.PodTemplateHashLatest)}}},
			Metrics: []rolloutv1alpha1.Metric{metric(prom("up"))},
		}, want: "exactly one of fieldRef or podTemplateHashValue"},
		{name: "zero-interval", spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Metrics: []rolloutv1alpha1.Metric{{Name: "m", Interval: "0s", Provider: prom("up")}},
		}, want: "a zero interval without a count"},
		{name: "zero-interval-count-zero", spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Metrics: []rolloutv1alpha1.Metric{{Name: "m", Interval: "0ms", Count: ptr.To[int32](0), Provider: prom("up")}},
		}, want: "a zero interval without a count"},
		{name: "zero-interval-counted", spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Metrics: []rolloutv1alpha1.Metric{{Name: "m", Interval: "0s", Count: ptr.To[int32](3), Provider: prom("up")}},
		}},
		{name: "negative-interval", spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Metrics: []rolloutv1alpha1.Metric{{Name: "m", Interval: "-1s", Provider: prom("up")}},
		}, want: "interval"},
		{name: "negative-initial-delay", spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Metrics: []rolloutv1alpha1.Metric{{Name: "m", InitialDelay: "-5m", Provider: prom("up")}},
		}, want: "initialDelay"},
		{name: "retention-too-long", spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Metrics:              []rolloutv1alpha1.Metric{metric(prom("up"))},
			MeasurementRetention: []rolloutv1alpha1.MeasurementRetention{{MetricName: "*", Limit: 51}},
		}, want: "limit"},
		{name: "inconclusive-unknown", spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Metrics: []rolloutv1alpha1.Metric{metric(prom("up"))}, Inconclusive: "Maybe",
		}, want: "inconclusive"},
	} {
		for _, obj := range []client.Object{
			&rolloutv1alpha1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: ns}, Spec: tc.spec},
			&rolloutv1alpha1.ClusterAnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + tc.name}, Spec: tc.spec},
		} {
			err := cp.Create(ctx, obj)
			if tc.want == "" {
				g.Expect(err).NotTo(gomega.HaveOccurred(), "%s %T", tc.name, obj)
				t.Cleanup(func() { _ = cp.Delete(context.Background(), obj) })
				continue
			}
			g.Expect(err).To(gomega.HaveOccurred(), "%s %T", tc.name, obj)
			g.Expect(err.Error()).To(gomega.ContainSubstring(tc.want), "%s %T", tc.name, obj)
		}
	}
}

// Given a wave gated by a web analysis whose version argument comes from the Deployment's image
// (valueFrom), when a new image is released and the analysis is Inconclusive, then the release
// waits for a person instead of rolling back; promote takes it through.
func TestInconclusiveAnalysisPausesTheRelease(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "analysis-inconclusive"
	ensureNamespace(t, cp, ns)
	var mu sync.Mutex
	var versions []string // what the analysis asked about
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		versions = append(versions, r.URL.Query().Get("version"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"errorRate": 0.2}`)) // neither good (<= 0.05) nor bad (> 0.5)
	}))
	t.Cleanup(srv.Close)
	tmpl := &rolloutv1alpha1.AnalysisTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "error-rate", Namespace: ns},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Args: []rolloutv1alpha1.Argument{{Name: "version", ValueFrom: &policyv1alpha1.ArgumentValueFrom{
				FieldRef: &policyv1alpha1.ArgumentFieldRef{FieldPath: "spec.template.spec.containers[0].image"}}}},
			Metrics: []rolloutv1alpha1.Metric{{
				Name: "error-rate", SuccessCondition: "result <= 0.05", FailureCondition: "result > 0.5",
				Provider: rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: srv.URL + "/?version={{args.version}}", JSONPath: "{$.errorRate}"}},
			}},
		},
	}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "canary", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{Analysis: &policyv1alpha1.AnalysisGate{
					Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: "error-rate"}},
				}}},
			}},
		},
	}
	web := webDeployment(ns, 1)
	createAll(t, g, tmpl, policy, web)
	g.Eventually(func() string { return memberImage(t, "west", ns, "web") }).Should(gomega.Equal("registry.example/web:1"))
	g.Eventually(func() *workv1alpha1.Revisions { return bindingOf(ctx, ns, "web-deployment").Spec.Revisions }).ShouldNot(gomega.BeNil())

	setImage(t, g, web, "registry.example/web:2")
	rel := "web-deployment-r2"
	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase(ns, rel, 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))
	r := getRelease(ns, rel)
	g.Expect(r.Status.Phase).To(gomega.Equal(rolloutv1alpha1.ReleaseProgressing), "not rolled back")
	g.Expect(r.Status.Message).To(gomega.And(gomega.ContainSubstring("Inconclusive"), gomega.ContainSubstring("flotilla release promote")))
	g.Expect(memberImage(t, "east", ns, "web")).To(gomega.Equal("registry.example/web:2"), "the canary keeps the new revision while it waits")
	g.Expect(memberImage(t, "west", ns, "web")).To(gomega.Equal("registry.example/web:1"))
	run := &rolloutv1alpha1.AnalysisRun{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.Status.Waves[0].AnalysisRun}, run)).To(gomega.Succeed())
	g.Expect(run.Status.Phase).To(gomega.Equal(rolloutv1alpha1.AnalysisInconclusive))
	g.Expect(run.Spec.Args).To(gomega.ContainElement(rolloutv1alpha1.Argument{Name: "version", Value: ptr.To("registry.example/web:2")}), "valueFrom read the released image")
	mu.Lock()
	g.Expect(versions).To(gomega.ContainElement("registry.example/web:2"))
	mu.Unlock()

	out, err := flotilla("release", "promote", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	g.Expect(memberImage(t, "west", ns, "web")).To(gomega.Equal("registry.example/web:2"))
}

// A template whose Job spec uses an undeclared argument passes admission (CEL cannot read a
// Job spec) but holds the release before any cluster changes, saying what to fix.
func TestUndeclaredArgumentHoldsTheRelease(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "analysis-undeclared"
	ensureNamespace(t, cp, ns)
	tmpl := &rolloutv1alpha1.AnalysisTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: ns},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{Metrics: []rolloutv1alpha1.Metric{{
			Name: "smoke", Provider: rolloutv1alpha1.MetricProvider{Job: &rolloutv1alpha1.JobMetric{Spec: runtime.RawExtension{
				Raw: []byte(`{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"smoke","image":"{{args.image}}"}]}}}`)}}},
		}}},
	}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{Analysis: &policyv1alpha1.AnalysisGate{
					Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: "smoke"}},
				}}},
			}},
		},
	}
	web := webDeployment(ns, 1)
	createAll(t, g, tmpl, policy, web)
	g.Eventually(func() string { return memberImage(t, "east", ns, "web") }).Should(gomega.Equal("registry.example/web:1"))
	g.Eventually(func() *workv1alpha1.Revisions { return bindingOf(ctx, ns, "web-deployment").Spec.Revisions }).ShouldNot(gomega.BeNil())

	setImage(t, g, web, "registry.example/web:2")
	rel := "web-deployment-r2"
	g.Eventually(func() string {
		if r := getRelease(ns, rel); r != nil {
			return r.Status.Message
		}
		return ""
	}).Should(gomega.And(
		gomega.ContainSubstring("held:"),
		gomega.ContainSubstring("AnalysisTemplate smoke: spec.metrics[0].provider.job.spec: {{args.image}} is not declared"),
		gomega.ContainSubstring("add {name: image} to spec.args"),
	))
	g.Expect(memberImage(t, "east", ns, "web")).To(gomega.Equal("registry.example/web:1"), "nothing changes while held")
}
