// Package replicas divides a workload's replicas over clusters: a pure function of the
// targets (weights, room) and the current assignment, used by the scheduler to place replicas
// and by the release controller to divide a canary. It reads and writes nothing.
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
package replicas
