// Package scheduler decides where a template's replicas run: which clusters, and how many
// replicas each. The controller filters clusters (the namespace's Team's allowed clusters
// first, then Ready, taints and tolerations, served kind, cluster affinity with ordered
// fallbacks), applies spread constraints, and divides or duplicates the replicas. It writes
// only a binding's spec.clusters (and eviction tasks) with its outcome, the
// ScheduleAnnotation, in one request; the binding controller reports that as Scheduled.
// The division itself is package replicas, a pure function of the targets and the current
// assignment.
//
// Groups (the policy's groupBy): the bindings of one group and policy are scheduled around a
// lead, the one with the most replicas (then by kind and name). The lead is scheduled as above
// on clusters that serve every kind of the group; the others take the lead's clusters, and when
// replicas are Divided, divide their own replicas with the lead's per-cluster counts as weights.
// A change to any member re-schedules the whole group.
//
// The scheduler must not render or apply anything: it only chooses.
package scheduler
