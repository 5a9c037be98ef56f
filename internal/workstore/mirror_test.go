package workstore

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// A replica's mirror keeps what its executor wrote across the leader's spec changes; its
// reports carry status and finalizers back; a deletion at the leader runs the finalizer in
// the mirror and then lets the leader's Work go.
func TestMirrorAndReportCarryAWorkBetweenLeaderAndReplica(t *testing.T) {
	ctx := context.Background()
	leader, leaderClient, _ := newClient(t)
	mirror, mirrorClient, _ := newClient(t)
	w := mustCreate(t, leaderClient, work("flotilla-es-east", "web", nil, "a"))
	if err := mirror.Mirror(w); err != nil {
		t.Fatal(err)
	}
	// The replica's executor adds its finalizer and writes status.
	m := mustGet(t, mirrorClient, "flotilla-es-east", "web")
	controllerutil.AddFinalizer(m, finalizer)
	if err := mirrorClient.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	m = mustGet(t, mirrorClient, "flotilla-es-east", "web")
	m.Status.Conditions = []metav1.Condition{{Type: "Applied", Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: metav1.Now()}}
	if err := mirrorClient.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The leader changes the spec: the mirror takes it and keeps its own status and finalizer.
	l := mustGet(t, leaderClient, "flotilla-es-east", "web")
	l.Spec = work("", "", nil, "b").Spec
	if err := leaderClient.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := mirror.Mirror(l); err != nil {
		t.Fatal(err)
	}
	m = mustGet(t, mirrorClient, "flotilla-es-east", "web")
	if m.Generation != 2 || len(m.Status.Conditions) != 1 || !controllerutil.ContainsFinalizer(m, finalizer) {
		t.Fatalf("mirror after a spec change: generation %d, status %v, finalizers %v; want 2, its Applied condition, its finalizer", m.Generation, m.Status.Conditions, m.Finalizers)
	}
	// The report gives the leader the status and the finalizer.
	if err := leader.Apply(ReportOf(m)); err != nil {
		t.Fatal(err)
	}
	l = mustGet(t, leaderClient, "flotilla-es-east", "web")
	if len(l.Status.Conditions) != 1 || !controllerutil.ContainsFinalizer(l, finalizer) {
		t.Fatalf("leader after the report: status %v, finalizers %v", l.Status.Conditions, l.Finalizers)
	}
	// A report of another UID (a Work rendered again) is refused as out of date.
	stale := ReportOf(m)
	stale.UID = types.UID("other")
	if err := leader.Apply(stale); err == nil {
		t.Fatal("a report of another UID was taken")
	}
	// The leader deletes: its Work waits for the finalizer; the mirror marks its copy deleting.
	if err := leaderClient.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	l = mustGet(t, leaderClient, "flotilla-es-east", "web")
	if err := mirror.Mirror(l); err != nil {
		t.Fatal(err)
	}
	m = mustGet(t, mirrorClient, "flotilla-es-east", "web")
	if m.DeletionTimestamp == nil {
		t.Fatal("the mirror's copy is not deleting after the leader's deletion")
	}
	// The executor removes its finalizer: the mirror drops the Work, and its report lets the
	// leader's go.
	gone := ReportOf(m)
	controllerutil.RemoveFinalizer(m, finalizer)
	if err := mirrorClient.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := mirrorClient.Get(ctx, client.ObjectKeyFromObject(m), m); err == nil {
		t.Fatal("the mirror still holds a finalized Work")
	}
	gone.Finalizers = nil
	if err := leader.Apply(gone); err != nil {
		t.Fatal(err)
	}
	if leader.Len() != 0 {
		t.Fatal("the leader still holds the Work after the replica finalized it")
	}
}

// Forget drops Works without running finalizers, and followers are told Forgotten.
func TestForgetDropsWorksWithoutFinalizing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, c, _ := newClient(t)
	w := work("flotilla-es-east", "web", nil, "a")
	w.Finalizers = []string{finalizer}
	mustCreate(t, c, w)
	mustCreate(t, c, work("flotilla-es-west", "web", nil, "a"))
	events := make(chan Event, 10)
	go func() {
		_ = s.Follow(ctx, func(*workv1alpha1.Work) bool { return true }, func(e Event) error { events <- e; return nil })
	}()
	for e := range events {
		if e.Type == Synced {
			if e.Source == "" {
				t.Error("Synced names no source")
			}
			break
		}
	}
	if n := s.Forget(func(w *workv1alpha1.Work) bool { return w.Namespace != "flotilla-es-east" }); n != 1 {
		t.Fatalf("forgot %d Works, want 1", n)
	}
	if e := <-events; e.Type != Forgotten || e.Work.Namespace != "flotilla-es-east" {
		t.Fatalf("followers saw %s %v, want Forgotten of east's Work", e.Type, e.Work)
	}
	if s.Len() != 1 {
		t.Fatalf("%d Works left, want 1", s.Len())
	}
}

// A leader that mirrors its own store holds each Work's manifests and status once: the mirror
// shares the stored spec, and a report of the mirror's status is kept as given.
func TestALeaderMirroringItsOwnStoreHoldsEachWorkOnce(t *testing.T) {
	ctx := context.Background()
	leader, leaderClient, _ := newClient(t)
	mirror, mirrorClient, _ := newClient(t)
	mustCreate(t, leaderClient, work("flotilla-es-east", "web", nil, "a"))
	stored := leader.Snapshot()[0]
	if err := mirror.Mirror(stored); err != nil {
		t.Fatal(err)
	}
	mirrored := mirror.Snapshot()[0]
	if &mirrored.Spec.Manifests[0].Raw[0] != &stored.Spec.Manifests[0].Raw[0] {
		t.Fatal("the mirror copied the leader's manifests")
	}
	m := mustGet(t, mirrorClient, "flotilla-es-east", "web")
	m.Status.Conditions = []metav1.Condition{{Type: "Applied", Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: metav1.Now()}}
	if err := mirrorClient.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := leader.Apply(ReportOf(mirror.Snapshot()[0])); err != nil {
		t.Fatal(err)
	}
	if &leader.Snapshot()[0].Status.Conditions[0] != &mirror.Snapshot()[0].Status.Conditions[0] {
		t.Fatal("the leader copied the status its own mirror reported")
	}
	if got := mustGet(t, leaderClient, "flotilla-es-east", "web"); len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "Applied" {
		t.Fatalf("the leader's Work after the report: %+v", got.Status)
	}
}
