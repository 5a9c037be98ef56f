package analysis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// type, an unreachable server or an error answer is an error. The address must be http or
// https and is reached under Egress's rules, like a web metric's; at most 1 MiB of an answer
// is read, and an error answer shows the server's error message cut short, never its body.
type PrometheusProvider struct {
	// Egress decides which addresses may be reached; nil allows public addresses only.
	Egress *Egress
	// Platform says the metric comes from a ClusterAnalysisTemplate.
	Platform bool
	// Now is the evaluation time of queries; nil means time.Now.
	Now func() time.Time
	// ClusterLabels reads the labels of the wave's clusters for {{cluster.*}} templates.
	ClusterLabels ClusterLabels
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
	if perCluster(spec.Address) || perCluster(query) {
		return p.measurePerCluster(ctx, run, spec.Address, query, spec.TimeoutSeconds)
	}
	return p.query(ctx, spec.Address, query, spec.TimeoutSeconds)
}

// query runs one instant query.
func (p *PrometheusProvider) query(ctx context.Context, address, query string, timeoutSeconds int32) (any, string, error) {
	spec := &rolloutv1alpha1.PrometheusMetric{Address: address, Query: query, TimeoutSeconds: timeoutSeconds}
	if _, err := checkScheme("provider.prometheus.address", spec.Address); err != nil {
		return nil, "", err
	}
	timeout := secondsOr(spec.TimeoutSeconds, defaultPrometheusTimeout)
	client, err := promapi.NewClient(promapi.Config{Address: spec.Address, Client: egressOrDefault(p.Egress).Client(p.Platform, timeout)})
	if err != nil {
		return nil, "", fmt.Errorf("provider.prometheus.address %q: %w", spec.Address, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	value, _, _, err := promv1.NewAPI(client).Query(ctx, query, now(), promv1.WithTimeout(timeout))
	if err != nil {
		// A generic HTTP error keeps the server's body in Detail: it is never shown, since the
		// server may be one the template should not read. The API's own error message is
		// shown, cut short.
		var apiErr *promv1.Error
		if errors.As(err, &apiErr) {
			msg := apiErr.Msg
			if reason := prometheusErrorField(apiErr.Detail); reason != "" {
				msg += ": " + reason
			}
			return nil, "", fmt.Errorf("querying prometheus at %s: %s: %s", spec.Address, apiErr.Type, Shorten(strings.TrimSpace(msg), maxErrorExcerpt))
		}
		return nil, "", fmt.Errorf("querying prometheus at %s: %w", spec.Address, callCause(err))
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

// prometheusErrorField is the "error" field of a Prometheus API error answer that came with
// a status code the client does not decode (500): a field of a JSON answer, like a web
// metric's jsonPath result, never the body itself.
func prometheusErrorField(body string) string {
	var answer struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if json.Unmarshal([]byte(body), &answer) != nil || answer.Status != "error" {
		return ""
	}
	return answer.Error
}

// maxErrorExcerpt bounds the part of a server's error message an error repeats.
const maxErrorExcerpt = 200

// secondsOr turns a timeoutSeconds field into a duration, def when unset.
func secondsOr(seconds int32, def time.Duration) time.Duration {
	if seconds <= 0 {
		return def
	}
	return time.Duration(seconds) * time.Second
}
