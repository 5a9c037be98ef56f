package replicas

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func targets(weights ...int64) []Target {
	out := make([]Target, len(weights))
	for i, w := range weights {
		out[i] = Target{Name: fmt.Sprintf("c%d", i+1), Weight: w, Available: -1}
	}
	return out
}

func TestDivideByWeight(t *testing.T) {
	tests := []struct {
		name      string
		total     int32
		targets   []Target
		current   Assignment
		want      Assignment
		wantMoves int32
	}{
		{name: "10 over 1:1", total: 10, targets: targets(1, 1), want: Assignment{"c1": 5, "c2": 5}, wantMoves: 10},
		{name: "scale 10 to 12 adds one each", total: 12, targets: targets(1, 1), current: Assignment{"c1": 5, "c2": 5}, want: Assignment{"c1": 6, "c2": 6}, wantMoves: 2},
		{name: "scale 10 to 11 keeps the larger holder", total: 11, targets: targets(1, 1), current: Assignment{"c1": 5, "c2": 6}, want: Assignment{"c1": 5, "c2": 6}, wantMoves: 0},
		{name: "scale down 12 to 10", total: 10, targets: targets(1, 1), current: Assignment{"c1": 6, "c2": 6}, want: Assignment{"c1": 5, "c2": 5}, wantMoves: 2},
		{name: "a third cluster joins 5/5", total: 10, targets: targets(1, 1, 1), current: Assignment{"c1": 5, "c2": 5}, want: Assignment{"c1": 4, "c2": 3, "c3": 3}, wantMoves: 3},
		{name: "weights 1:2:7 of 10", total: 10, targets: targets(1, 2, 7), want: Assignment{"c1": 1, "c2": 2, "c3": 7}, wantMoves: 10},
		{name: "zero weight gets nothing", total: 5, targets: targets(0, 1), want: Assignment{"c2": 5}, wantMoves: 5},
		{name: "fewer replicas than clusters", total: 2, targets: targets(1, 1, 1), current: Assignment{"c3": 1}, want: Assignment{"c1": 1, "c3": 1}, wantMoves: 1},
		{name: "zero replicas", total: 0, targets: targets(1, 1), current: Assignment{"c1": 3}, want: Assignment{}, wantMoves: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DivideByWeight(tt.total, tt.targets, tt.current)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("division (-want +got):\n%s", diff)
			}
			if m := Moves(tt.current, got); m != tt.wantMoves {
				t.Errorf("moves = %d, want %d", m, tt.wantMoves)
			}
		})
	}
}

func TestDivideByWeightRejectsBadWeights(t *testing.T) {
	for _, tc := range []struct {
		targets []Target
		want    string
	}{
		{targets(0, 0), "add up to zero"},
		{targets(1, -1), "weight -1 is negative"},
		{nil, "no cluster"},
	} {
		if _, err := DivideByWeight(3, tc.targets, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("targets %v: got %v, want error containing %q", tc.targets, err, tc.want)
		}
	}
}

// For random small cases the division keeps every share within one replica of exact and moves
// no more replicas than the best of all such divisions (found by brute force).
func TestDivideByWeightIsFairAndMovesFewest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		n := 1 + rng.IntN(4)
		ts := make([]Target, n)
		var sum int64
		for j := range ts {
			ts[j] = Target{Name: fmt.Sprintf("c%d", j), Weight: int64(rng.IntN(5))}
			sum += ts[j].Weight
		}
		if sum == 0 {
			ts[0].Weight = 1
			sum = 1
		}
		total := int32(rng.IntN(13))
		current := Assignment{}
		for j := range ts {
			if c := int32(rng.IntN(6)); c > 0 {
				current[ts[j].Name] = c
			}
		}
		got, err := DivideByWeight(total, ts, current)
		if err != nil {
			t.Fatal(err)
		}
		var placed int32
		for j, tg := range ts {
			exactNum := int64(total) * tg.Weight
			lo, hi := exactNum/sum, (exactNum+sum-1)/sum
			if g := int64(got[tg.Name]); g < lo || g > hi {
				t.Fatalf("case %d: %s got %d, want between %d and %d (weights %v total %d)", i, tg.Name, g, lo, hi, ts, total)
			}
			placed += got[ts[j].Name]
		}
		if placed != total {
			t.Fatalf("case %d: placed %d of %d", i, placed, total)
		}
		if best := bestMoves(total, ts, sum, current); Moves(current, got) != best {
			t.Fatalf("case %d: %v -> %v moves %d, best possible %d", i, current, got, Moves(current, got), best)
		}
	}
}

