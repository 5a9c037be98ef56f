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
		o := Owner(c, three, "")
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
		o := Owner(c, []string{"r1", "r3"}, "")
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
	if Owner("x", nil, "") != "" {
		t.Fatal("no live replica owns nothing")
	}
}

// The leader works on a smaller share. When it stops leading only clusters moving to it move,
// and a replica that starts leading only gives clusters away.
func TestTheLeaderWorksOnASmallerShare(t *testing.T) {
	var clusters []string
	for i := range 1000 {
		clusters = append(clusters, fmt.Sprintf("store-%04d", i))
	}
	three := []string{"r1", "r2", "r3"}
	share := func(leader string) map[string]string {
		owners := map[string]string{}
		for _, c := range clusters {
			owners[c] = Owner(c, three, leader)
		}
		return owners
	}
	count := func(owners map[string]string) map[string]int {
		n := map[string]int{}
		for _, o := range owners {
			n[o]++
		}
		return n
	}
	led := share("r1")
	// Weights 0.5, 1, 1: the leader about a fifth, the others two fifths each.
	if n := count(led); n["r1"] < 140 || n["r1"] > 260 || n["r2"] < 330 || n["r3"] < 330 {
		t.Fatalf("with r1 leading: %v; want r1 about 200 and the others about 400", n)
	}
	none := share("")
	for _, c := range clusters {
		if led[c] != none[c] && none[c] != "r1" {
			t.Fatalf("%s moved from %s to %s when r1 stopped leading; only moves to r1 are due", c, led[c], none[c])
		}
	}
	byR2 := share("r2")
	for _, c := range clusters {
		if none[c] != byR2[c] && none[c] != "r2" {
			t.Fatalf("%s moved from %s to %s when r2 started leading; only r2 gives clusters away", c, none[c], byR2[c])
		}
	}
}

func TestTheE2EFleetSplitsBetweenTwoReplicas(t *testing.T) {
	// test/e2e's sharding test relies on its four members splitting between its two replicas.
	n := map[string]int{}
	for i := 1; i <= 4; i++ {
		n[Owner(fmt.Sprintf("member-%02d", i), []string{"manager-1", "manager-2"}, "manager-1")]++
	}
	t.Logf("split: %v", n)
	if n["manager-1"] == 0 || n["manager-2"] == 0 {
		t.Fatalf("members member-01..04 all go to one replica: %v", n)
	}
}

// eightClusters is a client holding Clusters c0 to c7, and their names.
func eightClusters() (client.Client, []string) {
	var objs []client.Object
	var names []string
	for i := range 8 {
		name := fmt.Sprintf("c%d", i)
		names = append(names, name)
		objs = append(objs, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	return fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(objs...).Build(), names
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
	c, names := eightClusters()
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
		want := Owner(cl, []string{"r1", "r2"}, "")
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

// Replicas read the leader from the leader election Lease and give it the smaller share.
func TestReplicasGiveTheLeaderItsSmallerShare(t *testing.T) {
	ctx := context.Background()
	c, names := eightClusters()
	holder, seconds, renewed := "r1", int32(15), metav1.NewMicroTime(time.Now())
	if err := c.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-system", Name: "flotilla-controller-manager"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &renewed}}); err != nil {
		t.Fatal(err)
	}
	r1, r2 := newRing(c, "r1"), newRing(c, "r2")
	for range 3 {
		for _, r := range []*Ring{r1, r2} {
			if err := r.step(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if id, _, _ := r2.Leader(); id != "r1" {
		t.Fatalf("r2 sees leader %q, want r1", id)
	}
	unweighted := 0
	for _, cl := range names {
		want := Owner(cl, []string{"r1", "r2"}, "r1")
		if r1.Owns(cl) != (want == "r1") || r2.Owns(cl) != (want == "r2") {
			t.Fatalf("%s belongs to %s; r1 holds %v, r2 holds %v", cl, want, r1.Held(), r2.Held())
		}
		if Owner(cl, []string{"r1", "r2"}, "") == "r1" {
			unweighted++
		}
	}
	if len(r1.Held()) >= unweighted {
		t.Fatalf("the leader holds %d clusters, %d unweighted: its share did not shrink", len(r1.Held()), unweighted)
	}
}

// Replicas started together take nothing while they join and then split the clusters at
// their first claim; a replica started later leaves its share with the running one until its
// join ends, and gets it without overlap after.
func TestJoiningReplicasSplitFromTheirFirstClaim(t *testing.T) {
	ctx := context.Background()
	c, names := eightClusters()
	joined := func(r *Ring) { r.joiningUntil = time.Now().Add(-time.Millisecond) }
	step := func(rs ...*Ring) {
		t.Helper()
		for _, r := range rs {
			if err := r.step(ctx); err != nil {
				t.Fatal(err)
			}
			for _, cl := range names {
				if rs[0] != r && rs[0].Owns(cl) && r.Owns(cl) {
					t.Fatalf("both %s and %s hold %s", rs[0].Identity, r.Identity, cl)
				}
			}
		}
	}
	r1, r2 := newRing(c, "r1"), newRing(c, "r2")
	r1.JoinWait, r2.JoinWait = time.Minute, time.Minute
	step(r1, r2)
	if len(r1.Held())+len(r2.Held()) != 0 {
		t.Fatalf("joining replicas hold clusters: %v / %v", r1.Held(), r2.Held())
	}
	if reps := r2.Replicas(); len(reps) != 2 || !reps[0].joining(time.Now()) {
		t.Fatalf("r2 does not see r1 joining: %+v", reps)
	}
	joined(r1)
	step(r1)
	for _, cl := range names {
		if want := Owner(cl, []string{"r1", "r2"}, "") == "r1"; r1.Owns(cl) != want {
			t.Fatalf("r1's first claim holds %v: it took r2's share or left its own (%s)", r1.Held(), cl)
		}
	}

	// r3 starts while r1 and r2 run: they keep its share until its join ends.
	joined(r2)
	step(r2, r1)
	r3 := newRing(c, "r3")
	r3.JoinWait = time.Minute
	step(r3, r1, r2)
	if len(r1.Held())+len(r2.Held()) != len(names) || len(r3.Held()) != 0 {
		t.Fatalf("while r3 joins: r1 %v, r2 %v, r3 %v; want r1 and r2 to keep every cluster", r1.Held(), r2.Held(), r3.Held())
	}
	joined(r3)
	for range 3 {
		step(r3, r1, r2)
		for _, a := range []*Ring{r1, r2} {
			for _, cl := range names {
				if a.Owns(cl) && r3.Owns(cl) {
					t.Fatalf("%s and r3 both hold %s", a.Identity, cl)
				}
			}
		}
	}
	for _, cl := range names {
		want := Owner(cl, []string{"r1", "r2", "r3"}, "")
		for _, r := range []*Ring{r1, r2, r3} {
			if r.Owns(cl) != (r.Identity == want) {
				t.Fatalf("%s: owner %s; r1 %v, r2 %v, r3 %v", cl, want, r1.Held(), r2.Held(), r3.Held())
			}
		}
	}
}
