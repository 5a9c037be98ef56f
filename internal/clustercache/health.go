package clustercache

import (
	"time"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
)

// Readiness is a member's probe verdict.
type Readiness string

const (
	// ReadinessUnknown: not probed enough yet to say.
	ReadinessUnknown Readiness = "Unknown"
	// ReadinessReady: the last probe succeeded.
	ReadinessReady Readiness = "Ready"
	// ReadinessNotReady: FailureThreshold consecutive probes failed.
	ReadinessNotReady Readiness = "NotReady"
)

// Health is what the cache knows about a member after its latest probe.
type Health struct {
	Readiness           Readiness
	ConsecutiveFailures int
	LastProbeTime       time.Time
	// LastError is the last probe's error while it fails.
	LastError string
	// Version is the member's Kubernetes version.
	Version string
	// APIEnablements are the resources the member serves, sorted.
	APIEnablements []clusterv1alpha1.APIEnablement
	// LastDiscovery is when APIEnablements were read.
	LastDiscovery time.Time
	// Nodes and Resources come from the member's informers once they synced; nil before.
	Nodes     *clusterv1alpha1.NodeSummary
	Resources *clusterv1alpha1.ResourceSummary
	// Agent is the version of the agent that reported this health (Pull members only); then
	// LastProbeTime is when the control plane received the report.
	Agent string
}

// probeResult is the outcome of one probe.
type probeResult struct {
	at  time.Time
	err error
}

// nextHealth folds one probe result into the member's health. A single failure does not make
// a Ready member NotReady; threshold consecutive failures do. One success makes it Ready.
func nextHealth(prev Health, r probeResult, threshold int) Health {
	next := prev
	next.LastProbeTime = r.at
	if r.err == nil {
		next.Readiness = ReadinessReady
		next.ConsecutiveFailures = 0
		next.LastError = ""
		return next
	}
	next.ConsecutiveFailures++
	next.LastError = r.err.Error()
	if next.ConsecutiveFailures >= max(threshold, 1) {
		next.Readiness = ReadinessNotReady
	}
	return next
}
