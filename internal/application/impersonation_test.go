package application

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
)

// A Team stored before admission refused them names groups that mean everyone: an Application
// never acts as them, only as the team's own groups (one namespace's service accounts included).
func TestApplicationsNeverActAsGroupsThatMeanEveryone(t *testing.T) {
	team := &tenancyv1alpha1.Team{Spec: tenancyv1alpha1.TeamSpec{Contributors: []string{
		"shop-devs", "system:unauthenticated", "system:authenticated", "system:serviceaccounts", "system:serviceaccounts:shop",
		"system:masters", "system:nodes", "system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token",
	}}}
	want := []string{"shop-devs", "system:serviceaccounts:shop", "system:authenticated"}
	if d := cmp.Diff(want, impersonatedGroups(team)); d != "" {
		t.Errorf("impersonated groups (-want +got):\n%s", d)
	}
}
