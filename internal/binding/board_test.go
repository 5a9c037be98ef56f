package binding

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/statusboard"
)

// A workload on its way is not written to the binding at once, but its step is on the status
// board for history and releases at once; a refusal is on the board as written.
func TestReconcilePutsEveryStatusOnTheBoard(t *testing.T) {
	east := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "east"},
		Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: clusterv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Probed", LastTransitionTime: metav1.Now()}}}}
	b := resourceBinding("team-a", deploymentRef, ppTeamA, "east")
	b.UID = "u1"
	h := newTenancyHarness(t, b, east, propagationPolicy("team-a", "pp"), deployment("team-a", "web", false))
	h.ctrl.Board = &statusboard.Board{}
	ctx := context.Background()
	if err, _, works := h.reconcile(t, b); err != nil || len(works) != 1 {
		t.Fatalf("first pass: error %v, %d Works; want none, 1", err, len(works))
	}
	// The executor applied east's Work; its pods are still coming up.
	err, _, works := h.reconcile(t, b)
	if err != nil {
		t.Fatal(err)
	}
	w := &works[0]
	w.Status.Health = workv1alpha1.HealthProgressing
	meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1alpha1.ConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: w.Generation})
	if err := h.client.Update(ctx, w); err != nil { // the fake keeps a Work's status with its spec
		t.Fatal(err)
	}
	err, stored, _ := h.reconcile(t, b)
	if err != nil {
		t.Fatal(err)
	}
	newest, held := h.ctrl.Board.Of(stored)
	if !held || len(newest.Clusters) != 1 || !newest.Clusters[0].Applied || newest.Clusters[0].Health != workv1alpha1.HealthProgressing {
		t.Fatalf("on the board: %+v (held %v), want east applied and progressing", newest.Clusters, held)
	}
	if n := len(stored.BindingStatus().Clusters); n != 0 {
		t.Fatalf("a workload on its way was written at once: %d clusters in the stored status, want 0 until the wait is over", n)
	}

	// The binding is made to name another namespace's policy: refused, and the board says so.
	forged := stored.(*workv1alpha1.ResourceBinding)
	forged.Spec.PolicyRef = workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "team-b", Name: "pp"}
	if err := h.client.Update(ctx, forged); err != nil {
		t.Fatal(err)
	}
	_, stored, _ = h.reconcile(t, b)
	newest, held = h.ctrl.Board.Of(stored)
	if stalled := meta.FindStatusCondition(newest.Conditions, conditionStalled); !held || stalled == nil || stalled.Status != metav1.ConditionTrue {
		t.Fatalf("after a refusal the board holds %+v (held %v), want it Stalled", newest.Conditions, held)
	}
	if len(newest.Clusters) != 1 || len(stored.BindingStatus().Clusters) != 1 {
		t.Fatalf("the refusal's write keeps east's newest step: board %d clusters, stored %d; want 1, 1", len(newest.Clusters), len(stored.BindingStatus().Clusters))
	}
}
