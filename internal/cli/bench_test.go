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
