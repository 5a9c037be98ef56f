package cluster

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/names"
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

// agentSilentFor is how long cl's agent has not reported: measured from the last report this
// process received, else from what status says, but never from before this process began to
// handle Pull clusters (its memory of reports starts empty then).
func (r *Reconciler) agentSilentFor(cl *clusterv1alpha1.Cluster) time.Duration {
	r.pullMu.Lock()
	since := r.pullSince
	r.pullMu.Unlock()
	if a := cl.Status.Agent; a != nil && a.LastSeen != nil && a.LastSeen.After(since) {
		since = a.LastSeen.Time
	}
	if h, ok := r.Cache.Reported(cl.Name); ok && h.LastProbeTime.After(since) {
		since = h.LastProbeTime
	}
	return r.Clock.Now().Sub(since)
}

// handlesPull says whether this replica handles Pull clusters (it leads, or runs unsharded),
// and marks when it began to.
func (r *Reconciler) handlesPull() bool {
	leads := r.Shard == nil || r.Leading()
	r.handlingPull(r.Clock.Now(), leads)
	return leads
}

// handlingPull marks when this process began to handle Pull clusters (it leads, or runs
// unsharded), or forgets it when it stops leading.
func (r *Reconciler) handlingPull(now time.Time, handling bool) {
	r.pullMu.Lock()
	defer r.pullMu.Unlock()
	switch {
	case !handling:
		r.pullSince = time.Time{}
	case r.pullSince.IsZero():
		r.pullSince = now
	}
}

// releaseFromSilentAgent lets an unjoined Pull cluster's Work go when its agent is silent
// past the limit: nobody else can carry out the cluster's deletionPolicy (a connected agent
// asks ClusterPath and does), so the executor's finalizer goes and what runs there stays.
func (r *Reconciler) releaseFromSilentAgent(ctx context.Context, w *workv1alpha1.Work) error {
	if !controllerutil.ContainsFinalizer(w, names.ExecutorFinalizer) {
		return nil
	}
	patch := client.MergeFrom(w.DeepCopy())
	controllerutil.RemoveFinalizer(w, names.ExecutorFinalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, w, patch))
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
		if silent := r.agentSilentFor(cl); silent < r.agentSilence() {
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
