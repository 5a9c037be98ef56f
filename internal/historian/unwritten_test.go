package historian

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/binding"
)

// A workload on its way has its binding status written only every few seconds. A cluster that
// ran it and left again (lost, failed over) between two writes is still history: the
// historian reads the status the binding controller worked out, written or not.
func TestHistoryOfAStatusNotWrittenYet(t *testing.T) {
	tmpl := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment", UID: "u4", Generation: 1},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
			PolicyRef: workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "web"}}}
	_, store, h, req := historianOf(tmpl, b)
	h.Statuses = &binding.Statuses{}
	ctx := context.Background()
	pass := func(clusters ...workv1alpha1.ClusterStatus) []string {
		t.Helper()
		h.Statuses.Put(b, &workv1alpha1.ResourceBindingStatus{ObservedGeneration: 1, Clusters: clusters})
		if _, err := h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range store.recs {
			out = append(out, r.Cluster+" "+r.Outcome)
		}
		slices.Sort(out)
		return out
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
