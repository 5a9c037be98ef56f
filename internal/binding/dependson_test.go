package binding

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// Deleting follows the reverse order: the database's Work leaves a cluster only once no
// binding that depends on it (as its status.dependencies records) has a Work there; a cycle
// is not waited for, and nothing waits past deletionOrderLimit.
func TestADependencyLeavesAClusterAfterItsDependents(t *testing.T) {
	ctx := context.Background()
	db := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-deployment", UID: "db"}}
	api := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api-deployment", UID: "api"},
		Status: workv1alpha1.ResourceBindingStatus{Dependencies: []string{"shop/db-deployment"}}}
	apiWork := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: kube.ExecutionNamespacePrefix + "east", Name: WorkName(api),
		Labels: map[string]string{workv1alpha1.BindingNamespaceLabel: "shop", workv1alpha1.BindingNameLabel: "api-deployment", workv1alpha1.ClusterLabel: "east"}}}
	cl := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(db, api, apiWork).
		WithIndex(&workv1alpha1.ResourceBinding{}, dependenciesIndex, recordedDependencies).
		WithIndex(&workv1alpha1.ClusterResourceBinding{}, dependenciesIndex, recordedDependencies).Build()
	clock := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	c := &Controller{Client: cl, Clock: clock}

	mayDelete := func(b workv1alpha1.Binding, cluster string) bool {
		t.Helper()
		ok, err := c.mayDelete(ctx, b, cluster)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if mayDelete(db, "east") {
		t.Error("the database left east while the API still has a Work there")
	}
	if !mayDelete(db, "west") {
		t.Error("the database waits in west, where no dependent runs")
	}
	if !mayDelete(api, "east") {
		t.Error("the API, which nothing depends on, waits")
	}
	// Bounded: past the limit it goes even with the dependent still there.
	clock.SetTime(clock.Now().Add(deletionOrderLimit + time.Second))
	if !mayDelete(db, "east") {
		t.Error("the database still waits past the deletion order limit")
	}
	// A cycle: the database depends on the API too; neither waits for the other.
	cyclic := db.DeepCopy()
	cyclic.Status.Dependencies = []string{"shop/api-deployment"}
	if !mayDelete(cyclic, "east") {
		t.Error("a dependency in a cycle waits for ever")
	}
	if err := cl.Delete(ctx, apiWork); err != nil {
		t.Fatal(err)
	}
	if !mayDelete(db, "east") {
		t.Error("the database waits although the API left east")
	}
}
