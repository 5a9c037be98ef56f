package analysis

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// defaultPrometheusTimeout bounds a query whose metric sets no timeoutSeconds.
const defaultPrometheusTimeout = 30 * time.Second

// PrometheusProvider runs a metric's query as an instant query. An instant vector becomes a
// []float64 of the sample values in the server's order, a scalar a float64; any other result
// type, an unreachable server or an error answer is an error.
type PrometheusProvider struct {
	// RoundTripper carries the requests; nil uses the client library's default transport.
	RoundTripper http.RoundTripper
	// Now is the evaluation time of queries; nil means time.Now.
	Now func() time.Time
}

// Measure implements Provider.
func (p *PrometheusProvider) Measure(ctx context.Context, run *rolloutv1alpha1.AnalysisRun, metric rolloutv1alpha1.Metric) (any, string, error) {
	spec := metric.Provider.Prometheus
	if spec == nil {
		return nil, "", errors.New("provider.prometheus is not set")
	}
	query, err := substitute(spec.Query, argValues(run.Spec.Args))
	if err != nil {
		return nil, "", fmt.Errorf("provider.prometheus.query: %w", err)
	}
	client, err := promapi.NewClient(promapi.Config{Address: spec.Address, RoundTripper: p.RoundTripper})
	if err != nil {
		return nil, "", fmt.Errorf("provider.prometheus.address %q: %w", spec.Address, err)
	}
	timeout := secondsOr(spec.TimeoutSeconds, defaultPrometheusTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	value, _, _, err := promv1.NewAPI(client).Query(ctx, query, now(), promv1.WithTimeout(timeout))
	if err != nil {
		// A generic HTTP error keeps the server's answer in Detail; it says why.
		var apiErr *promv1.Error
		if errors.As(err, &apiErr) && strings.TrimSpace(apiErr.Detail) != "" {
			return nil, "", fmt.Errorf("querying prometheus at %s: %w: %s", spec.Address, err, shorten(strings.TrimSpace(apiErr.Detail), 300))
		}
		return nil, "", fmt.Errorf("querying prometheus at %s: %w", spec.Address, err)
	}
	switch v := value.(type) {
	case model.Vector:
		samples := make([]float64, len(v))
		for i, s := range v {
			samples[i] = float64(s.Value)
		}
		return samples, formatValue(samples), nil
	case *model.Scalar:
		f := float64(v.Value)
		return f, formatValue(f), nil
	case nil:
		return nil, "", fmt.Errorf("prometheus at %s returned no result for %q", spec.Address, query)
	default:
		return nil, "", fmt.Errorf("query %q returned a %s; write a query that returns an instant vector or a scalar", query, v.Type())
	}
}

// secondsOr turns a timeoutSeconds field into a duration, def when unset.
func secondsOr(seconds int32, def time.Duration) time.Duration {
	if seconds <= 0 {
		return def
	}
	return time.Duration(seconds) * time.Second
}
