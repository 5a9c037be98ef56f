package release

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// phaseCollector reports how many releases are in each phase, read from the cache at scrape.
type phaseCollector struct {
	c    client.Reader
	desc *prometheus.Desc
}

func newPhaseCollector(c client.Reader) *phaseCollector {
	return &phaseCollector{c: c, desc: prometheus.NewDesc("flotilla_releases", "Releases by phase.", []string{"phase"}, nil)}
}

func (p *phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

func (p *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &rolloutv1alpha1.ReleaseList{}
	if err := p.c.List(ctx, list); err != nil {
		return
	}
	counts := map[rolloutv1alpha1.ReleasePhase]int{}
	for _, phase := range []rolloutv1alpha1.ReleasePhase{rolloutv1alpha1.ReleaseProgressing, rolloutv1alpha1.ReleasePaused, rolloutv1alpha1.ReleaseSucceeded,
		rolloutv1alpha1.ReleaseAborted, rolloutv1alpha1.ReleaseRolledBack, rolloutv1alpha1.ReleaseSuperseded} {
		counts[phase] = 0
	}
	for _, r := range list.Items {
		counts[r.Status.Phase]++
	}
	for phase, n := range counts {
		if phase == "" {
			phase = "Pending"
		}
		ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, float64(n), string(phase))
	}
}

func recordPhase(rel *rolloutv1alpha1.Release) {
	releasePhases.WithLabelValues(string(rel.Status.Phase)).Inc()
}
