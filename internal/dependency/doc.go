// Package dependency is the vocabulary of dependencies between workloads (spec.dependsOn of
// Applications and propagation policies, copied into bindings as spec.dependsOn): which
// bindings a binding depends on, whether each runs healthy in a cluster at its current
// revision, who may depend on what, and cycles. The binding controller holds a cluster's first
// Work on its verdict; the release controller and the application controller read the same
// verdicts, so the three cannot disagree on what "ready" means.
//
// It owns no object and writes nothing but SubjectAccessReviews; it must not import any
// controller. The trade-off: dependencies are resolved on every read from cached objects (the
// newest worked-out binding status from the status board), not stored resolved, so a new
// template of a dependency Application counts at once, at the price of a few cache reads per
// pass of a binding that has dependencies (none for those without).
//
// Tenancy: a namespaced dependent may depend on another namespace only where its namespace's
// Team may read it (the Team's contributors may get ResourceBindings there, asked of the
// control plane with a SubjectAccessReview); otherwise the dependency reads "not found or not
// readable", exactly as a missing one, so nothing of another team leaks.
package dependency
