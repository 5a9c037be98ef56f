package shard

import (
	"fmt"
	"testing"
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
