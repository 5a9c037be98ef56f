package analysis

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis/analysistest"
)

// fakePrometheus answers /api/v1/query with the JSON the Prometheus HTTP API returns, chosen
// by the query text.
func fakePrometheus(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		query := r.FormValue("query")
		mu.Lock()
		queries = append(queries, query)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasPrefix(query, "vector"):
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[
				{"metric":{"__name__":"success_rate","cluster":"eu-1"},"value":[1772366400,"0.95"]},
				{"metric":{"__name__":"success_rate","cluster":"us-1"},"value":[1772366400,"0.5"]}]}}`)
		case strings.HasPrefix(query, "empty"):
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
		case strings.HasPrefix(query, "scalar"):
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"scalar","result":[1772366400,"3"]}}`)
		case strings.HasPrefix(query, "nan"):
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"scalar","result":[1772366400,"NaN"]}}`)
		case strings.HasPrefix(query, "matrix"):
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"matrix","result":[
				{"metric":{},"values":[[1772366400,"1"],[1772366460,"2"]]}]}}`)
		case strings.HasPrefix(query, "string"):
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"string","result":[1772366400,"hello"]}}`)
		case strings.HasPrefix(query, "broken"):
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"status":"error","errorType":"bad_data","error":"1:7: parse error: unexpected end of input"}`)
		default:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"status":"error","errorType":"internal","error":"storage unavailable"}`)
		}
	}))
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), queries...)
	}
}

func TestPrometheusProvider(t *testing.T) {
	srv, queries := fakePrometheus(t)
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	tests := []struct {
		name      string
		address   string
		query     string
		want      any
		wantRaw   string
		wantError string
	}{
		{name: "vector", query: "vector", want: []float64{0.95, 0.5}, wantRaw: "[0.95,0.5]"},
		{name: "empty vector", query: "empty", want: []float64{}, wantRaw: "[]"},
		{name: "scalar", query: "scalar", want: 3.0, wantRaw: "3"},
		{name: "NaN scalar keeps a readable value", query: "nan", wantRaw: `"NaN"`},
		{name: "matrix", query: "matrix", wantError: "returned a matrix; write a query that returns an instant vector or a scalar"},
		{name: "string", query: "string", wantError: `unexpected value type "string"`},
		{name: "bad query", query: "broken", wantError: "parse error"},
		{name: "server error", query: "other", wantError: "storage unavailable"},
		{name: "server down", address: closedURL, query: "vector", wantError: "querying prometheus at " + closedURL},
		{name: "missing argument", query: "vector{{args.nope}}", wantError: `provider.prometheus.query: argument "nope" has no value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			address := srv.URL
			if tt.address != "" {
				address = tt.address
			}
			metric := rolloutv1alpha1.Metric{Name: "m", SuccessCondition: "true", Provider: rolloutv1alpha1.MetricProvider{Prometheus: &rolloutv1alpha1.PrometheusMetric{Address: address, Query: tt.query, TimeoutSeconds: 5}}}
			if tt.wantError != "" {
				// A failed call is an Error measurement, never a success, even without conditions.
				o := TakeMeasurement(context.Background(), &PrometheusProvider{Egress: testLoopback}, analysistest.RunWithArgs(nil), metric, t0)
				if o.Phase != E || !strings.Contains(o.Message, tt.wantError) {
					t.Errorf("measurement %s %q, want Error containing %q", o.Phase, o.Message, tt.wantError)
				}
				return
			}
			got, raw, err := (&PrometheusProvider{Egress: testLoopback}).Measure(context.Background(), analysistest.RunWithArgs(nil), metric)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != nil {
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("value (-want +got):\n%s", diff)
				}
			}
			if raw != tt.wantRaw {
				t.Errorf("raw = %s, want %s", raw, tt.wantRaw)
			}
		})
	}

	t.Run("judged end to end", func(t *testing.T) {
		for query, want := range map[string]rolloutv1alpha1.AnalysisPhase{"vector": S, "empty": E} {
			metric := promMetric("rate", query)
			metric.Provider.Prometheus.Address = srv.URL
			if o := TakeMeasurement(context.Background(), &PrometheusProvider{Egress: testLoopback}, analysistest.RunWithArgs(nil), metric, t0); o.Phase != want {
				t.Errorf("%s: phase %s (%s), want %s", query, o.Phase, o.Message, want)
			}
		}
	})

	t.Run("arguments", func(t *testing.T) {
		metric := promMetric("rate", `vector{service="{{args.service}}"}`)
		metric.Provider.Prometheus.Address = srv.URL
		if _, _, err := (&PrometheusProvider{Egress: testLoopback}).Measure(context.Background(), analysistest.RunWithArgs(map[string]string{"service": "checkout"}), metric); err != nil {
			t.Fatal(err)
		}
		got := queries()
		if last := got[len(got)-1]; last != `vector{service="checkout"}` {
			t.Errorf("query sent = %s", last)
		}
	})
}
