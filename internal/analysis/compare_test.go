package analysis

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

type fixedProvider struct {
	value any
	err   error
}

func (f fixedProvider) Measure(context.Context, *rolloutv1alpha1.AnalysisRun, rolloutv1alpha1.Metric) (any, string, error) {
	return f.value, formatValue(f.value), f.err
}

func compareMetric(rule rolloutv1alpha1.Comparison, success string) rolloutv1alpha1.Metric {
	return rolloutv1alpha1.Metric{Name: "errors", SuccessCondition: success, Compare: &rule,
		Provider: rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: "http://canary"}},
		Baseline: &rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: "http://baseline"}}}
}

func TestCompareJudgesTheCanaryAgainstItsBaseline(t *testing.T) {
	for name, c := range map[string]struct {
		canary, baseline any
		rule             rolloutv1alpha1.Comparison
		success          string
		want             rolloutv1alpha1.AnalysisPhase
		message          string
	}{
		"3x the errors at 3% fails a ratio of 1.5 (a 5% threshold would pass)": {0.03, 0.01, rolloutv1alpha1.Comparison{MaxRatio: "1.5"}, "result < 0.05", rolloutv1alpha1.AnalysisFailed, "ratio 3 (at most 1.5), worse than allowed"},
		"a little worse passes":                        {0.012, 0.01, rolloutv1alpha1.Comparison{MaxRatio: "1.5"}, "", rolloutv1alpha1.AnalysisSuccessful, "within"},
		"a vector's first sample is compared":          {[]float64{0.02}, []float64{0.01}, rolloutv1alpha1.Comparison{MaxRatio: "2"}, "", rolloutv1alpha1.AnalysisSuccessful, "ratio 2"},
		"both zero are the same":                       {0.0, 0.0, rolloutv1alpha1.Comparison{MaxRatio: "1.1"}, "", rolloutv1alpha1.AnalysisSuccessful, "ratio 1"},
		"errors where the baseline has none fail":      {0.001, 0.0, rolloutv1alpha1.Comparison{MaxRatio: "10"}, "", rolloutv1alpha1.AnalysisFailed, "+Inf"},
		"the difference may be the limit":              {0.05, 0.01, rolloutv1alpha1.Comparison{MaxDifference: "0.02"}, "", rolloutv1alpha1.AnalysisFailed, "difference 0.04 (at most 0.02)"},
		"higher is better turns it around":             {0.95, 0.99, rolloutv1alpha1.Comparison{MaxDifference: "0.02", HigherIsBetter: true}, "", rolloutv1alpha1.AnalysisFailed, "difference 0.04"},
		"a better canary passes when higher is better": {0.999, 0.99, rolloutv1alpha1.Comparison{MaxRatio: "1.01", HigherIsBetter: true}, "", rolloutv1alpha1.AnalysisSuccessful, "within"},
		"the conditions still judge the canary":        {0.06, 0.05, rolloutv1alpha1.Comparison{MaxRatio: "1.5"}, "result < 0.05", rolloutv1alpha1.AnalysisFailed, "within"},
	} {
		t.Run(name, func(t *testing.T) {
			m := compareMetric(c.rule, c.success)
			p := CompareProvider{Canary: fixedProvider{value: c.canary}, Baseline: fixedProvider{value: c.baseline}}
			o := TakeMeasurement(context.Background(), p, &rolloutv1alpha1.AnalysisRun{}, m, time.Now())
			if o.Phase != c.want || !strings.Contains(o.Message, c.message) {
				t.Fatalf("phase %s message %q value %s; want %s with %q", o.Phase, o.Message, o.Value, c.want, c.message)
			}
			if !strings.Contains(o.Value, `"canary":`) || !strings.Contains(o.Value, `"baseline":`) {
				t.Fatalf("the measurement records both values: %s", o.Value)
			}
		})
	}
}

func TestCompareSaysWhichSideFailed(t *testing.T) {
	m := compareMetric(rolloutv1alpha1.Comparison{MaxRatio: "1.5"}, "")
	o := TakeMeasurement(context.Background(), CompareProvider{Canary: fixedProvider{value: 0.1}, Baseline: fixedProvider{err: errors.New("connection refused")}},
		&rolloutv1alpha1.AnalysisRun{}, m, time.Now())
	if o.Phase != rolloutv1alpha1.AnalysisError || !strings.HasPrefix(o.Message, "baseline: ") {
		t.Fatalf("%s %q", o.Phase, o.Message)
	}
	o = TakeMeasurement(context.Background(), CompareProvider{Canary: fixedProvider{value: true}, Baseline: fixedProvider{value: 0.1}},
		&rolloutv1alpha1.AnalysisRun{}, m, time.Now())
	if o.Phase != rolloutv1alpha1.AnalysisError || !strings.Contains(o.Message, "canary: true is not a number") {
		t.Fatalf("%s %q", o.Phase, o.Message)
	}
	if c := newComparison(1, 0, false, nil); !math.IsInf(c.ratio, 1) || !strings.Contains(c.raw(), `"+Inf"`) {
		t.Fatalf("an infinite ratio is recorded as JSON: %s", c.raw())
	}
}

func TestCompareTakesTheWorstCanaryCluster(t *testing.T) {
	m := compareMetric(rolloutv1alpha1.Comparison{MaxRatio: "1.5"}, "")
	o := TakeMeasurement(context.Background(), CompareProvider{Canary: fixedProvider{value: []float64{0.01, 0.03}}, Baseline: fixedProvider{value: 0.01}},
		&rolloutv1alpha1.AnalysisRun{}, m, time.Now())
	if o.Phase != rolloutv1alpha1.AnalysisFailed || !strings.Contains(o.Message, "canary 0.03") {
		t.Fatalf("one canary cluster 3x worse fails the comparison: %s %q", o.Phase, o.Message)
	}
}

func TestBaselineQueriesNeedDeclaredArgs(t *testing.T) {
	m := compareMetric(rolloutv1alpha1.Comparison{MaxRatio: "1.5"}, "")
	m.Baseline.Web.URL = "http://baseline/?clusters={{args.baseline-cluster-regex}}"
	err := TemplateProblems(rolloutv1alpha1.AnalysisTemplateSpec{Metrics: []rolloutv1alpha1.Metric{m}})
	if err == nil || !strings.Contains(err.Error(), "baseline.web.url") {
		t.Fatalf("an undeclared argument in the baseline is named: %v", err)
	}
}
