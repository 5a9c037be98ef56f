package analysis

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis/analysistest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	S = rolloutv1alpha1.AnalysisSuccessful
	F = rolloutv1alpha1.AnalysisFailed
	I = rolloutv1alpha1.AnalysisInconclusive
	E = rolloutv1alpha1.AnalysisError
	R = rolloutv1alpha1.AnalysisRunning
)

// recordAll feeds outcomes of the given phases, a minute apart.
func recordAll(m rolloutv1alpha1.Metric, phases ...rolloutv1alpha1.AnalysisPhase) rolloutv1alpha1.MetricResult {
	result := rolloutv1alpha1.MetricResult{Name: m.Name, Phase: rolloutv1alpha1.AnalysisPending}
	for i, p := range phases {
		now := t0.Add(time.Duration(i) * time.Minute)
		result, _ = Record(m, result, Outcome{Phase: p, Value: strconv.Itoa(i), StartedAt: now}, now, t0, 0)
	}
	return result
}

func TestRecordDecidesTheMetricPhase(t *testing.T) {
	tests := []struct {
		name   string
		metric func(*rolloutv1alpha1.Metric)
		phases []rolloutv1alpha1.AnalysisPhase
		want   rolloutv1alpha1.AnalysisPhase
	}{
		{name: "one measurement by default", phases: []rolloutv1alpha1.AnalysisPhase{S}, want: S},
		{name: "one failure by default", phases: []rolloutv1alpha1.AnalysisPhase{F}, want: F},
		{name: "an error is retried", phases: []rolloutv1alpha1.AnalysisPhase{E}, want: R},
		{name: "an error does not count toward count", phases: []rolloutv1alpha1.AnalysisPhase{E, S}, want: S},
		{name: "interval without count runs on", metric: every("1m"), phases: []rolloutv1alpha1.AnalysisPhase{S, S, S, S}, want: R},
		{name: "count reached", metric: counted(3), phases: []rolloutv1alpha1.AnalysisPhase{S, S, S}, want: S},
		{name: "count not reached", metric: counted(3), phases: []rolloutv1alpha1.AnalysisPhase{S, S}, want: R},
		{name: "count reached past an error", metric: counted(3), phases: []rolloutv1alpha1.AnalysisPhase{S, E, S, S}, want: S},
		{name: "within failureLimit", metric: both(counted(3), failureLimit(1)), phases: []rolloutv1alpha1.AnalysisPhase{F, S, S}, want: S},
		{name: "past failureLimit", metric: both(every("1m"), failureLimit(1)), phases: []rolloutv1alpha1.AnalysisPhase{F, S, F}, want: F},
		{name: "at failureLimit keeps running", metric: both(every("1m"), failureLimit(1)), phases: []rolloutv1alpha1.AnalysisPhase{F, S}, want: R},
		{name: "past inconclusiveLimit 0", metric: every("1m"), phases: []rolloutv1alpha1.AnalysisPhase{I}, want: I},
		{name: "within inconclusiveLimit", metric: both(every("1m"), inconclusiveLimit(2)), phases: []rolloutv1alpha1.AnalysisPhase{I, I}, want: R},
		{name: "past inconclusiveLimit", metric: both(every("1m"), inconclusiveLimit(2)), phases: []rolloutv1alpha1.AnalysisPhase{I, I, I}, want: I},
		{name: "four errors in a row are tolerated", phases: []rolloutv1alpha1.AnalysisPhase{E, E, E, E}, want: R},
		{name: "five errors in a row", phases: []rolloutv1alpha1.AnalysisPhase{E, E, E, E, E}, want: E},
		{name: "a verdict resets the error streak", metric: every("1m"), phases: []rolloutv1alpha1.AnalysisPhase{E, E, E, E, S, E, E, E, E}, want: R},
		{name: "consecutiveErrorLimit 0", metric: errorLimit(0), phases: []rolloutv1alpha1.AnalysisPhase{E}, want: E},
		{name: "failure beats errors", metric: both(every("1m"), errorLimit(0)), phases: []rolloutv1alpha1.AnalysisPhase{F, E}, want: F},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := analysistest.WebMetric("m")
			if tt.metric != nil {
				tt.metric(&m)
			}
			if got := recordAll(m, tt.phases...); got.Phase != tt.want {
				t.Errorf("phase = %s, want %s (%s)", got.Phase, tt.want, got.Message)
			}
		})
	}
}

