package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Steps are counted into one line per period, a failure shows at once, and lines that are not
// steps (a fleet stopping) print nothing.
func TestFleetProgressCondensesSteps(t *testing.T) {
	var out bytes.Buffer
	p := newFleetProgress(&out, "fleet", 2, time.Hour)
	for range 3 {
		_, _ = p.Write([]byte("  ✓ member-01-apiserver               ready in 1.0s\n"))
	}
	_, _ = p.Write([]byte("  member-01-kwok                       started\n  ✗ member-02-apiserver    "))
	_, _ = p.Write([]byte("           failed after 9.0s\n"))
	if got := out.String(); got != "  ✗ member-02-apiserver               failed after 9.0s\n" {
		t.Fatalf("before the period only the failure shows; got %q", got)
	}
	p.printed = time.Now().Add(-2 * time.Hour)
	_, _ = p.Write([]byte("  ✓ cluster/member-01                  Ready after 3.0s\n"))
	if !strings.Contains(out.String(), "fleet: 1 of 2 members joined, 5 steps done after") {
		t.Fatalf("after the period a count: %q", out.String())
	}
	out.Reset()
	p.printed = time.Now().Add(-2 * time.Hour)
	_, _ = p.Write([]byte("  member-01-apiserver                  stopped\n"))
	if out.Len() != 0 {
		t.Fatalf("a stop printed %q", out.String())
	}
}

// Once finished, a step of a member restarted later in the bench prints nothing.
func TestFleetProgressIsQuietOnceFinished(t *testing.T) {
	var out bytes.Buffer
	p := newFleetProgress(&out, "fleet", 2, time.Hour)
	p.printed = time.Now().Add(-2 * time.Hour)
	p.Finish()
	_, _ = p.Write([]byte("  ✓ member-01-apiserver               ready in 1.0s\n  ✗ member-02-apiserver               failed after 9.0s\n"))
	if out.Len() != 0 {
		t.Fatalf("a finished progress printed %q", out.String())
	}
}
