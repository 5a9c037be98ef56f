// Package failover owns the cluster side of failover: it taints a Cluster that stays not
// Ready past the grace period with cluster.flotilla.dev/unreachable:NoExecute, and removes
// the taint once the cluster has been Ready again for the grace period (a hold-down against
// flapping). The scheduler reacts to the taint (moving
// Divided replicas with graceful eviction tasks), and the binding controller finishes
// evictions and moves applications that stay Degraded.
//
// It writes only the taints it owns on Cluster specs and events; it must not touch
// bindings, Works or member objects.
package failover