func every(interval string) func(*rolloutv1alpha1.Metric) {
	return func(m *rolloutv1alpha1.Metric) { m.Interval = rolloutv1alpha1.Duration(interval) }
}
func counted(n int32) func(*rolloutv1alpha1.Metric) {
	return func(m *rolloutv1alpha1.Metric) { m.Count, m.Interval = &n, "1m" }
}
func failureLimit(n int32) func(*rolloutv1alpha1.Metric) {
	return func(m *rolloutv1alpha1.Metric) { m.FailureLimit = &n }
}
func inconclusiveLimit(n int32) func(*rolloutv1alpha1.Metric) {
	return func(m *rolloutv1alpha1.Metric) { m.InconclusiveLimit = &n }
}
func errorLimit(n int32) func(*rolloutv1alpha1.Metric) {
	return func(m *rolloutv1alpha1.Metric) { m.ConsecutiveErrorLimit = &n }
}
func both(a, b func(*rolloutv1alpha1.Metric)) func(*rolloutv1alpha1.Metric) {
	return func(m *rolloutv1alpha1.Metric) { a(m); b(m) }
}

func TestRecordCountsAndMessages(t *testing.T) {
	m := analysistest.WebMetric("m")
	m.Interval = "1m"
	m.FailureLimit, m.InconclusiveLimit = ptr.To[int32](2), ptr.To[int32](5)
	got := recordAll(m, S, E, F, I, E, E, F)
	want := struct{ Count, Successful, Failed, Inconclusive, Error, ConsecutiveError int32 }{7, 1, 2, 1, 3, 0}
	have := struct{ Count, Successful, Failed, Inconclusive, Error, ConsecutiveError int32 }{got.Count, got.Successful, got.Failed, got.Inconclusive, got.Error, got.ConsecutiveError}
	if diff := cmp.Diff(want, have); diff != "" {
		t.Errorf("counters (-want +got):\n%s", diff)
	}
	if got.Phase != R {
		t.Errorf("phase %s, want Running", got.Phase)
	}

	// A completed metric takes no more measurements.
	m.InconclusiveLimit = nil
	stopped := recordAll(m, S, E, F, I, E, E, F)
	if stopped.Phase != I || stopped.Count != 4 || !strings.Contains(stopped.Message, "inconclusiveLimit 0") {
		t.Errorf("phase %s, count %d, message %q", stopped.Phase, stopped.Count, stopped.Message)
	}
	errored := recordAll(errorLimitMetric(), E, E)
	if errored.Phase != E || !strings.Contains(errored.Message, "consecutiveErrorLimit 1") {
		t.Errorf("phase %s, message %q", errored.Phase, errored.Message)
	}
}

func errorLimitMetric() rolloutv1alpha1.Metric {
	m := analysistest.WebMetric("m")
	m.ConsecutiveErrorLimit = ptr.To[int32](1)
	return m
}

func TestRecordKeepsTheLatestMeasurements(t *testing.T) {
	m := analysistest.WebMetric("m")
	m.Interval = "1m"
	phases := make([]rolloutv1alpha1.AnalysisPhase, 15)
	for i := range phases {
		phases[i] = S
	}
	got := recordAll(m, phases...)
	if len(got.Measurements) != MaxMeasurements || got.Count != 15 || got.Successful != 15 {
		t.Fatalf("%d measurements, count %d, successful %d", len(got.Measurements), got.Count, got.Successful)
	}
	if first, last := got.Measurements[0].Value, got.Measurements[9].Value; first != "5" || last != "14" {
		t.Errorf("kept measurements %s..%s, want 5..14", first, last)
	}
}

