package release

import (
	"fmt"
	"strings"
	"time"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// progressDeadline is how long a wave, or one step of it, may wait for the new revision to run
// healthy (or its routes to apply) before it fails.
func progressDeadline(rel *rolloutv1alpha1.Release) time.Duration {
	if d, set, _ := policyv1alpha1.ParseDuration("", rel.Spec.Strategy.ProgressDeadline); set { // validated in step
		return d
	}
	return defaultProgressDeadline
}

// canaryWait sorts the clusters running a canary (every cluster when counts is nil; those
// with a count above zero otherwise) into those whose canary is still starting and those
// where it went Degraded. A status not yet fresh counts as starting.
func canaryWait(clusters []string, counts map[string]int32, reported map[string]workv1alpha1.ClusterStatus, fresh bool) (starting, degraded []string) {
	for _, cl := range clusters {
		if counts != nil && counts[cl] == 0 {
			continue
		}
		switch h := reported[cl].CanaryHealth; {
		case !fresh || h == "" || h == workv1alpha1.HealthUnknown || h == workv1alpha1.HealthProgressing:
			starting = append(starting, cl)
		case h == workv1alpha1.HealthDegraded:
			degraded = append(degraded, cl)
		}
	}
	return starting, degraded
}

// stepTimeLeft is how long the wave's current step may still wait for canaries or routes: the
// progress deadline counted from when the step started, or from when the release was last
// resumed or made progress, whichever is later. Zero or less means overdue.
func stepTimeLeft(ws *rolloutv1alpha1.WaveStatus, now time.Time, deadline time.Duration) time.Duration {
	since := now
	if ws.StepStartedAt != nil {
		since = ws.StepStartedAt.Time
	}
	if ws.ProgressSince != nil && ws.ProgressSince.After(since) {
		since = ws.ProgressSince.Time
	}
	return deadline - now.Sub(since)
}

// overdue says whether the wave's current step waited past the progress deadline; if not,
// the release looks again when it would be.
func (s *step) overdue(ws *rolloutv1alpha1.WaveStatus) bool {
	left := stepTimeLeft(ws, s.now, progressDeadline(s.rel))
	s.after(left)
	return left <= 0
}

// canaryOverdue is the failure of a step whose canaries did not turn healthy in time.
func canaryOverdue(wave Wave, k int, starting []string, deadline time.Duration) string {
	return fmt.Sprintf("wave %s step %d: canary not healthy within the progress deadline %s in %s", wave.Name, k+1, deadline, strings.Join(starting, ", "))
}
