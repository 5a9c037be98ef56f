package cli

import (
	"strings"
	"testing"
)

// The failover bench refuses sizes it cannot run, naming the flag and the limit.
func TestFailoverBenchSizeIsChecked(t *testing.T) {
	for _, tt := range []struct {
		workloads, replicas int
		want                string
	}{
		{0, 9, "--workloads 0: give at least 1"},
		{1, 2, "--replicas 2: give at least 3"},
		{100, 9, "--workloads 100 x --replicas 9 = 900 pods: the two members left after a stop hold at most 400"},
	} {
		if err := failoverSize(tt.workloads, tt.replicas); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("failoverSize(%d, %d) = %v, want %q", tt.workloads, tt.replicas, err, tt.want)
		}
	}
	if err := failoverSize(100, 3); err != nil {
		t.Errorf("100 x 3 fits: %v", err)
	}
}

// A flag the controller-manager does not take is refused before any fleet starts, naming it.
func TestBenchManagerArgIsChecked(t *testing.T) {
	_, err := runCLI("bench", "propagate", "--manager-arg=--no-such-flag")
	if err == nil || !strings.Contains(err.Error(), "--manager-arg") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("err = %v, want a --manager-arg error naming the flag", err)
	}
}

func TestBenchManagerArgTakesManagerFlags(t *testing.T) {
	if err := newControllerManagerCommand(&globals{}).ParseFlags([]string{"--pprof-bind-address=127.0.0.1:6060", "--metrics-bind-address=127.0.0.1:6062"}); err != nil {
		t.Fatalf("the controller-manager's own flags were refused: %v", err)
	}
}

// The scale bench refuses options out of range before any fleet starts, naming the flag.
func TestBenchScaleOptionsAreChecked(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--members", "5", "--lose", "5"}, "--lose 5: give at least 1 and fewer than --members (5)"},
		{[]string{"--members", "2"}, "--members 2"},
		{[]string{"--profile", "tiny"}, "--profile"},
		{[]string{"--grace-period", "0s"}, "--grace-period 0s"},
		{[]string{"--manager-arg=--no-such-flag"}, "no-such-flag"},
	} {
		_, err := runCLI(append([]string{"bench", "scale"}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("bench scale %v: err = %v, want it to contain %q", tt.args, err, tt.want)
		}
	}
}
