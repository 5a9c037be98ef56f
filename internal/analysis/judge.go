package analysis

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// MaxMeasurements is how many measurements a metric result keeps unless the run's
// measurementRetention says otherwise; the counters keep counting.
const MaxMeasurements = 10

// MaxRetainedMeasurements bounds measurementRetention, as the API does: a run's status must
// stay well inside an object's size limit.
const MaxRetainedMeasurements = 50

// DefaultConsecutiveErrorLimit applies when a metric sets no consecutiveErrorLimit.
const DefaultConsecutiveErrorLimit = 4

// ErrorRetryDelay spaces the retries of a metric without an interval whose measurement erred.
const ErrorRetryDelay = 10 * time.Second

// MinMeasurementSpacing is the rate floor: a metric is measured at most once a second, whatever
// its interval says, so a template of `interval: 0s, count: 100000` cannot turn the
// controller into a load generator against a web endpoint, Prometheus or a member's Jobs.
const MinMeasurementSpacing = time.Second

// Field lengths of the API (MaxLength of Measurement.Value and of the messages).
const (
	maxValueLength      = 1024
	maxMessageLength    = 1000
	MaxRunMessageLength = 2000
)

// Outcome is what one attempt at a measurement produced: a final phase with the value and
// message, or AnalysisRunning while the provider is still at it (ErrInProgress).
type Outcome struct {
	Phase     rolloutv1alpha1.AnalysisPhase
	Value     string
	Message   string
	StartedAt time.Time
}

// Record adds an outcome to a metric's result at time now: it updates the counters, keeps the
// latest keep measurements (MaxMeasurements when keep is 0, see Retention), decides the
// metric's phase, and returns when the next measurement is due (zero once the metric is
// completed). An in-progress outcome is kept as a Running measurement that the next outcome
// replaces. The result passed in is not modified.
func Record(metric rolloutv1alpha1.Metric, result rolloutv1alpha1.MetricResult, outcome Outcome, now, runStart time.Time, keep int) (rolloutv1alpha1.MetricResult, time.Time) {
	result = *result.DeepCopy()
	result.Name = metric.Name
	if result.Phase.Completed() {
		return result, time.Time{}
	}
	started := outcome.StartedAt
	if started.IsZero() {
		started = now
	}
	if n := len(result.Measurements); n > 0 && result.Measurements[n-1].Phase == rolloutv1alpha1.AnalysisRunning {
		// The outcome finishes (or continues) the measurement in progress.
		if s := result.Measurements[n-1].StartedAt; s != nil {
			started = s.Time
		}
		result.Measurements = result.Measurements[:n-1]
	}
	m := rolloutv1alpha1.Measurement{
		Phase:     outcome.Phase,
		Value:     Shorten(outcome.Value, maxValueLength),
		Message:   Shorten(outcome.Message, maxMessageLength),
		StartedAt: &metav1.Time{Time: started},
	}
	if outcome.Phase != rolloutv1alpha1.AnalysisRunning {
		m.FinishedAt = &metav1.Time{Time: now}
		result.Count++
		switch outcome.Phase {
		case rolloutv1alpha1.AnalysisSuccessful:
			result.Successful++
		case rolloutv1alpha1.AnalysisFailed:
			result.Failed++
		case rolloutv1alpha1.AnalysisInconclusive:
			result.Inconclusive++
		default:
			m.Phase = rolloutv1alpha1.AnalysisError
			result.Error++
		}
		if m.Phase == rolloutv1alpha1.AnalysisError {
			result.ConsecutiveError++
		} else {
			result.ConsecutiveError = 0
		}
	}
	result.Measurements = append(result.Measurements, m)
	if keep <= 0 {
		keep = MaxMeasurements
	}
	keep = min(keep, MaxRetainedMeasurements)
	if extra := len(result.Measurements) - keep; extra > 0 {
		result.Measurements = append([]rolloutv1alpha1.Measurement(nil), result.Measurements[extra:]...)
	}
	result.Phase, result.Message = MetricPhase(metric, result)
	return result, NextMeasurementAt(metric, result, runStart)
}

