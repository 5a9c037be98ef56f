package analysis

import (
	"context"
	"fmt"
	"math"
	"strconv"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// comparison is what a compare metric measured: the canary's value and the baseline's, and
// how much worse the canary is (ratio and difference, turned around when higher is better).
type comparison struct {
	canary, baseline  float64
	ratio, difference float64
	// result is the canary's value as its provider gave it, for the metric's conditions.
	result any
}

func newComparison(canary, baseline float64, higherIsBetter bool, result any) comparison {
	worse, ref := canary, baseline
	if higherIsBetter {
		worse, ref = baseline, canary
	}
	c := comparison{canary: canary, baseline: baseline, difference: worse - ref, result: result}
	switch {
	case ref != 0:
		c.ratio = worse / ref
	case worse == 0:
		c.ratio = 1 // both zero: the same
	default:
		c.ratio = math.Inf(1)
	}
	return c
}

func (c comparison) raw() string {
	return fmt.Sprintf(`{"canary":%s,"baseline":%s,"ratio":%s,"difference":%s}`,
		formatFloat(c.canary), formatFloat(c.baseline), formatFloat(c.ratio), formatFloat(c.difference))
}

// judge says whether the canary is within the comparison's limits, and in words how it compares.
func (c comparison) judge(rule *rolloutv1alpha1.Comparison) (bool, string) {
	ok := true
	limits := ""
	if rule.MaxRatio != "" {
		max, _ := strconv.ParseFloat(rule.MaxRatio, 64)
		ok = ok && c.ratio <= max
		limits = fmt.Sprintf("ratio %s (at most %s)", strconv.FormatFloat(c.ratio, 'g', 4, 64), rule.MaxRatio)
	}
	if rule.MaxDifference != "" {
		max, _ := strconv.ParseFloat(rule.MaxDifference, 64)
		ok = ok && c.difference <= max
		if limits != "" {
			limits += ", "
		}
		limits += fmt.Sprintf("difference %s (at most %s)", strconv.FormatFloat(c.difference, 'g', 4, 64), rule.MaxDifference)
	}
	verdict := "within"
	if !ok {
		verdict = "worse than allowed"
	}
	return ok, fmt.Sprintf("canary %s vs baseline %s: %s, %s", strconv.FormatFloat(c.canary, 'g', 4, 64), strconv.FormatFloat(c.baseline, 'g', 4, 64), limits, verdict)
}

// CompareProvider measures the canary with the metric's provider and the stable version with
// its baseline provider, in that order, at the same moment of the run.
type CompareProvider struct{ Canary, Baseline Provider }

func (p CompareProvider) Measure(ctx context.Context, run *rolloutv1alpha1.AnalysisRun, metric rolloutv1alpha1.Metric) (any, string, error) {
	cv, _, err := p.Canary.Measure(ctx, run, metric)
	if err != nil {
		return nil, "", fmt.Errorf("canary: %w", err)
	}
	bm := metric
	bm.Provider, bm.Baseline, bm.Compare = *metric.Baseline, nil, nil
	bv, _, err := p.Baseline.Measure(ctx, run, bm)
	if err != nil {
		return nil, "", fmt.Errorf("baseline: %w", err)
	}
	c, err := worst(cv, metric.Compare.HigherIsBetter)
	if err != nil {
		return nil, "", fmt.Errorf("canary: %w", err)
	}
	b, err := scalar(bv)
	if err != nil {
		return nil, "", fmt.Errorf("baseline: %w", err)
	}
	cmp := newComparison(c, b, metric.Compare.HigherIsBetter, cv)
	return cmp, cmp.raw(), nil
}

// worst is the canary's worst value: of several (one per cluster, or a vector), the highest
// when lower is better and the lowest when higher is better, so every canary cluster must be
// within the comparison.
func worst(v any, higherIsBetter bool) (float64, error) {
	values, ok := v.([]float64)
	if !ok || len(values) < 2 {
		return scalar(v)
	}
	w := values[0]
	for _, f := range values[1:] {
		if (!higherIsBetter && f > w) || (higherIsBetter && f < w) {
			w = f
		}
	}
	return w, nil
}

// scalar reads one number from a measured value: a number, the first of a vector, or a string
// holding a number.
func scalar(v any) (float64, error) {
	switch t := v.(type) {
	case float64:
		return t, nil
	case int:
		return float64(t), nil
	case int64:
		return float64(t), nil
	case []float64:
		if len(t) > 0 {
			return t[0], nil
		}
		return 0, fmt.Errorf("the query returned no sample to compare")
	case []any:
		if len(t) > 0 {
			return scalar(t[0])
		}
		return 0, fmt.Errorf("the value is an empty list, nothing to compare")
	case string:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number to compare", t)
		}
		return f, nil
	}
	return 0, fmt.Errorf("%s is not a number to compare", Shorten(formatValue(v), 100))
}
