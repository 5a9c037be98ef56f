package analysis

import (
	"runtime"
	"strings"
	"testing"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

func TestJudge(t *testing.T) {
	prom := rolloutv1alpha1.MetricProvider{Prometheus: &rolloutv1alpha1.PrometheusMetric{Address: "http://p", Query: "q"}}
	job := rolloutv1alpha1.MetricProvider{Job: &rolloutv1alpha1.JobMetric{}}
	tests := []struct {
		name      string
		success   string
		failure   string
		provider  rolloutv1alpha1.MetricProvider
		result    any
		want      rolloutv1alpha1.AnalysisPhase
		wantError string
	}{
		{name: "vector passes", success: "result[0] >= 0.90", result: []float64{0.95}, want: rolloutv1alpha1.AnalysisSuccessful},
		{name: "vector below, no failure condition", success: "result[0] >= 0.90", result: []float64{0.5}, want: rolloutv1alpha1.AnalysisFailed},
		{name: "vector below, failure condition false", success: "result[0] >= 0.90", failure: "result[0] < 0.1", result: []float64{0.5}, want: rolloutv1alpha1.AnalysisInconclusive},
		{name: "failure condition true wins", success: "result[0] >= 0.1", failure: "result[0] < 0.6", result: []float64{0.5}, want: rolloutv1alpha1.AnalysisFailed},
		{name: "failure condition alone, false", failure: "result > 5", result: 3.0, want: rolloutv1alpha1.AnalysisSuccessful},
		{name: "no condition", result: 3.0, want: rolloutv1alpha1.AnalysisSuccessful},
		{name: "scalar", success: "result > 1", result: 3.0, want: rolloutv1alpha1.AnalysisSuccessful},
		{name: "every sample", success: "all(result, # < 0.05)", result: []float64{0.01, 0.02}, want: rolloutv1alpha1.AnalysisSuccessful},
		{name: "empty vector is an error", success: "result[0] >= 0.90", result: []float64{}, want: rolloutv1alpha1.AnalysisError, wantError: "index out of range"},
		{name: "empty vector in failure condition is an error", success: "true", failure: "result[0] > 1", result: []float64{}, want: rolloutv1alpha1.AnalysisError, wantError: "failureCondition"},
		{name: "not a bool", success: "result[0]", result: []float64{1}, want: rolloutv1alpha1.AnalysisError, wantError: "successCondition"},
		{name: "does not compile", success: "result >", result: 1.0, want: rolloutv1alpha1.AnalysisError, wantError: "does not compile"},
		{name: "web string stays a string", success: `result == "0.95"`, result: "0.95", want: rolloutv1alpha1.AnalysisSuccessful},
		{name: "web string compared as a number is an error", success: "result > 0.9", result: "0.95", want: rolloutv1alpha1.AnalysisError, wantError: "string > float64"},
		{name: "web string converted", success: "float(result) > 0.9", result: "0.95", want: rolloutv1alpha1.AnalysisSuccessful},
		{name: "web bool", success: "result == true", result: true, want: rolloutv1alpha1.AnalysisSuccessful},
		{name: "job completed, no condition", provider: job, result: true, want: rolloutv1alpha1.AnalysisSuccessful},
		{name: "job failed, no condition", provider: job, result: false, want: rolloutv1alpha1.AnalysisFailed},
		{name: "job with its own condition", provider: job, success: "result == false", result: false, want: rolloutv1alpha1.AnalysisSuccessful},
		{name: "numbers add", success: "result[0] + result[1] > 1", result: []float64{0.6, 0.6}, want: rolloutv1alpha1.AnalysisSuccessful},
		{name: "strings join and change case", success: `upper(result) + "!" == "OK!" && repeat("a", 3) == "aaa" && join(["a", "b"], ",") == "a,b"`, result: "ok", want: rolloutv1alpha1.AnalysisSuccessful},
		{name: "a mistyped addition is an error", success: `result + 1 > 0`, result: "x", want: rolloutv1alpha1.AnalysisError, wantError: "successCondition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := rolloutv1alpha1.Metric{Name: "m", SuccessCondition: tt.success, FailureCondition: tt.failure, Provider: tt.provider}
			if m.Provider == (rolloutv1alpha1.MetricProvider{}) {
				m.Provider = prom
			}
			got, err := Judge(m, tt.result)
			if got != tt.want {
				t.Errorf("phase = %s, want %s (error %v)", got, tt.want, err)
			}
			switch {
			case tt.wantError == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantError != "" && (err == nil || !strings.Contains(err.Error(), tt.wantError)):
				t.Errorf("error = %v, want one containing %q", err, tt.wantError)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestCompiledConditionsAreCached(t *testing.T) {
	a, err := compileCondition("result[0] >= 0.5")
	if err != nil {
		t.Fatal(err)
	}
	b, err := compileCondition("result[0] >= 0.5")
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("the same expression compiled twice")
	}
}

// Conditions come from users: whatever they write, one evaluation allocates a bounded amount
// and fails with a message naming the field.
func TestConditionCostIsBounded(t *testing.T) {
	long := strings.Repeat("x", 990)
	tests := []struct {
		name       string
		expression string
		result     any
		wantError  string
	}{
		{name: "repeat", expression: `len(repeat("` + long + `", 1000000)) > 0`, wantError: "repeat"},
		{name: "doubling concatenation", expression: `len(reduce(1..40, #acc + #acc, "` + long + `")) > 0`, wantError: "+"},
		{name: "join of many references", expression: `len(join(map(1..200000, "` + long + `"), "")) > 0`, wantError: "join"},
		{name: "replace growing", expression: `len(replace(replace(replace("` + long + `", "x", "` + long + `"), "x", "` + long + `"), "x", "` + long + `")) > 0`, wantError: "replace"},
		{name: "toJSON of many references", expression: `len(toJSON(map(1..200000, "` + long + `"))) > 0`, wantError: "toJSON"},
		{name: "string of many references", expression: `len(string(map(1..200000, "` + long + `"))) > 0`, wantError: "string"},
		{name: "too many nodes", expression: "len([" + strings.Repeat("1,", 400) + "1]) > 0", wantError: "nodes"},
		{name: "a long range", expression: `len(1..100000000) > 0`, wantError: "memory budget"},
		{name: "nested loops", expression: `all(1..200000, all(1..200000, # > 0))`, wantError: "memory budget"},
		{name: "doubling arrays", expression: `len(reduce(1..40, concat(#acc, #acc), [1])) > 0`, wantError: "memory budget"},
		{name: "result strings doubled", expression: `len(reduce(1..40, #acc + #acc, result)) > 0`, result: strings.Repeat("y", 1<<20), wantError: "+"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := rolloutv1alpha1.Metric{Name: "m", SuccessCondition: tt.expression,
				Provider: rolloutv1alpha1.MetricProvider{Prometheus: &rolloutv1alpha1.PrometheusMetric{Address: "http://p", Query: "q"}}}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			phase, err := Judge(m, tt.result)
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			if allocated > 64<<20 {
				t.Errorf("one evaluation allocated %d MiB", allocated>>20)
			}
			t.Logf("allocated %d KiB: %v", allocated>>10, err)
			if phase != rolloutv1alpha1.AnalysisError || err == nil {
				t.Fatalf("phase = %s, error %v; want an Error", phase, err)
			}
			// The reason must survive the shortening of the measurement's message.
			msg := Shorten(err.Error(), maxMessageLength)
			for _, want := range []string{"successCondition", tt.wantError} {
				if !strings.Contains(msg, want) {
					t.Errorf("message = %q, want it to contain %q", msg, want)
				}
			}
		})
	}
}
