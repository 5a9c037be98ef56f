package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The manager binary links only what runs in a cluster: none of the CLI, the local fleet, the
// bench, the demo or the browser driver the tests use.
func TestManagerBinaryLinksNoDeveloperCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"/internal/cli", "/internal/localfleet", "/internal/bench", "/internal/demo", "/internal/testenv", "github.com/chromedp/", "github.com/onsi/"} {
			if strings.Contains(dep, banned) {
				t.Errorf("flotilla-controller-manager links %s", dep)
			}
		}
	}
}

// Usage mistakes exit 2 and help exits 0, before anything connects.
func TestUsageExitCodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"-h"}, 0},
		{[]string{"--no-such-flag"}, 2},
		{[]string{"extra"}, 2},
		{[]string{"--lua-max-memory-mib=0"}, 2},
	} {
		if got := run(c.args); got != c.want {
			t.Errorf("%v: exit %d, want %d", c.args, got, c.want)
		}
	}
}
