package cluster

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
)

// A Pull member's agent dials in (package pull); its heartbeats reach this controller as
// health the clustercache holds without a connection. Ready follows them: True while the
// agent reports a member that answers it, False once it has been silent for AgentSilence
// (then failover treats the cluster as any lost one).

// DefaultAgentSilence is how long a Pull member's agent may stay silent before its Cluster is
// not Ready; agents report every 10 s.
const DefaultAgentSilence = 45 * time.Second

// lastSeenInterval is how stale status.agent.lastSeen may get while nothing else changes.
const lastSeenInterval = 30 * time.Second

func (r *Reconciler) agentSilence() time.Duration {
	if r.AgentSilence > 0 {
		return r.AgentSilence
	}
	return DefaultAgentSilence
}

// reconcilePull writes a Pull member's status from its agent's latest report.
func (r *Reconciler) reconcilePull(ctx context.Context, cl *clusterv1alpha1.Cluster, before *clusterv1alpha1.Cluster, status *clusterv1alpha1.ClusterStatus) (ctrl.Result, error) {
	r.Cache.Disconnect(cl.Name) // a cluster switched from Push keeps no connection
	now := r.Clock.Now()
	health, reported := r.Cache.Reported(cl.Name)
	var requeue time.Duration
	switch {
	case status.Agent == nil || status.Agent.CertificateSHA256 == "":
		setReady(status, metav1.ConditionFalse, clusterv1alpha1.ReasonAgentNotRegistered,
			fmt.Sprintf("no agent has registered: run flotilla-agent in the member with the bootstrap token `flotilla join %s --mode Pull` printed", cl.Name), cl.Generation)
	case reported && now.Sub(health.LastProbeTime) < r.agentSilence():
		switch health.Readiness {
		case clustercache.ReadinessReady:
			setReady(status, metav1.ConditionTrue, clusterv1alpha1.ReasonAgentConnected, "the agent reports and its member's API server answers it", cl.Generation)
		case clustercache.ReadinessNotReady:
			setReady(status, metav1.ConditionFalse, clusterv1alpha1.ReasonProbeFailed, "the agent reports that its member's API server fails: "+health.LastError, cl.Generation)
		default:
			// A restarted agent that has not probed yet: the verdict in status stands.
			if meta.FindStatusCondition(status.Conditions, clusterv1alpha1.ConditionReady) == nil {
				setReady(status, metav1.ConditionUnknown, clusterv1alpha1.ReasonProbing, "the agent reports; waiting for its first probe of the member", cl.Generation)
			}
		}
		seen := metav1.NewTime(health.LastProbeTime.Truncate(time.Second))
		status.Agent.LastSeen = &seen
		status.Agent.Version = health.Agent
		if health.Version != "" {
			status.KubernetesVersion = health.Version
		}
		if health.APIEnablements != nil {
			status.APIEnablements = health.APIEnablements
		}
		if health.Nodes != nil {
			status.NodeSummary, status.ResourceSummary = health.Nodes, health.Resources
		}
		requeue = r.agentSilence() - now.Sub(health.LastProbeTime)
	default:
		// Silent: measured from the last report this process received, else from what status
		// says, but never from before this process started (its memory of reports is empty).
		since := r.started
		if status.Agent.LastSeen != nil && status.Agent.LastSeen.After(since) {
			since = status.Agent.LastSeen.Time
		}
		if reported && health.LastProbeTime.After(since) {
			since = health.LastProbeTime
		}
		if silent := now.Sub(since); silent < r.agentSilence() {
			requeue = r.agentSilence() - silent
			break
		}
		last := "never since the controller-manager started"
		if status.Agent.LastSeen != nil {
			last = "since " + status.Agent.LastSeen.UTC().Format(time.RFC3339)
		}
		setReady(status, metav1.ConditionFalse, clusterv1alpha1.ReasonAgentSilent,
			fmt.Sprintf("the agent has not reported %s (silence limit %s): the member is unreachable, disconnected or its agent is down", last, r.agentSilence()), cl.Generation)
	}
	if err := r.checkShortName(ctx, cl, status); err != nil {
		return ctrl.Result{}, err
	}
	r.recordTransition(before, status)
	if err := r.patchStatus(ctx, before, status, false); err != nil {
		return ctrl.Result{}, err
	}
	if requeue > 0 {
		requeue += time.Second
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}
