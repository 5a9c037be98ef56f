package release

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

func TestStepTimeLeftDoesNotCountTimePaused(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.MicroTime { return &metav1.MicroTime{Time: now.Add(-ago)} }
	for _, tc := range []struct {
		name string
		ws   rolloutv1alpha1.WaveStatus
		want time.Duration
	}{
		{"from the step's start", rolloutv1alpha1.WaveStatus{StepStartedAt: at(4 * time.Minute)}, 6 * time.Minute},
		{"overdue", rolloutv1alpha1.WaveStatus{StepStartedAt: at(11 * time.Minute)}, -time.Minute},
		{"resumed after the step started", rolloutv1alpha1.WaveStatus{StepStartedAt: at(30 * time.Minute), ProgressSince: at(time.Minute)}, 9 * time.Minute},
		{"an older resume does not extend the step", rolloutv1alpha1.WaveStatus{StepStartedAt: at(2 * time.Minute), ProgressSince: at(time.Hour)}, 8 * time.Minute},
	} {
		if got := stepTimeLeft(&tc.ws, now, 10*time.Minute); got != tc.want {
			t.Errorf("%s: %s left, want %s", tc.name, got, tc.want)
		}
	}
}

func TestCanaryWait(t *testing.T) {
	reported := map[string]workv1alpha1.ClusterStatus{
		"a": {CanaryHealth: workv1alpha1.HealthHealthy},
		"b": {CanaryHealth: workv1alpha1.HealthProgressing},
		"c": {CanaryHealth: workv1alpha1.HealthDegraded},
		"d": {},
	}
	clusters := []string{"a", "b", "c", "d", "e"}
	starting, degraded := canaryWait(clusters, nil, reported, true)
	if !slices.Equal(starting, []string{"b", "d", "e"}) || !slices.Equal(degraded, []string{"c"}) {
		t.Errorf("every cluster: starting %v degraded %v", starting, degraded)
	}
	starting, degraded = canaryWait(clusters, map[string]int32{"a": 1, "c": 1}, reported, true)
	if len(starting) != 0 || !slices.Equal(degraded, []string{"c"}) {
		t.Errorf("only clusters running a canary: starting %v degraded %v", starting, degraded)
	}
	if starting, _ := canaryWait(clusters, map[string]int32{"a": 1}, reported, false); !slices.Equal(starting, []string{"a"}) {
		t.Errorf("a status not yet fresh counts as starting: %v", starting)
	}
}
