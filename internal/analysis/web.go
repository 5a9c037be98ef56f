package analysis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/client-go/util/jsonpath"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// defaultWebTimeout bounds a call whose metric sets no timeoutSeconds.
const defaultWebTimeout = 10 * time.Second

// WebProvider calls a metric's URL and reads its JSON answer. The value is what jsonPath picks
// (the whole document without one), decoded as encoding/json does; a JSON string stays a
// string even when it reads like a number or a bool, so conditions never depend on a guess.
// A non-2xx answer, a body that is not JSON, or an unreachable server is an error.
//
// Only http and https URLs are called, under Egress's rules (Platform for a metric of a
// ClusterAnalysisTemplate); at most 1 MiB of the answer is read, and no error repeats the
// answer's body: only the value jsonPath picked is ever recorded (cut to 1 KiB).
type WebProvider struct {
	// Egress decides which addresses may be reached; nil allows public addresses only.
	Egress *Egress
	// Platform says the metric comes from a ClusterAnalysisTemplate.
	Platform bool
}

// Measure implements Provider.
func (p *WebProvider) Measure(ctx context.Context, run *rolloutv1alpha1.AnalysisRun, metric rolloutv1alpha1.Metric) (any, string, error) {
	spec := metric.Provider.Web
	if spec == nil {
		return nil, "", errors.New("provider.web is not set")
	}
	values := argValues(run.Spec.Args)
	address, err := substitute(spec.URL, values)
	if err != nil {
		return nil, "", fmt.Errorf("provider.web.url: %w", err)
	}
	if _, err := checkScheme("provider.web.url", address); err != nil {
		return nil, "", err
	}
	method := spec.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if method == http.MethodPost && spec.Body != "" {
		b, err := substitute(spec.Body, values)
		if err != nil {
			return nil, "", fmt.Errorf("provider.web.body: %w", err)
		}
		body = strings.NewReader(b)
	}
	timeout := secondsOr(spec.TimeoutSeconds, defaultWebTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, address, body)
	if err != nil {
		return nil, "", fmt.Errorf("provider.web.url: %w", unwrapURLError(err))
	}
	for i, h := range spec.Headers {
		v, err := substitute(h.Value, values)
		if err != nil {
			return nil, "", fmt.Errorf("provider.web.headers[%d].value: %w", i, err)
		}
		if strings.EqualFold(h.Key, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(h.Key, v)
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	// Only scheme, host and path go into messages: a query string may carry a token.
	target := method + " " + req.URL.Scheme + "://" + req.URL.Host + req.URL.Path
	resp, err := egressOrDefault(p.Egress).Client(p.Platform, timeout).Do(req)
	if err != nil {
		return nil, "", callError(target, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The body is not shown: the server may be one the template should not read.
		return nil, "", fmt.Errorf("%s answered %s; only a 2xx JSON answer is measured", target, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", callError(target, err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		// encoding/json's errors name at most one character of the input.
		return nil, "", fmt.Errorf("the answer of %s is not JSON: %w", target, err)
	}
	value := doc
	if spec.JSONPath != "" {
		if value, err = pickJSONPath(doc, spec.JSONPath); err != nil {
			return nil, "", err
		}
	}
	return value, formatValue(value), nil
}

// pickJSONPath returns the value a kubectl-style JSONPath ({$.data.ok}) selects: the value
// itself when it selects one, a []any when it selects several.
func pickJSONPath(doc any, path string) (any, error) {
	jp := jsonpath.New("jsonPath")
	if err := jp.Parse(path); err != nil {
		return nil, fmt.Errorf("provider.web.jsonPath %q: %w; write it like {$.data.ok}", path, err)
	}
	results, err := jp.FindResults(doc)
	if err != nil {
		return nil, fmt.Errorf("provider.web.jsonPath %q: %w", path, err)
	}
	var picked []any
	for _, r := range results {
		for _, v := range r {
			if !v.IsValid() || !v.CanInterface() {
				picked = append(picked, nil)
				continue
			}
			picked = append(picked, v.Interface())
		}
	}
	switch len(picked) {
	case 0:
		return nil, fmt.Errorf("provider.web.jsonPath %q matched nothing in the answer", path)
	case 1:
		return picked[0], nil
	}
	return picked, nil
}

// unwrapURLError drops the *url.Error wrapper, which repeats the full URL (and its query).
func unwrapURLError(err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}
