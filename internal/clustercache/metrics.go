package clustercache

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Labels are bounded by the number of registered clusters.
var (
	probeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "flotilla_cluster_probe_duration_seconds",
		Help:    "Duration of member cluster health probes.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
	}, []string{"cluster"})
	probeFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_cluster_probe_failures_total",
		Help: "Member cluster health probes that failed.",
	}, []string{"cluster"})
	clusterReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "flotilla_cluster_ready",
		Help: "1 when the member cluster is Ready, 0 when not Ready, -1 while unknown.",
	}, []string{"cluster"})
)

func init() {
	metrics.Registry.MustRegister(probeDuration, probeFailures, clusterReady)
}

func observeProbe(cluster string, d time.Duration, err error) {
	probeDuration.WithLabelValues(cluster).Observe(d.Seconds())
	if err != nil {
		probeFailures.WithLabelValues(cluster).Inc()
	}
}

func setReadyMetric(cluster string, r Readiness) {
	v := -1.0
	switch r {
	case ReadinessReady:
		v = 1
	case ReadinessNotReady:
		v = 0
	}
	clusterReady.WithLabelValues(cluster).Set(v)
}

// forgetMetrics drops a removed cluster's series so labels stay bounded by live clusters.
func forgetMetrics(cluster string) {
	probeDuration.DeleteLabelValues(cluster)
	probeFailures.DeleteLabelValues(cluster)
	clusterReady.DeleteLabelValues(cluster)
}
