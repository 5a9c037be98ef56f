package analysis

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis/analysistest"
)

// Each cluster of the wave is measured at its own Prometheus (the address templated by a
// cluster label), with the query templated by the cluster's name; the result is one value
// per cluster, which a condition judges together.
func TestPrometheusQueriesEachClusterOfTheWave(t *testing.T) {
	serve := func(value string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.Contains(r.FormValue("query"), `cluster="`) {
				t.Errorf("query not templated: %s", r.FormValue("query"))
			}
			_, _ = io.WriteString(w, fmt.Sprintf(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1772366400,%q]}]}}`, value))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	east, west := serve("0.01"), serve("0.04")
	hostOf := func(s *httptest.Server) string { u, _ := url.Parse(s.URL); return u.Host }
	labels := map[string]map[string]string{"east": {"prometheus": hostOf(east)}, "west": {"prometheus": hostOf(west)}}
	p := &PrometheusProvider{Egress: testLoopback, ClusterLabels: func(_ context.Context, name string) (map[string]string, error) {
		if l, ok := labels[name]; ok {
			return l, nil
		}
		return nil, fmt.Errorf("no cluster %s", name)
	}}
	metric := rolloutv1alpha1.Metric{Name: "errors", SuccessCondition: "all(result, {# < 0.05})",
		Provider: rolloutv1alpha1.MetricProvider{Prometheus: &rolloutv1alpha1.PrometheusMetric{
			Address: "http://{{cluster.labels.prometheus}}", Query: `errors{cluster="{{cluster.name}}"}`}}}
	run := analysistest.RunWithArgs(nil)
	run.Spec.Clusters = []string{"east", "west"}
	o := TakeMeasurement(context.Background(), p, run, metric, time.Now())
	if o.Phase != rolloutv1alpha1.AnalysisSuccessful || o.Value != `{"east":0.01,"west":0.04}` {
		t.Fatalf("%s %s %q", o.Phase, o.Value, o.Message)
	}
	metric.SuccessCondition = "all(result, {# < 0.02})"
	if o := TakeMeasurement(context.Background(), p, run, metric, time.Now()); o.Phase != rolloutv1alpha1.AnalysisFailed {
		t.Fatalf("west at 4%% fails the 2%% bound: %s %s", o.Phase, o.Value)
	}

	labels["west"] = map[string]string{}
	o = TakeMeasurement(context.Background(), p, run, metric, time.Now())
	if o.Phase != rolloutv1alpha1.AnalysisError || !strings.Contains(o.Message, `cluster west has no label "prometheus"`) {
		t.Fatalf("a missing label is named: %s %q", o.Phase, o.Message)
	}
	run.Spec.Clusters = nil
	if o := TakeMeasurement(context.Background(), p, run, metric, time.Now()); o.Phase != rolloutv1alpha1.AnalysisError || !strings.Contains(o.Message, "names none") {
		t.Fatalf("outside a wave: %s %q", o.Phase, o.Message)
	}
}
