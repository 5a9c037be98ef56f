package analysis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// Provider takes one measurement of a metric. value is what conditions see as `result`; raw
// is the value as recorded in the measurement (JSON where possible). An error, other than
// ErrInProgress, makes an Error measurement.
type Provider interface {
	Measure(ctx context.Context, run *rolloutv1alpha1.AnalysisRun, metric rolloutv1alpha1.Metric) (value any, raw string, err error)
}

// ErrInProgress says the measurement started but has no value yet (the Jobs still run); the
// same measurement is read again later.
var ErrInProgress = errors.New("measurement in progress")

// providerKind names the provider a metric uses, for messages.
func providerKind(m rolloutv1alpha1.Metric) string {
	switch {
	case m.Provider.Prometheus != nil:
		return "prometheus"
	case m.Provider.Web != nil:
		return "web"
	case m.Provider.Job != nil:
		return "job"
	}
	return ""
}

// formatValue renders a measured value as JSON; Prometheus may return NaN or ±Inf, which JSON
// cannot hold, so floats are written by strconv.
func formatValue(v any) string {
	switch t := v.(type) {
	case float64:
		return formatFloat(t)
	case []float64:
		parts := make([]string, len(t))
		for i, f := range t {
			parts[i] = formatFloat(f)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func formatFloat(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return strconv.Quote(strconv.FormatFloat(f, 'g', -1, 64))
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Shorten cuts s to at most max bytes on a rune boundary, marking the cut.
func Shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
