package history

// Outcomes of a record.
const (
	OutcomeApplied = "applied"
	OutcomeHealthy = "healthy"
	OutcomeFailed  = "failed"
	OutcomeRemoved = "removed"
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
)

// Causes are every cause a record may have.
var Causes = []string{CauseRelease, CauseRollback, CausePlacement, CauseFailover, CauseAppFailover, CauseSuspend,
	CauseApply, CauseRemoval, CauseAdoption, CauseUnmanage, CauseManage}
