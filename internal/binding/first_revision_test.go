package binding

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// A template released in waves reaches no cluster before its first revision is recorded, so
// a change made in between is never rendered as an update that skips the waves; a template
// already running when a rollout is added keeps running, and one without a rollout goes at once.
func TestNoClusterBeforeTheFirstRevision(t *testing.T) {
	policy := func(rollout *policyv1alpha1.RolloutStrategy) *policyv1alpha1.PropagationPolicy {
		return &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
			Spec: policyv1alpha1.PropagationSpec{Rollout: rollout}}
	}
	waves := &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "all", ClusterNames: []string{"east"}}}}
	for _, tt := range []struct {
		name     string
		policy   *policyv1alpha1.PropagationPolicy
		revs     *workv1alpha1.Revisions
		hasWorks bool
		want     bool
	}{
		{"rollout, revision 1 not recorded", policy(waves), nil, false, true},
		{"rollout, revision 1 recorded", policy(waves), &workv1alpha1.Revisions{Latest: 1, Stable: 1}, false, false},
		{"rollout added to a running template", policy(waves), nil, true, false},
		{"no rollout", policy(nil), nil, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.policy)
			b := rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("east"), Revisions: tt.revs})
			got, err := h.ctrl.notReachedYet(context.Background(), b, "east", tt.hasWorks)
			if err != nil || got != tt.want {
				t.Errorf("notReachedYet = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
