package agent

import (
	"context"
	"errors"
	"net/http"
	"testing"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/pull"
)

// Before it removes a deleted Work's objects the agent asks whether its cluster is being
// unjoined: the cluster's policy wins, a control plane that no longer knows the agent means
// unjoined (what runs stays), and no answer deletes nothing on a guess.
func TestTheAgentAsksWhetherItsClusterIsUnjoined(t *testing.T) {
	answer := func(state pull.ClusterState, err error) ownClusterFacts {
		return ownClusterFacts{name: "edge", ask: func(context.Context) (pull.ClusterState, error) { return state, err }}
	}
	for _, tc := range []struct {
		name      string
		facts     ownClusterFacts
		unjoining bool
		policy    clusterv1alpha1.ClusterDeletionPolicy
		fails     bool
	}{
		{"joined", answer(pull.ClusterState{}, nil), false, "", false},
		{"unjoined with Delete", answer(pull.ClusterState{Unjoining: true, DeletionPolicy: clusterv1alpha1.ClusterDeletionDelete}, nil), true, clusterv1alpha1.ClusterDeletionDelete, false},
		{"unjoined with no policy", answer(pull.ClusterState{Unjoining: true}, nil), true, clusterv1alpha1.ClusterDeletionOrphan, false},
		{"its certificate refused", answer(pull.ClusterState{}, &refusal{status: http.StatusForbidden}), true, clusterv1alpha1.ClusterDeletionOrphan, false},
		{"no answer", answer(pull.ClusterState{}, errors.New("connection refused")), false, "", true},
		{"the control plane failing", answer(pull.ClusterState{}, &refusal{status: http.StatusServiceUnavailable}), false, "", true},
	} {
		unjoining, policy, err := tc.facts.Unjoining(context.Background(), "edge")
		if unjoining != tc.unjoining || policy != tc.policy || (err != nil) != tc.fails {
			t.Errorf("%s: %v %q %v; want %v %q, error %v", tc.name, unjoining, policy, err, tc.unjoining, tc.policy, tc.fails)
		}
	}
	f := answer(pull.ClusterState{}, nil)
	if _, _, err := f.Unjoining(context.Background(), "other"); err == nil {
		t.Error("asked about another cluster: no error; want one (an agent knows its own only)")
	}
	if !f.Pull(context.Background(), "edge") || f.Pull(context.Background(), "other") {
		t.Error("the agent's own cluster is the one Pull cluster it applies")
	}
}
