package manager

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// A grace period that is not positive is refused before anything starts, naming the flag.
func TestRunRejectsNonPositiveFailoverGrace(t *testing.T) {
	o := DefaultOptions()
	o.FailoverGracePeriod = 0
	err := Run(context.Background(), &rest.Config{}, o)
	if err == nil || !strings.Contains(err.Error(), "--failover-grace-period") {
		t.Fatalf("error = %v, want it to name --failover-grace-period", err)
	}
}

// A git bound that is not positive is refused before anything starts, naming the flag.
func TestRunRejectsNonPositiveGitBounds(t *testing.T) {
	o := DefaultOptions()
	o.Git.MaxFileMiB = 0
	err := Run(context.Background(), &rest.Config{}, o)
	if err == nil || !strings.Contains(err.Error(), "--git-max-file-mib") {
		t.Fatalf("error = %v, want it to name --git-max-file-mib", err)
	}
}
