package agent

import (
	"context"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/pull"
)

// heartbeats reports the member's health every interval, takes the control plane's answer
// (how many events it took, the customizations' version) and renews the certificate at two
// thirds of its life. A control plane that does not answer, or refuses, is logged once per
// outage, not per beat.
func (a *Agent) heartbeats(ctx context.Context, members *clustercache.Cache) {
	log := logf.FromContext(ctx).WithName("agent")
	t := time.NewTicker(a.opts.HeartbeatInterval)
	defer t.Stop()
	connected, refused := true, false
	var sentAPIs []clusterv1alpha1.APIEnablement
	for {
		h, _ := members.Health(a.opts.Cluster)
		hb := pull.Heartbeat{AgentVersion: a.opts.Version, Readiness: h.Readiness, Error: h.LastError,
			KubernetesVersion: h.Version, Nodes: h.Nodes, Resources: h.Resources}
		// Discovery is large and rarely changes: sent on the first beat of a connection and
		// when it changed.
		if !connected || !sameAPIs(sentAPIs, h.APIEnablements) {
			hb.APIEnablements = h.APIEnablements
		}
		hb.Events, hb.EventsDropped = a.journal.pending(200)
		callCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
		var resp pull.HeartbeatResponse
		err := a.post(callCtx, a.client, pull.HeartbeatPath, hb, &resp)
		cancel()
		switch {
		case err == nil:
			if !connected {
				log.Info("The control plane answers again")
			}
			connected, refused = true, false
			if resp.EventsTaken > 0 {
				a.journal.delivered(min(resp.EventsTaken, len(hb.Events)), hb.EventsDropped)
			}
			if hb.APIEnablements != nil {
				sentAPIs = hb.APIEnablements
			}
			if resp.Customizations != a.customizationsVersion {
				loadCtx, cancel := context.WithTimeout(ctx, time.Minute)
				err := a.loadCustomizations(loadCtx, a.interpreters, a.customizations)
				cancel()
				if err != nil {
					log.Error(err, "Reading the platform's customizations")
				} else {
					a.customizationsVersion = resp.Customizations
					log.Info("Customizations in force", "version", resp.Customizations)
				}
			}
		case ctx.Err() != nil:
			return
		case revoked(err):
			if !refused {
				log.Error(err, "The control plane refuses this agent; it keeps the last Works applied")
			}
			connected, refused = false, true
		default:
			if connected {
				log.Info("The control plane does not answer; the agent keeps the last Works applied", "error", err.Error())
			}
			connected = false
		}
		if leaf := a.id.leaf(); connected && leaf != nil && time.Until(leaf.NotAfter) < leaf.NotAfter.Sub(leaf.NotBefore)/3 {
			renewCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := a.renew(renewCtx)
			cancel()
			if err != nil {
				log.Error(err, "Renewing the agent's certificate", "notAfter", leaf.NotAfter)
			} else {
				log.Info("Renewed the agent's certificate", "notAfter", a.id.leaf().NotAfter)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func sameAPIs(a, b []clusterv1alpha1.APIEnablement) bool {
	if len(a) != len(b) || a == nil || b == nil {
		return len(a) == len(b) && (a == nil) == (b == nil)
	}
	for i := range a {
		if a[i].GroupVersion != b[i].GroupVersion || len(a[i].Resources) != len(b[i].Resources) {
			return false
		}
		for j := range a[i].Resources {
			if a[i].Resources[j] != b[i].Resources[j] {
				return false
			}
		}
	}
	return true
}
