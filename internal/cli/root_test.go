package cli

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String() + errOut.String(), err
}

// The global help names the --bin-dir value DIR (backticks in the usage text become the
// placeholder), not a piece of the sentence.
func TestHelpNamesBinDirPlaceholder(t *testing.T) {
	out, err := run(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "--bin-dir DIR") {
		t.Fatalf("help does not show --bin-dir DIR:\n%s", out)
	}
}

// up refuses a non-positive --ready-timeout before it starts anything.
func TestUpRefusesNonPositiveReadyTimeout(t *testing.T) {
	_, err := run(t, "up", "--state-dir", t.TempDir(), "--ready-timeout=-1s")
	if err == nil || !strings.Contains(err.Error(), "--ready-timeout") {
		t.Fatalf("error = %v, want it to name --ready-timeout", err)
	}
}
