package manager

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"
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

// Agent settings outside what works are refused at start, naming the flag, instead of
// silently taking a default.
func TestFlagsRefuseAgentSettingsThatCannotWork(t *testing.T) {
	for _, tc := range []struct{ arg, flag string }{
		{"--agent-silence-limit=0s", "--agent-silence-limit"},
		{"--agent-silence-limit=-5s", "--agent-silence-limit"},
		{"--agent-silence-limit=500ms", "--agent-silence-limit"},
		{"--agent-certificate-ttl=0s", "--agent-certificate-ttl"},
		{"--agent-certificate-ttl=1m", "--agent-certificate-ttl"},
		{"--agent-certificate-ttl=8760h", "--agent-certificate-ttl"},
	} {
		f := NewFlags()
		fs := pflag.NewFlagSet("flotilla-controller-manager", pflag.ContinueOnError)
		f.Bind(fs)
		if err := fs.Parse([]string{tc.arg}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Options(fs); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s: error = %v, want it to name %s", tc.arg, err, tc.flag)
		}
	}
	f := NewFlags()
	fs := pflag.NewFlagSet("flotilla-controller-manager", pflag.ContinueOnError)
	f.Bind(fs)
	if err := fs.Parse([]string{"--agent-silence-limit=20s", "--agent-certificate-ttl=1h"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Options(fs); err != nil {
		t.Errorf("sound agent settings refused: %v", err)
	}
}
