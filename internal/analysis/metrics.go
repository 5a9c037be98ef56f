package analysis

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var RunOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "flotilla_analysis_runs_total", Help: "AnalysisRuns completed, by outcome (Successful, Failed, Error, Inconclusive).",
}, []string{"phase"})

func init() { metrics.Registry.MustRegister(RunOutcomes) }