// MetricPhase decides a metric's phase from its counters: Failed past failureLimit,
// Inconclusive past inconclusiveLimit, Error past consecutiveErrorLimit, Successful once
// count measurements with a verdict were taken, Running otherwise.
func MetricPhase(metric rolloutv1alpha1.Metric, result rolloutv1alpha1.MetricResult) (rolloutv1alpha1.AnalysisPhase, string) {
	failureLimit := int32Or(metric.FailureLimit, 0)
	inconclusiveLimit := int32Or(metric.InconclusiveLimit, 0)
	errorLimit := int32Or(metric.ConsecutiveErrorLimit, DefaultConsecutiveErrorLimit)
	var last rolloutv1alpha1.Measurement
	if n := len(result.Measurements); n > 0 {
		last = result.Measurements[n-1]
	}
	switch {
	case result.Failed > failureLimit:
		return rolloutv1alpha1.AnalysisFailed, fmt.Sprintf("%d failed measurements exceed failureLimit %d", result.Failed, failureLimit)
	case result.Inconclusive > inconclusiveLimit:
		return rolloutv1alpha1.AnalysisInconclusive, fmt.Sprintf("%d inconclusive measurements exceed inconclusiveLimit %d", result.Inconclusive, inconclusiveLimit)
	case result.ConsecutiveError > errorLimit:
		return rolloutv1alpha1.AnalysisError, Shorten(fmt.Sprintf("%d errors in a row exceed consecutiveErrorLimit %d: %s", result.ConsecutiveError, errorLimit, last.Message), maxMessageLength)
	}
	verdicts := result.Count - result.Error
	if want := wantedCount(metric); want > 0 && verdicts >= want {
		return rolloutv1alpha1.AnalysisSuccessful, fmt.Sprintf("%d of %d measurements successful", result.Successful, verdicts)
	}
	if last.Phase == rolloutv1alpha1.AnalysisError {
		return rolloutv1alpha1.AnalysisRunning, Shorten(fmt.Sprintf("retrying after %d errors in a row (consecutiveErrorLimit %d): %s", result.ConsecutiveError, errorLimit, last.Message), maxMessageLength)
	}
	return rolloutv1alpha1.AnalysisRunning, ""
}

// wantedCount is how many measurements with a verdict complete the metric; 0 means until the
// run is terminated.
func wantedCount(metric rolloutv1alpha1.Metric) int32 {
	if metric.Count != nil && *metric.Count > 0 {
		return *metric.Count
	}
	if metric.Interval == "" {
		return 1
	}
	return 0
}

// Retention is how many measurements the run keeps of a metric: its own measurementRetention
// entry, else the "*" entry, else MaxMeasurements.
func Retention(spec rolloutv1alpha1.AnalysisRunSpec, metric string) int {
	keep := 0
	for _, r := range spec.MeasurementRetention {
		switch r.MetricName {
		case metric:
			return int(r.Limit)
		case "*":
			keep = int(r.Limit)
		}
	}
	if keep == 0 {
		return MaxMeasurements
	}
	return keep
}

// IsDryRun says whether the run only records the metric's verdict.
func IsDryRun(spec rolloutv1alpha1.AnalysisRunSpec, metric string) bool {
	for _, d := range spec.DryRun {
		if d.MetricName == metric || d.MetricName == "*" {
			return true
		}
	}
	return false
}

// NextMeasurementAt is when the metric's next measurement is due: initialDelay after the run
// started for the first, interval after the previous one finished for the others (an error
// without an interval is retried after ErrorRetryDelay; never sooner than MinMeasurementSpacing),
// and at once while one is in progress.
// It is zero once the metric is completed.
func NextMeasurementAt(metric rolloutv1alpha1.Metric, result rolloutv1alpha1.MetricResult, runStart time.Time) time.Time {
	if result.Phase.Completed() {
		return time.Time{}
	}
	n := len(result.Measurements)
	if n == 0 {
		return runStart.Add(durationOrZero(metric.InitialDelay))
	}
	last := result.Measurements[n-1]
	if last.Phase == rolloutv1alpha1.AnalysisRunning {
		if last.StartedAt != nil {
			return last.StartedAt.Time
		}
		return runStart
	}
	interval := max(durationOrZero(metric.Interval), MinMeasurementSpacing)
	if last.Phase == rolloutv1alpha1.AnalysisError && durationOrZero(metric.Interval) == 0 {
		interval = ErrorRetryDelay
	}
	finished := runStart
	if last.FinishedAt != nil {
		finished = last.FinishedAt.Time
	} else if last.StartedAt != nil {
		finished = last.StartedAt.Time
	}
	return finished.Add(interval)
}

