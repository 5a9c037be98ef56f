package historian

import (
	"testing"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/history"
)

func TestOutcomeOfAClusterStatus(t *testing.T) {
	for _, c := range []struct {
		cs   workv1alpha1.ClusterStatus
		want string
	}{
		{workv1alpha1.ClusterStatus{}, ""},
		{workv1alpha1.ClusterStatus{Message: "conflict: not Flotilla's"}, history.OutcomeFailed},
		{workv1alpha1.ClusterStatus{Applied: true, Health: workv1alpha1.HealthProgressing}, history.OutcomeApplied},
		{workv1alpha1.ClusterStatus{Applied: true, Health: workv1alpha1.HealthHealthy}, history.OutcomeHealthy},
		{workv1alpha1.ClusterStatus{Applied: true, Health: workv1alpha1.HealthHealthy, Suspended: true}, ""},
		{workv1alpha1.ClusterStatus{Applied: true, Health: workv1alpha1.HealthDegraded}, history.OutcomeFailed},
	} {
		if got := outcomeOf(c.cs); got != c.want {
			t.Errorf("%+v: %q, want %q", c.cs, got, c.want)
		}
	}
}
