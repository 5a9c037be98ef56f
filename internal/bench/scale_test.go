package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A release over n clusters goes in waves of 1%, 10% and the rest, each rounded up and each
// at least one cluster, in name order.
func TestReleaseWaves(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want [3]int
	}{
		{3, [3]int{1, 1, 1}},
		{5, [3]int{1, 1, 3}},
		{20, [3]int{1, 2, 17}},
		{30, [3]int{1, 3, 26}},
		{100, [3]int{1, 10, 89}},
		{101, [3]int{2, 11, 88}},
		{250, [3]int{3, 25, 222}},
	} {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			members := make([]string, tt.n)
			for i := range members {
				members[i] = fmt.Sprintf("member-%03d", i+1)
			}
			w := releaseWaves(members)
			got := [3]int{len(w[0]), len(w[1]), len(w[2])}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("wave sizes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(members, append(append(append([]string{}, w[0]...), w[1]...), w[2]...)); diff != "" {
				t.Errorf("waves do not cover the members once each, in order (-want +got):\n%s", diff)
			}
		})
	}
}

// Options out of range are refused, naming the flag.
func TestScaleOptionsValidate(t *testing.T) {
	ok := ScaleOptions{Members: 5, Templates: 50, LatencySamples: 10, Lose: 2, FailoverReplicas: 2, Bake: time.Second, Idle: 10 * time.Second, Skip: []string{"ceiling", "failover"}, ManagerReplicas: 2}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for _, tt := range []struct {
		change func(*ScaleOptions)
		want   string
	}{
		{func(o *ScaleOptions) { o.Members = 2 }, "--members 2: give at least 3"},
		{func(o *ScaleOptions) { o.Templates = 0 }, "--templates 0"},
		{func(o *ScaleOptions) { o.LatencySamples = 0 }, "--latency-samples 0"},
		{func(o *ScaleOptions) { o.Lose = 5 }, "--lose 5: give at least 1 and fewer than --members (5)"},
		{func(o *ScaleOptions) { o.Lose = 0 }, "--lose 0"},
		{func(o *ScaleOptions) { o.FailoverReplicas = 0 }, "--failover-replicas 0"},
		{func(o *ScaleOptions) { o.Bake = -time.Second }, "--bake -1s"},
		{func(o *ScaleOptions) { o.Idle = time.Millisecond }, "--idle 1ms: give at least 1s"},
		{func(o *ScaleOptions) { o.Skip = []string{"release", "restart"} }, "--skip restart: give one of ceiling, release, failover"},
		{func(o *ScaleOptions) { o.ManagerReplicas = 0 }, "--manager-replicas 0: give 1 to 8"},
		{func(o *ScaleOptions) { o.ReleaseLose = 3 }, "--release-lose 3: give 0 to fewer than the last wave's 3 clusters"},
		{func(o *ScaleOptions) { o.ReleaseLose = -1 }, "--release-lose -1"},
		{func(o *ScaleOptions) { o.ManagerReplicas = 9 }, "--manager-replicas 9"},
	} {
		o := ok
		tt.change(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
		}
	}
}

func TestDefaultReleaseLose(t *testing.T) {
	for n, want := range map[int]int{3: 0, 5: 1, 20: 5, 100: 5} {
		if got := DefaultReleaseLose(n); got != want {
			t.Errorf("DefaultReleaseLose(%d) = %d, want %d", n, got, want)
		}
		o := ScaleOptions{Members: n, Templates: 1, LatencySamples: 1, Lose: DefaultLose(n), FailoverReplicas: 1, Idle: time.Second, ManagerReplicas: 1, ReleaseLose: DefaultReleaseLose(n)}
		if err := o.Validate(); err != nil {
			t.Errorf("the defaults of %d members: %v", n, err)
		}
	}
}

func TestDefaultLose(t *testing.T) {
	for n, want := range map[int]int{3: 1, 5: 2, 20: 10, 30: 10, 100: 10} {
		if got := DefaultLose(n); got != want {
			t.Errorf("DefaultLose(%d) = %d, want %d", n, got, want)
		}
	}
}
