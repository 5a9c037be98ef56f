package shard

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

func TestOwnerSpreadsClustersAndMovesOnlyWhatItMust(t *testing.T) {
	var clusters []string
	for i := range 1000 {
		clusters = append(clusters, fmt.Sprintf("store-%04d", i))
	}
	three := []string{"r1", "r2", "r3"}
	count := map[string]int{}
	before := map[string]string{}
	for _, c := range clusters {
		o := Owner(c, three)
		count[o]++
		before[c] = o
	}
	for _, r := range three {
		if count[r] < 250 || count[r] > 420 {
			t.Errorf("replica %s owns %d of 1000 clusters; want about a third: %v", r, count[r], count)
		}
	}
	// r2 leaves: only its clusters move, spread over the others.
	moved := 0
	for _, c := range clusters {
		o := Owner(c, []string{"r1", "r3"})
		if before[c] != "r2" && o != before[c] {
			t.Fatalf("cluster %s moved from %s to %s though its replica stayed", c, before[c], o)
		}
		if before[c] == "r2" {
			moved++
		}
	}
	if moved != count["r2"] {
		t.Fatalf("moved %d, want %d", moved, count["r2"])
	}
	if Owner("x", nil) != "" {
		t.Fatal("no live replica owns nothing")
	}
}

func TestTheE2EFleetSplitsBetweenTwoReplicas(t *testing.T) {
	// test/e2e's sharding test relies on its four members splitting between its two replicas.
	n := map[string]int{}
	for i := 1; i <= 4; i++ {
		n[Owner(fmt.Sprintf("member-%02d", i), []string{"manager-1", "manager-2"})]++
	}
	t.Logf("split: %v", n)
	if n["manager-1"] == 0 || n["manager-2"] == 0 {
		t.Fatalf("members member-01..04 all go to one replica: %v", n)
	}
}

func newRing(c client.Client, id string) *Ring {
	return &Ring{Client: c, Clusters: c, Namespace: "flotilla-system", LeaderLease: "flotilla-controller-manager", Identity: id,
		Address: id + ":8443", LeaseDuration: 15 * time.Second, RenewPeriod: 2 * time.Second}
}

// Two replicas stepping in turn hand clusters over without ever both holding one: the one
// giving a cluster away stops at once and lists it one step longer; the one taking it waits
// until no live Lease lists it. A replica whose Lease expired loses its clusters to the other.
func TestReplicasHandClustersOverWithoutOverlap(t *testing.T) {
	ctx := context.Background()
	var objs []client.Object
	var names []string
	for i := range 8 {
		name := fmt.Sprintf("c%d", i)
		names = append(names, name)
		objs = append(objs, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(objs...).Build()
	r1, r2 := newRing(c, "r1"), newRing(c, "r2")
	noOverlap := func(step string) {
		t.Helper()
		for _, cl := range names {
			if r1.Owns(cl) && r2.Owns(cl) {
				t.Fatalf("after %s both replicas hold %s", step, cl)
			}
		}
	}
	if err := r1.step(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r1.Held(); len(got) != len(names) {
		t.Fatalf("alone, r1 holds %v, want every cluster", got)
	}
	for i := range 4 {
		for _, r := range []*Ring{r2, r1} {
			if err := r.step(ctx); err != nil {
				t.Fatal(err)
			}
			noOverlap(fmt.Sprintf("round %d, %s", i, r.Identity))
		}
	}
	for _, cl := range names {
		want := Owner(cl, []string{"r1", "r2"})
		if (want == "r1") != r1.Owns(cl) || (want == "r2") != r2.Owns(cl) {
			t.Fatalf("%s: r1 holds %v, r2 holds %v; its owner is %s", cl, r1.Held(), r2.Held(), want)
		}
	}
	if len(r1.Held()) == 0 || len(r2.Held()) == 0 {
		t.Fatalf("the split gives one replica nothing: %v / %v", r1.Held(), r2.Held())
	}
	// r2 stops renewing: once its Lease has expired, r1 takes its clusters.
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "flotilla-system", Name: LeaseName("r2")}, lease); err != nil {
		t.Fatal(err)
	}
	old := metav1.NewMicroTime(time.Now().Add(-time.Minute))
	lease.Spec.RenewTime = &old
	if err := c.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if err := r1.step(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r1.Held(); len(got) != len(names) {
		t.Fatalf("after r2's Lease expired r1 holds %v, want every cluster", got)
	}
}
