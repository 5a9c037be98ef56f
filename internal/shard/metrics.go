package shard

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	ownedClusters = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "flotilla_shard_clusters",
		Help: "Member clusters this controller-manager replica works on (connections, informers, applies).",
	}, []string{"replica"})
	clusterOwner = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "flotilla_shard_cluster_owner",
		Help: "1 for each member cluster this replica works on.",
	}, []string{"replica", "cluster"})
	leader = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "flotilla_shard_leader",
		Help: "1 when this replica leads: it runs the control-plane-wide controllers and keeps the Works.",
	}, []string{"replica"})
	registerOnce sync.Once
	lastOwned    = map[string]bool{}
	lastMu       sync.Mutex
)

func recordOwnership(replica string, held []string, leading bool) {
	registerOnce.Do(func() { metrics.Registry.MustRegister(ownedClusters, clusterOwner, leader) })
	lastMu.Lock()
	defer lastMu.Unlock()
	now := map[string]bool{}
	for _, c := range held {
		now[c] = true
		clusterOwner.WithLabelValues(replica, c).Set(1)
	}
	for c := range lastOwned {
		if !now[c] {
			clusterOwner.DeleteLabelValues(replica, c)
		}
	}
	lastOwned = now
	ownedClusters.WithLabelValues(replica).Set(float64(len(held)))
	v := 0.0
	if leading {
		v = 1
	}
	leader.WithLabelValues(replica).Set(v)
}
