package analysis

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis/analysistest"
)

func TestWebProvider(t *testing.T) {
	var mu sync.Mutex
	var gotMethod, gotBody, gotHeader, gotQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		gotMethod, gotBody, gotHeader, gotQuery = r.Method, string(b), r.Header.Get("Authorization"), r.URL.RawQuery
		mu.Unlock()
		switch r.URL.Path {
		case "/health":
			_, _ = io.WriteString(w, `{"data":{"ok":true,"rate":0.97,"text":"0.95","flag":"true","hosts":[{"up":1},{"up":0}]}}`)
		case "/down":
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
		case "/html":
			_, _ = io.WriteString(w, "<html>hello</html>")
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	tests := []struct {
		name      string
		web       rolloutv1alpha1.WebMetric
		want      any
		wantRaw   string
		wantError string
	}{
		{name: "number", web: rolloutv1alpha1.WebMetric{URL: srv.URL + "/health", JSONPath: "{$.data.rate}"}, want: 0.97, wantRaw: "0.97"},
		{name: "bool", web: rolloutv1alpha1.WebMetric{URL: srv.URL + "/health", JSONPath: "{$.data.ok}"}, want: true, wantRaw: "true"},
		{name: "numeric string stays a string", web: rolloutv1alpha1.WebMetric{URL: srv.URL + "/health", JSONPath: "{$.data.text}"}, want: "0.95", wantRaw: `"0.95"`},
		{name: "bool string stays a string", web: rolloutv1alpha1.WebMetric{URL: srv.URL + "/health", JSONPath: "{.data.flag}"}, want: "true"},
		{name: "several values", web: rolloutv1alpha1.WebMetric{URL: srv.URL + "/health", JSONPath: "{$.data.hosts[*].up}"}, want: []any{1.0, 0.0}, wantRaw: "[1,0]"},
		{name: "whole document", web: rolloutv1alpha1.WebMetric{URL: srv.URL + "/health"}, want: map[string]any{"data": map[string]any{"ok": true, "rate": 0.97, "text": "0.95", "flag": "true", "hosts": []any{map[string]any{"up": 1.0}, map[string]any{"up": 0.0}}}}},
		{name: "missing key", web: rolloutv1alpha1.WebMetric{URL: srv.URL + "/health", JSONPath: "{$.data.nope}"}, wantError: "nope is not found"},
		{name: "bad path", web: rolloutv1alpha1.WebMetric{URL: srv.URL + "/health", JSONPath: "{$.data"}, wantError: "write it like {$.data.ok}"},
		{name: "non-2xx", web: rolloutv1alpha1.WebMetric{URL: srv.URL + "/down", JSONPath: "{$.ok}"}, wantError: "answered 503 Service Unavailable; only a 2xx JSON answer is measured"},
		{name: "not JSON", web: rolloutv1alpha1.WebMetric{URL: srv.URL + "/html"}, wantError: "is not JSON"},
		{name: "server down", web: rolloutv1alpha1.WebMetric{URL: closedURL + "/health"}, wantError: "calling GET " + closedURL + "/health"},
		{name: "timeout", web: rolloutv1alpha1.WebMetric{URL: srv.URL + "/slow", TimeoutSeconds: 1}, wantError: "calling GET"},
		{name: "missing argument", web: rolloutv1alpha1.WebMetric{URL: srv.URL + "/{{args.nope}}"}, wantError: `provider.web.url: argument "nope" has no value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			metric := rolloutv1alpha1.Metric{Name: "m", Provider: rolloutv1alpha1.MetricProvider{Web: &tt.web}}
			if tt.wantError != "" {
				// A failed call is an Error measurement, never a success, even without conditions.
				o := TakeMeasurement(context.Background(), &WebProvider{Egress: testLoopback}, analysistest.RunWithArgs(nil), metric, t0)
				if o.Phase != E || !strings.Contains(o.Message, tt.wantError) {
					t.Errorf("measurement %s %q, want Error containing %q", o.Phase, o.Message, tt.wantError)
				}
				return
			}
			got, raw, err := (&WebProvider{Egress: testLoopback}).Measure(context.Background(), analysistest.RunWithArgs(nil), metric)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("value (-want +got):\n%s", diff)
			}
			if tt.wantRaw != "" && raw != tt.wantRaw {
				t.Errorf("raw = %s, want %s", raw, tt.wantRaw)
			}
		})
	}

	t.Run("POST with arguments", func(t *testing.T) {
		web := rolloutv1alpha1.WebMetric{
			URL:      srv.URL + "/health?service={{args.service}}",
			Method:   "POST",
			Body:     `{"service":"{{args.service}}"}`,
			Headers:  []rolloutv1alpha1.WebMetricHeader{{Key: "Authorization", Value: "Bearer {{args.token}}"}},
			JSONPath: "{$.data.ok}",
		}
		run := analysistest.RunWithArgs(map[string]string{"service": "checkout", "token": "s3cret"})
		if _, _, err := (&WebProvider{Egress: testLoopback}).Measure(context.Background(), run, rolloutv1alpha1.Metric{Name: "m", Provider: rolloutv1alpha1.MetricProvider{Web: &web}}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if gotMethod != "POST" || gotBody != `{"service":"checkout"}` || gotHeader != "Bearer s3cret" || gotQuery != "service=checkout" {
			t.Errorf("request: %s %q, Authorization %q, query %q", gotMethod, gotBody, gotHeader, gotQuery)
		}
	})
}
