package cluster

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
)

// A replica that has just begun to handle Pull clusters (it started, or became the leader)
// has heard no agent yet: silence counts from then, not from the last report written to
// the Cluster, so a leader change alone never makes a connected agent look silent.
func TestAgentSilenceCountsFromWhenThisReplicaBeganToListen(t *testing.T) {
	start := time.Now()
	clock := clocktesting.NewFakePassiveClock(start)
	r := &Reconciler{Cache: clustercache.New(clustercache.DefaultOptions()), Clock: clock}
	seen := metav1.NewTime(start.Add(-10 * time.Minute)) // written by the previous leader
	cl := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge"}, Status: clusterv1alpha1.ClusterStatus{
		Agent: &clusterv1alpha1.AgentStatus{CertificateSHA256: "00", LastSeen: &seen}}}

	r.handlingPull(start, true)
	clock.SetTime(start.Add(20 * time.Second))
	if got := r.agentSilentFor(cl); got != 20*time.Second {
		t.Errorf("20s after this replica began to listen: silent for %s; want 20s, not since the last report written", got)
	}
	r.handlingPull(clock.Now(), true) // still leading: the clock does not restart
	clock.SetTime(start.Add(time.Minute))
	if got := r.agentSilentFor(cl); got != time.Minute {
		t.Errorf("still leading a minute on: silent for %s; want 1m", got)
	}

	r.handlingPull(clock.Now(), false) // lost the lease
	r.handlingPull(start.Add(2*time.Minute), true)
	clock.SetTime(start.Add(2*time.Minute + 5*time.Second))
	if got := r.agentSilentFor(cl); got != 5*time.Second {
		t.Errorf("5s after leading again: silent for %s; want 5s", got)
	}
	r.Cache.Report("edge", clustercache.Health{Readiness: clustercache.ReadinessReady, LastProbeTime: clock.Now()})
	clock.SetTime(clock.Now().Add(3 * time.Second))
	if got := r.agentSilentFor(cl); got != 3*time.Second {
		t.Errorf("3s after the agent's last heartbeat: silent for %s; want 3s", got)
	}
}
