// Package scheduler decides where a template's replicas run: which clusters, and how many
// replicas each. The controller filters clusters (the namespace's Team's allowed clusters
// first, then Ready, taints and tolerations, served kind, cluster affinity with ordered
// fallbacks), applies spread constraints, and divides or duplicates the replicas. It writes
// only a binding's spec.clusters (and eviction tasks) with its outcome, the
// ScheduleAnnotation, in one request; the binding controller reports that as Scheduled.
// The division itself (divide.go) is a pure function of the targets and the current assignment.
//
// Division algorithm (Divided by weights, static or from available capacity):
//
//  1. Each target i with weight w_i has the exact quota q_i = total * w_i / sum(w).
//  2. It gets floor(q_i) or floor(q_i)+1; the R = total - sum(floor(q_i)) extra replicas go to
//     the targets that currently hold more than their floor, most above first, then to those
//     with the largest fractional part of q_i, then by name.
//
// Every target thus stays within one replica of its exact share, and among all such
// assignments this one moves the fewest replicas from the current one: giving the extra
// replica to a target that already holds more than its floor saves one move, giving it to any
// other target costs one. Scaling 10 to 12 over 1:1 adds one per cluster; adding a third
// equal cluster to 5/5 yields 4/3/3: three replicas move, the minimum.
//
// Capacity-based division uses each target's available replicas as its weight and then caps
// every target at what fits, handing overflow to targets with room by the same rule.
// Aggregated division fills the fewest clusters: those already holding replicas first, then
// the roomiest, each up to what fits.
//
// Groups (the policy's groupBy): the bindings of one group and policy are scheduled around a
// lead, the one with the most replicas (then by kind and name). The lead is scheduled as above
// on clusters that serve every kind of the group; the others take the lead's clusters, and when
// replicas are Divided, divide their own replicas with the lead's per-cluster counts as weights.
// A change to any member re-schedules the whole group.
//
// The scheduler must not render or apply anything: it only chooses.
package scheduler
