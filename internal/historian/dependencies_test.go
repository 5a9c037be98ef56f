package historian

import (
	"testing"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/history"
)

// A cluster whose first Work waits for dependencies has nothing applied: no outcome, so no
// "failed" record for the message that says what it waits for.
func TestAClusterWaitingForDependenciesHasNoOutcome(t *testing.T) {
	waiting := workv1alpha1.ClusterStatus{Cluster: "europe", WaitingFor: "Application shop/db is Degraded in cluster europe",
		Message: "waiting for dependencies before it is first applied here: Application shop/db is Degraded in cluster europe"}
	if got := outcomeOf(waiting); got != "" {
		t.Errorf("outcome of a waiting cluster: %q, want none", got)
	}
	failed := workv1alpha1.ClusterStatus{Cluster: "europe", Message: "conflict"}
	if got := outcomeOf(failed); got != history.OutcomeFailed {
		t.Errorf("outcome of a cluster that failed to apply: %q, want %q", got, history.OutcomeFailed)
	}
}
