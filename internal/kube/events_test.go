package kube

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Two findings of one kind on one object are two events, each with its own note (client-go's
// recorder would fold the second into the first's series, keeping the first note); the same
// finding again is not written twice.
func TestDistinctNotesAreEventsOfTheirOwn(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(Scheme).Build()
	r := NewDistinctRecorder(c, Scheme, "flotilla-test")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u1"}}
	r.Eventf(cm, nil, corev1.EventTypeNormal, "Applied", "Apply", "commit %s applied", "aaa")
	r.Eventf(cm, nil, corev1.EventTypeNormal, "Applied", "Apply", "commit %s applied", "bbb")
	r.Eventf(cm, nil, corev1.EventTypeNormal, "Applied", "Apply", "commit %s applied", "bbb")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = r.Start(ctx) }()
	defer cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		list := &eventsv1.EventList{}
		if err := c.List(context.Background(), list); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 2 {
			notes := map[string]bool{list.Items[0].Note: true, list.Items[1].Note: true}
			if !notes["commit aaa applied"] || !notes["commit bbb applied"] || list.Items[0].Regarding.Name != "web" {
				t.Fatalf("events %+v", list.Items)
			}
			return
		}
		if len(list.Items) > 2 || time.Now().After(deadline) {
			t.Fatalf("%d events, want one per distinct note (2)", len(list.Items))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
