package analysis

import (
	"context"
	"errors"
	"time"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// TakeMeasurement asks the provider and judges the value.
func TakeMeasurement(ctx context.Context, provider Provider, run *rolloutv1alpha1.AnalysisRun, metric rolloutv1alpha1.Metric, started time.Time) Outcome {
	value, raw, err := provider.Measure(ctx, run, metric)
	switch {
	case errors.Is(err, ErrInProgress):
		return Outcome{Phase: rolloutv1alpha1.AnalysisRunning, StartedAt: started}
	case err != nil:
		return Outcome{Phase: rolloutv1alpha1.AnalysisError, Message: err.Error(), StartedAt: started}
	}
	phase, err := Judge(metric, value)
	outcome := Outcome{Phase: phase, Value: raw, StartedAt: started}
	if err != nil {
		outcome.Message = err.Error()
	} else if cmp, ok := value.(comparison); ok && metric.Compare != nil {
		_, outcome.Message = cmp.judge(metric.Compare)
	}
	return outcome
}