func TestMeasurementRetention(t *testing.T) {
	spec := rolloutv1alpha1.AnalysisRunSpec{MeasurementRetention: []rolloutv1alpha1.MeasurementRetention{{MetricName: "*", Limit: 3}, {MetricName: "long", Limit: 20}}}
	tests := []struct {
		name   string
		spec   rolloutv1alpha1.AnalysisRunSpec
		metric string
		want   int
	}{
		{name: "default", metric: "m", want: MaxMeasurements},
		{name: "every metric", spec: spec, metric: "m", want: 3},
		{name: "its own entry beats *", spec: spec, metric: "long", want: 20},
		{name: "bounded", spec: rolloutv1alpha1.AnalysisRunSpec{MeasurementRetention: []rolloutv1alpha1.MeasurementRetention{{MetricName: "m", Limit: 5000}}}, metric: "m", want: MaxRetainedMeasurements},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := analysistest.WebMetric(tt.metric)
			m.Interval = "1m"
			result := rolloutv1alpha1.MetricResult{Name: m.Name}
			for i := range 60 {
				now := t0.Add(time.Duration(i) * time.Minute)
				result, _ = Record(m, result, Outcome{Phase: S, Value: strconv.Itoa(i), StartedAt: now}, now, t0, Retention(tt.spec, tt.metric))
			}
			if len(result.Measurements) != tt.want || result.Count != 60 {
				t.Fatalf("kept %d measurements (count %d), want %d", len(result.Measurements), result.Count, tt.want)
			}
			if last := result.Measurements[tt.want-1].Value; last != "59" {
				t.Errorf("last kept measurement %s, want the latest (59)", last)
			}
		})
	}
}

func TestDryRunMetricsDecideNothing(t *testing.T) {
	metrics := []rolloutv1alpha1.Metric{{Name: "a"}, {Name: "b"}}
	tests := []struct {
		name    string
		dryRun  []rolloutv1alpha1.DryRun
		results []rolloutv1alpha1.AnalysisPhase
		want    rolloutv1alpha1.AnalysisPhase
		message string
	}{
		{name: "not dry run: a failure fails", results: []rolloutv1alpha1.AnalysisPhase{F, S}, want: F},
		{name: "a dry-run failure is recorded only", dryRun: []rolloutv1alpha1.DryRun{{MetricName: "a"}}, results: []rolloutv1alpha1.AnalysisPhase{F, S}, want: S, message: "dry run, not counted: a Failed"},
		{name: "dry-run error and inconclusive too", dryRun: []rolloutv1alpha1.DryRun{{MetricName: "*"}}, results: []rolloutv1alpha1.AnalysisPhase{E, I}, want: S, message: "a Error, b Inconclusive"},
		{name: "the run waits for a dry-run metric", dryRun: []rolloutv1alpha1.DryRun{{MetricName: "a"}}, results: []rolloutv1alpha1.AnalysisPhase{R, S}, want: R},
		{name: "other metrics still decide", dryRun: []rolloutv1alpha1.DryRun{{MetricName: "a"}}, results: []rolloutv1alpha1.AnalysisPhase{F, F}, want: F, message: "metric b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var results []rolloutv1alpha1.MetricResult
			for i, p := range tt.results {
				results = append(results, rolloutv1alpha1.MetricResult{Name: metrics[i].Name, Phase: p})
			}
			got, msg := RunPhase(rolloutv1alpha1.AnalysisRunSpec{Metrics: metrics, DryRun: tt.dryRun}, results)
			if got != tt.want || !strings.Contains(msg, tt.message) {
				t.Errorf("RunPhase = %s %q, want %s containing %q", got, msg, tt.want, tt.message)
			}
		})
	}
}

func TestRecordDoesNotModifyItsInput(t *testing.T) {
	m := analysistest.WebMetric("m")
	m.Interval = "1m"
	before := recordAll(m, S, S)
	snapshot := before.DeepCopy()
	Record(m, before, Outcome{Phase: F}, t0.Add(time.Hour), t0, 0)
	if diff := cmp.Diff(snapshot, &before); diff != "" {
		t.Errorf("input changed (-before +after):\n%s", diff)
	}
}

func TestRecordInProgress(t *testing.T) {
	m := rolloutv1alpha1.Metric{Name: "smoke", Provider: rolloutv1alpha1.MetricProvider{Job: &rolloutv1alpha1.JobMetric{}}}
	result := rolloutv1alpha1.MetricResult{Name: "smoke"}
	result, next := Record(m, result, Outcome{Phase: R, StartedAt: t0}, t0, t0, 0)
	if result.Phase != R || result.Count != 0 || len(result.Measurements) != 1 || result.Measurements[0].FinishedAt != nil {
		t.Fatalf("in progress: %+v", result)
	}
	if !next.Equal(t0) {
		t.Errorf("a measurement in progress is read again at once, got %s", next)
	}
	// Still running a little later: nothing changes.
	again, _ := Record(m, result, Outcome{Phase: R, StartedAt: t0.Add(5 * time.Second)}, t0.Add(5*time.Second), t0, 0)
	if diff := cmp.Diff(result, again); diff != "" {
		t.Errorf("still running changed the result:\n%s", diff)
	}
	done, next := Record(m, again, Outcome{Phase: S, Value: "true", StartedAt: t0.Add(10 * time.Second)}, t0.Add(10*time.Second), t0, 0)
	want := []rolloutv1alpha1.Measurement{{Phase: S, Value: "true", StartedAt: &metav1.Time{Time: t0}, FinishedAt: &metav1.Time{Time: t0.Add(10 * time.Second)}}}
	if diff := cmp.Diff(want, done.Measurements); diff != "" {
		t.Errorf("measurements (-want +got):\n%s", diff)
	}
	if done.Phase != S || done.Count != 1 || !next.IsZero() {
		t.Errorf("phase %s, count %d, next %s", done.Phase, done.Count, next)
	}
}