func bestMoves(total int32, ts []Target, sum int64, current Assignment) int32 {
	best := int32(1 << 30)
	var walk func(i int, acc Assignment, placed int32)
	walk = func(i int, acc Assignment, placed int32) {
		if i == len(ts) {
			if placed == total {
				best = min(best, Moves(current, acc))
			}
			return
		}
		exactNum := int64(total) * ts[i].Weight
		for n := exactNum / sum; n <= (exactNum+sum-1)/sum; n++ {
			next := Assignment{}
			for k, v := range acc {
				next[k] = v
			}
			setCount(next, ts[i].Name, int32(n))
			walk(i+1, next, placed+int32(n))
		}
	}
	walk(0, Assignment{}, 0)
	return best
}

func TestDivideByCapacity(t *testing.T) {
	ts := []Target{{Name: "big", Available: 30}, {Name: "small", Available: 10}}
	got, err := DivideByCapacity(8, ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Assignment{"big": 6, "small": 2}, got); diff != "" {
		t.Errorf("capacity division (-want +got):\n%s", diff)
	}
	// Rounding never pushes a cluster past what fits.
	ts = []Target{{Name: "a", Available: 1}, {Name: "b", Available: 1}, {Name: "c", Available: 10}}
	got, err = DivideByCapacity(12, ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Assignment{"a": 1, "b": 1, "c": 10}, got); diff != "" {
		t.Errorf("capped division (-want +got):\n%s", diff)
	}
	if _, err := DivideByCapacity(50, ts, nil); err == nil || !strings.Contains(err.Error(), "not enough capacity: 50 replicas requested, 12 fit") {
		t.Errorf("over capacity: got %v", err)
	}
}

func TestAggregate(t *testing.T) {
	ts := []Target{{Name: "a", Available: 4}, {Name: "b", Available: 8}, {Name: "c", Available: 3}}
	got, err := Aggregate(10, ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Assignment{"b": 8, "a": 2}, got); diff != "" {
		t.Errorf("fewest clusters (-want +got):\n%s", diff)
	}
	// Clusters already holding replicas keep them while they fit.
	got, err = Aggregate(3, ts, Assignment{"c": 3})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Assignment{"c": 3}, got); diff != "" {
		t.Errorf("stable aggregation (-want +got):\n%s", diff)
	}
	if _, err := Aggregate(20, ts, nil); err == nil || !strings.Contains(err.Error(), "15 fit") {
		t.Errorf("over capacity: got %v", err)
	}
}

func TestAvailableReplicas(t *testing.T) {
	q := resource.MustParse
	alloc := corev1.ResourceList{corev1.ResourceCPU: q("16"), corev1.ResourceMemory: q("64Gi"), corev1.ResourcePods: q("220")}
	requested := corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("8Gi"), corev1.ResourcePods: q("10")}
	tests := []struct {
		name   string
		perPod corev1.ResourceList
		want   int64
	}{
		{"cpu bound", corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("1Gi")}, 24},
		{"memory bound", corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("4Gi")}, 14},
		{"no requests: pod count bound", corev1.ResourceList{}, 210},
		{"does not fit", corev1.ResourceList{corev1.ResourceCPU: q("32")}, 0},
	}
	for _, tt := range tests {
		if got := AvailableReplicas(alloc, requested, tt.perPod); got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, got, tt.want)
		}
	}
}
