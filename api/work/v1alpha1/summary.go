package v1alpha1

// The kstatus summary of a binding, which kubectl wait, Flux's health checks and kstatus read:
// Ready when the template is applied and healthy in every cluster it is placed on,
// Reconciling while Flotilla gets it there by itself, Stalled when it needs someone. The
// binding controller writes all three.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
)

// Reasons of the summary conditions of a binding.
const (
	// ReasonReady: applied and healthy in every target cluster.
	ReasonReady = "Ready"
	// ReasonProgressing: applying, or the members' controllers are rolling it out.
	ReasonProgressing = "Progressing"
	// ReasonApplyFailed: a member refused or could not be reached; retried.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonDegraded: running but degraded in a cluster (application failover may move it).
	ReasonDegraded = "Degraded"
	// ReasonNotScheduled: no cluster chosen yet, or none fits (the Scheduled condition says why).
	ReasonNotScheduled = "NotScheduled"
	// ReasonInterpreterError: a customization fails; fix it.
	ReasonInterpreterError = "InterpreterError"
	// ReasonRefused: the binding names a template or policy it may not; nothing is written.
	ReasonRefused = "Refused"
)
