package release

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

var (
	releasePhases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_release_phase_transitions_total", Help: "Releases entering each phase.",
	}, []string{"phase"})
	waveDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "flotilla_release_wave_duration_seconds", Help: "Time from a wave's first update to its gates passing.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 14),
	}, []string{})
	rollbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_release_rollbacks_total", Help: "Releases that returned their updated clusters to stable, by cause (RolledBack: automatic; Aborted: by request).",
	}, []string{"phase"})
)

func init() {
	metrics.Registry.MustRegister(releasePhases, waveDuration, rollbacks)
}

func recordPhase(rel *rolloutv1alpha1.Release) {
	releasePhases.WithLabelValues(string(rel.Status.Phase)).Inc()
}