func TestNextMeasurementAt(t *testing.T) {
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }
	tests := []struct {
		name   string
		metric rolloutv1alpha1.Metric
		result rolloutv1alpha1.MetricResult
		want   time.Time
	}{
		{name: "first at once", metric: rolloutv1alpha1.Metric{}, want: t0},
		{name: "first after initialDelay", metric: rolloutv1alpha1.Metric{InitialDelay: "2m"}, want: t0.Add(2 * time.Minute)},
		{name: "next an interval after the last finished", metric: rolloutv1alpha1.Metric{Interval: "1m", InitialDelay: "2m"},
			result: rolloutv1alpha1.MetricResult{Phase: R, Measurements: []rolloutv1alpha1.Measurement{{Phase: S, StartedAt: at(2 * time.Minute), FinishedAt: at(2*time.Minute + 3*time.Second)}}},
			want:   t0.Add(3*time.Minute + 3*time.Second)},
		{name: "error retried after an interval", metric: rolloutv1alpha1.Metric{Interval: "5m"},
			result: rolloutv1alpha1.MetricResult{Phase: R, Measurements: []rolloutv1alpha1.Measurement{{Phase: E, FinishedAt: at(time.Minute)}}},
			want:   t0.Add(6 * time.Minute)},
		{name: "error without interval retried soon", metric: rolloutv1alpha1.Metric{},
			result: rolloutv1alpha1.MetricResult{Phase: R, Measurements: []rolloutv1alpha1.Measurement{{Phase: E, FinishedAt: at(time.Minute)}}},
			want:   t0.Add(time.Minute + ErrorRetryDelay)},
		{name: "a zero interval is held to the rate floor", metric: rolloutv1alpha1.Metric{Interval: "0s", Count: ptr.To[int32](100000)},
			result: rolloutv1alpha1.MetricResult{Phase: R, Measurements: []rolloutv1alpha1.Measurement{{Phase: S, StartedAt: at(time.Minute), FinishedAt: at(time.Minute + time.Millisecond)}}},
			want:   t0.Add(time.Minute + time.Millisecond + MinMeasurementSpacing)},
		{name: "a sub-second interval is held to the rate floor", metric: rolloutv1alpha1.Metric{Interval: "10ms", Count: ptr.To[int32](5)},
			result: rolloutv1alpha1.MetricResult{Phase: R, Measurements: []rolloutv1alpha1.Measurement{{Phase: F, FinishedAt: at(time.Minute)}}},
			want:   t0.Add(time.Minute + MinMeasurementSpacing)},
		{name: "in progress: read again", metric: rolloutv1alpha1.Metric{Interval: "5m"},
			result: rolloutv1alpha1.MetricResult{Phase: R, Measurements: []rolloutv1alpha1.Measurement{{Phase: R, StartedAt: at(time.Minute)}}},
			want:   t0.Add(time.Minute)},
		{name: "completed: never", metric: rolloutv1alpha1.Metric{Interval: "5m"},
			result: rolloutv1alpha1.MetricResult{Phase: S, Measurements: []rolloutv1alpha1.Measurement{{Phase: S, FinishedAt: at(time.Minute)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NextMeasurementAt(tt.metric, tt.result, t0); !got.Equal(tt.want) {
				t.Errorf("next = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestScheduleByCountAndInterval(t *testing.T) {
	m := analysistest.WebMetric("m")
	m.Count, m.Interval, m.InitialDelay = ptr.To[int32](3), "1m", "30s"
	result := rolloutv1alpha1.MetricResult{Name: "m"}
	now := t0
	var taken []time.Duration
	for i := 0; i < 10 && !result.Phase.Completed(); i++ {
		due := NextMeasurementAt(m, result, t0)
		if due.After(now) {
			now = due
		}
		taken = append(taken, now.Sub(t0))
		result, _ = Record(m, result, Outcome{Phase: S, StartedAt: now}, now.Add(time.Second), t0, 0)
		now = now.Add(time.Second)
	}
	want := []time.Duration{30 * time.Second, 91 * time.Second, 152 * time.Second}
	if diff := cmp.Diff(want, taken); diff != "" || result.Phase != S {
		t.Errorf("measured at (-want +got):\n%s\nphase %s", diff, result.Phase)
	}
}

func TestRunPhase(t *testing.T) {
	spec := func(terminate bool) rolloutv1alpha1.AnalysisRunSpec {
		return rolloutv1alpha1.AnalysisRunSpec{Terminate: terminate, Metrics: []rolloutv1alpha1.Metric{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	}
	results := func(phases ...rolloutv1alpha1.AnalysisPhase) []rolloutv1alpha1.MetricResult {
		var out []rolloutv1alpha1.MetricResult
		for i, p := range phases {
			out = append(out, rolloutv1alpha1.MetricResult{Name: string(rune('a' + i)), Phase: p, Message: "because"})
		}
		return out
	}
	tests := []struct {
		name      string
		terminate bool
		results   []rolloutv1alpha1.MetricResult
		want      rolloutv1alpha1.AnalysisPhase
		message   string
	}{
		{name: "failed beats the rest", results: results(E, I, F), want: F, message: "metric c: because"},
		{name: "error beats inconclusive", results: results(I, E, S), want: E, message: "metric b"},
		{name: "inconclusive", results: results(S, I, R), want: I},
		{name: "all successful", results: results(S, S, S), want: S},
		{name: "still running", results: results(S, R, S), want: R},
		{name: "not measured yet", results: results(S, S), want: R},
		{name: "terminated counts running as successful", terminate: true, results: results(S, R), want: S, message: "terminated"},
		{name: "terminated keeps a failure", terminate: true, results: results(F, R), want: F},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, msg := RunPhase(spec(tt.terminate), tt.results)
			if got != tt.want || !strings.Contains(msg, tt.message) {
				t.Errorf("RunPhase = %s %q, want %s containing %q", got, msg, tt.want, tt.message)
			}
		})
	}
}

func TestValidateMetrics(t *testing.T) {
	good := analysistest.WebMetric("ok")
	twoProviders := analysistest.WebMetric("two")
	twoProviders.Provider.Prometheus = &rolloutv1alpha1.PrometheusMetric{Address: "http://p", Query: "up"}
	badInterval := analysistest.WebMetric("interval")
	badInterval.Interval = "5 minutes"
	badCondition := analysistest.WebMetric("cond")
	badCondition.FailureCondition = "result >"
	badJob := rolloutv1alpha1.Metric{Name: "job", Provider: rolloutv1alpha1.MetricProvider{Job: &rolloutv1alpha1.JobMetric{Spec: runtime.RawExtension{Raw: []byte(`[1]`)}}}}
	badMethod := analysistest.WebMetric("method")
	badMethod.Provider.Web.Method = "PUT"
	spinning := analysistest.WebMetric("spinning")
	spinning.Interval = "0s"

	if err := ValidateMetrics([]rolloutv1alpha1.Metric{good}); err != nil {
		t.Errorf("valid metric: %v", err)
	}
	countedBackToBack := analysistest.WebMetric("counted")
	countedBackToBack.Interval, countedBackToBack.Count = "0s", ptr.To[int32](3)
	if err := ValidateMetrics([]rolloutv1alpha1.Metric{countedBackToBack}); err != nil {
		t.Errorf("a zero interval with a count: %v", err)
	}
	err := ValidateMetrics([]rolloutv1alpha1.Metric{good, twoProviders, badInterval, badCondition, badJob, badMethod, spinning})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"metrics[1].provider: set exactly one",
		`metrics[2].interval: "5 minutes" is not a duration`,
		"metrics[3].failureCondition: unexpected token",
		"metrics[4].provider.job.spec: must be a batch/v1 JobSpec object",
		`metrics[5].provider.web.method: "PUT" is not supported`,
		`metrics[6].interval: "0s" without a count measures back to back forever`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