// RunPhase decides a run's phase from its metrics' results: Failed when any metric failed,
// else Error, else Inconclusive, else Successful when all are; Running otherwise. A dry-run
// metric's verdict decides nothing: it counts as done once it has one, and the message says
// how it ended. With spec.terminate, metrics without a verdict count as Successful. The
// message names the metric that decided.
func RunPhase(spec rolloutv1alpha1.AnalysisRunSpec, results []rolloutv1alpha1.MetricResult) (rolloutv1alpha1.AnalysisPhase, string) {
	byName := make(map[string]rolloutv1alpha1.MetricResult, len(results))
	for _, r := range results {
		byName[r.Name] = r
	}
	firstIn := func(phase rolloutv1alpha1.AnalysisPhase) (string, bool) {
		for _, m := range spec.Metrics {
			if r := byName[m.Name]; r.Phase == phase && !IsDryRun(spec, m.Name) {
				return Shorten(fmt.Sprintf("metric %s: %s", m.Name, r.Message), MaxRunMessageLength), true
			}
		}
		return "", false
	}
	for _, phase := range []rolloutv1alpha1.AnalysisPhase{rolloutv1alpha1.AnalysisFailed, rolloutv1alpha1.AnalysisError, rolloutv1alpha1.AnalysisInconclusive} {
		if msg, ok := firstIn(phase); ok {
			return phase, msg
		}
	}
	done := 0
	var dry []string
	for _, m := range spec.Metrics {
		r := byName[m.Name]
		switch {
		case IsDryRun(spec, m.Name) && r.Phase.Completed():
			done++
			if r.Phase != rolloutv1alpha1.AnalysisSuccessful {
				dry = append(dry, fmt.Sprintf("%s %s", m.Name, r.Phase))
			}
		case r.Phase == rolloutv1alpha1.AnalysisSuccessful:
			done++
		}
	}
	note := ""
	if len(dry) > 0 {
		note = fmt.Sprintf("; dry run, not counted: %s", strings.Join(dry, ", "))
	}
	switch {
	case spec.Terminate:
		return rolloutv1alpha1.AnalysisSuccessful, Shorten("terminated: no metric failed; metrics without a verdict count as successful"+note, MaxRunMessageLength)
	case done == len(spec.Metrics):
		return rolloutv1alpha1.AnalysisSuccessful, Shorten(fmt.Sprintf("all %d metrics successful", done)+note, MaxRunMessageLength)
	}
	return rolloutv1alpha1.AnalysisRunning, Shorten(fmt.Sprintf("%d of %d metrics done so far", done, len(spec.Metrics))+note, MaxRunMessageLength)
}

// ValidateMetrics reports what would keep metrics from being measured, each error naming its
// field: one provider each, durations, conditions that compile, and a job spec that is a JSON
// object.
func ValidateMetrics(metrics []rolloutv1alpha1.Metric) error {
	var errs []error
	for i, m := range metrics {
		field := fmt.Sprintf("metrics[%d]", i)
		providers := 0
		for _, set := range []bool{m.Provider.Prometheus != nil, m.Provider.Web != nil, m.Provider.Job != nil} {
			if set {
				providers++
			}
		}
		if providers != 1 {
			errs = append(errs, fmt.Errorf("%s.provider: set exactly one of prometheus, web or job (%d set)", field, providers))
		}
		for _, d := range []struct{ name, value string }{{"interval", string(m.Interval)}, {"initialDelay", string(m.InitialDelay)}} {
			if d.value == "" {
				continue
			}
			if v, err := time.ParseDuration(d.value); err != nil || v < 0 {
				errs = append(errs, fmt.Errorf("%s.%s: %q is not a duration; write it like 30s or 5m", field, d.name, d.value))
			}
		}
		if v, err := time.ParseDuration(string(m.Interval)); err == nil && v == 0 && wantedCount(m) == 0 {
			// Admission refuses it too; a run from before that rule must not spin.
			errs = append(errs, fmt.Errorf("%s.interval: %q without a count measures back to back forever; set an interval such as 30s, or a count of at least 1", field, m.Interval))
		}
		for _, c := range []struct{ name, expression string }{{"successCondition", m.SuccessCondition}, {"failureCondition", m.FailureCondition}} {
			if c.expression == "" {
				continue
			}
			if _, err := compileCondition(c.expression); err != nil {
				errs = append(errs, fmt.Errorf("%s.%s: %w; fix the expression (it reads `result`)", field, c.name, err))
			}
		}
		if w := m.Provider.Web; w != nil && w.Method != "" && w.Method != "GET" && w.Method != "POST" {
			errs = append(errs, fmt.Errorf("%s.provider.web.method: %q is not supported; use GET or POST", field, w.Method))
		}
		// Admission refuses these too; a run written before that rule fails at once.
		if w := m.Provider.Web; w != nil {
			if err := literalSchemeProblem(field+".provider.web.url", w.URL); err != nil {
				errs = append(errs, err)
			}
		}
		if p := m.Provider.Prometheus; p != nil {
			if err := literalSchemeProblem(field+".provider.prometheus.address", p.Address); err != nil {
				errs = append(errs, err)
			}
		}
		if j := m.Provider.Job; j != nil {
			var spec map[string]any
			if err := json.Unmarshal(j.Spec.Raw, &spec); err != nil || spec == nil {
				errs = append(errs, fmt.Errorf("%s.provider.job.spec: must be a batch/v1 JobSpec object", field))
			}
		}
	}
	return errors.Join(errs...)
}

func int32Or(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// durationOrZero reads a duration ValidateMetrics has accepted.
func durationOrZero(d rolloutv1alpha1.Duration) time.Duration {
	v, err := time.ParseDuration(string(d))
	if err != nil || v < 0 {
		return 0
	}
	return v
}
