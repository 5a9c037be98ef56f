// Package release carries a template change over the fleet in waves.
//
// The Recorder watches bindings whose policy has a rollout. The first revision of a template
// becomes stable at once; every later change of its workload (anything but metadata, status
// and replicas) is recorded as revision latest+1 (an apps/v1 ControllerRevision owned by the
// binding, the newest revisionHistoryLimit kept) and starts a Release from the stable revision.
//
// The Controller drives Releases. Each reconcile resolves the waves from the clusters the
// template is placed on now (see ResolveWaves), pins the current wave's clusters to the new
// revision (maxUnavailable at a time), waits until the binding reports every one of them
// running it Healthy, then for the wave's gates (bake time, analysis, manual approval) and
// moves on in the same reconcile, so a passed wave costs no extra round trip. After the last
// wave the revision becomes stable and the pins are dropped. A cluster that joins mid-release
// gets the new revision if its wave has passed, the stable one otherwise. A cluster that leaves
// (it left the placement, or failover tainted it unreachable while it stays placed) is kept
// in its wave as Left with the reason and no wave waits for it; it rejoins as it returns.
//
// A wave with canary steps runs them first: setWeight pins canaries (binding spec.revisions
// canaries: replicas of the new revision taken from each cluster's share, divided with the same
// weights, rendered as NAME-canary beside the primary), pause waits for a duration or for
// promote, analysis measures. After the last step the primaries take the new revision at their
// full share, and the canaries are dropped once the primaries run it healthy.
//
// With rollout.trafficRouting the canary's weight is a traffic weight: setWeight,
// setCanaryScale and setHeaderRoute steps pin each cluster's canary with its weight, size and
// header match (the binding controller renders the routes and Services from them, see package
// traffic), and a step ends only when the canaries run healthy and every cluster's route Work
// renders that split and was applied. With rollout.blueGreen a wave runs the new revision at
// full scale as the canary behind the preview Service, runs its gates, switches the active
// Service (pin.active) and keeps the old stack for scaleDownDelay before the primaries take the
// revision. Either way the canaries go only after every route or active Service sends all
// requests to the primaries again: on completion, and on abort or rollback, where the
// finished release removes them once its routes settled.
//
// Degraded health in a wave, a progress deadline passed, or a failed analysis rolls back (when
// autoRollback, the default): exactly the clusters the release updated lose their pins and
// render the stable revision again; later waves were never touched. Abort does the same on
// request. A newer revision supersedes an unfinished release: the old one stops where it is,
// its updated clusters keep their revision until the new release's waves reach them, and the
// new release counts them as its own, so aborting it returns them to stable too.
//
// It writes only Releases, AnalysisRuns, ControllerRevisions and a binding's spec.revisions;
// never Works or member objects (the binding controller renders each cluster's pinned revision).
package release
