package historian

import (
	"context"
	"slices"
	"testing"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/statusboard"
)

// A workload on its way has its binding status written only every few seconds. A cluster that
// ran it and left again (lost, failed over) between two writes is still history: the
// historian reads the status the binding controller worked out, written or not.
func TestHistoryOfAStatusNotWrittenYet(t *testing.T) {
	tmpl, b := webBinding("u4", 1)
	_, store, h, req := historianOf(tmpl, b)
	h.Board = &statusboard.Board{}
	ctx := context.Background()
	pass := func(clusters ...workv1alpha1.ClusterStatus) []string {
		t.Helper()
		h.Board.Put(b, &workv1alpha1.ResourceBindingStatus{ObservedGeneration: 1, Clusters: clusters})
		if _, err := h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
			t.Fatal(err)
		}
		return store.outcomes()
	}

	// The stored status has no cluster at all; europe ran the workload healthy.
	got := pass(workv1alpha1.ClusterStatus{Cluster: "europe", Applied: true, Health: workv1alpha1.HealthHealthy},
		workv1alpha1.ClusterStatus{Cluster: "us", Applied: true, Health: workv1alpha1.HealthProgressing})
	if want := []string{"europe healthy", "us applied"}; !slices.Equal(got, want) {
		t.Fatalf("before any status write: records %v, want %v", got, want)
	}
	// Europe is lost and placed elsewhere before the next write: its removal is history too.
	got = pass(workv1alpha1.ClusterStatus{Cluster: "us", Applied: true, Health: workv1alpha1.HealthHealthy})
	if want := []string{"europe healthy", "europe removed", "us applied", "us healthy"}; !slices.Equal(got, want) {
		t.Fatalf("after europe left: records %v, want %v", got, want)
	}
}

// After a restart the board holds nothing, and the stored status may be older than what was
// recorded (progress waits to be written): history waits for the binding controller's first
// pass instead of recording steps back, such as the removal of a cluster that still runs it.
func TestHistoryAfterARestartWaitsForTheNewestStatus(t *testing.T) {
	// As last written: us was placed after it.
	tmpl, b := webBinding("u5", 1, workv1alpha1.ClusterStatus{Cluster: "europe", Applied: true, Health: workv1alpha1.HealthHealthy})
	b.Status.ObservedGeneration = 1
	_, store, before, req := historianOf(tmpl, b)
	before.Board = &statusboard.Board{}
	ctx := context.Background()
	newest := &workv1alpha1.ResourceBindingStatus{ObservedGeneration: 1, Clusters: []workv1alpha1.ClusterStatus{
		{Cluster: "europe", Applied: true, Health: workv1alpha1.HealthHealthy},
		{Cluster: "us", Applied: true, Health: workv1alpha1.HealthProgressing}}}
	before.Board.Put(b, newest)
	if _, err := before.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
		t.Fatal(err)
	}
	records := store.outcomes
	want := []string{"europe healthy", "us applied"}
	if got := records(); !slices.Equal(got, want) {
		t.Fatalf("before the restart: records %v, want %v", got, want)
	}

	// The controller-manager restarts: a new historian and an empty board, same store.
	after := &Historian{Client: before.Client, Reader: before.Reader, Store: store, Clock: before.Clock, Board: &statusboard.Board{}}
	if _, err := after.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
		t.Fatal(err)
	}
	if got := records(); !slices.Equal(got, want) {
		t.Fatalf("after the restart, before the binding controller's pass: records %v, want %v (nothing recorded from the older stored status)", got, want)
	}
	after.Board.Put(b, newest)
	if _, err := after.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
		t.Fatal(err)
	}
	if got := records(); !slices.Equal(got, want) {
		t.Fatalf("after the binding controller's pass: records %v, want %v", got, want)
	}
}
