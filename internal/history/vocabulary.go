package history

// Outcomes of a record.
const (
	OutcomeApplied = "applied"
	OutcomeHealthy = "healthy"
	OutcomeFailed  = "failed"
	OutcomeRemoved = "removed"
	// OutcomeCorrected and OutcomeDrifted are of drift records: put back, or only reported.
	OutcomeCorrected = "corrected"
	OutcomeDrifted   = "drifted"
)

// Causes of a record.
const (
	CauseRelease     = "release"
	CauseRollback    = "rollback"
	CausePlacement   = "placement"
	CauseFailover    = "failover"
	CauseSuspend     = "suspend"
	CauseApply       = "apply"
	CauseRemoval     = "removal"
	CauseAdoption    = "adoption"
	CauseAppFailover = "application-failover"
	CauseUnmanage    = "unmanage"
	CauseManage      = "manage"
	// CauseDrift records a member object changed by hand (a Pull member's agent reports them
	// with the time they happened there). It says what happened, not what runs: Latest
	// skips it.
	CauseDrift = "drift"
)

// Causes are every cause a record may have.
var Causes = []string{CauseRelease, CauseRollback, CausePlacement, CauseFailover, CauseAppFailover, CauseSuspend,
	CauseApply, CauseRemoval, CauseAdoption, CauseUnmanage, CauseManage, CauseDrift}
