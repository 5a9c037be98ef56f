package v1alpha1

// The kstatus summary of a release, which kubectl wait, Flux's health checks and kstatus read:
// Ready once it succeeded, Reconciling while it moves (waiting for an approval or paused
// included: it has not finished), Stalled when it stopped short and needs someone (aborted,
// rolled back, a failed wave held for abort or retry, an invalid strategy). A superseded
// release is neither: it is over and a newer one carries on. The release controller writes
// all three.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
)

// Reasons of the summary conditions of a release, besides the phase names.
const (
	ReasonWaitingForApproval = "WaitingForApproval"
	// ReasonWaveFailed: a wave failed and automatic rollback is off: abort or retry.
	ReasonWaveFailed = "WaveFailed"
	// ReasonInvalid: the strategy cannot run (the Valid condition says why).
	ReasonInvalid = "Invalid"
)
