package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/interpret/*.golden from the current output")

// TestInterpretCommandGolden runs `flotilla interpret` for every operation on a customization
// that scripts all seven, and compares what it prints with testdata/interpret/OP.golden.
func TestInterpretCommandGolden(t *testing.T) {
	dir := filepath.Join("testdata", "interpret")
	file := func(name string) string { return filepath.Join(dir, name) }
	for _, tc := range []struct {
		op   string
		args []string
	}{
		{"InterpretReplica", []string{"--desired", file("desired.yaml")}},
		{"ReviseReplica", []string{"--desired", file("desired.yaml"), "--replicas", "4"}},
		{"InterpretStatus", []string{"--observed", file("observed.yaml")}},
		{"AggregateStatus", []string{"--desired", file("desired.yaml"), "--status-items", file("status-items.yaml")}},
		{"InterpretHealth", []string{"--observed", file("observed.yaml")}},
		{"Retain", []string{"--desired", file("desired.yaml"), "--observed", file("observed.yaml")}},
		{"InterpretDependency", []string{"--desired", file("desired.yaml")}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			out, err := runCLI(append([]string{"interpret", "-f", file("widget-customization.yaml"), "--operation", tc.op}, tc.args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			golden := file(tc.op + ".golden")
			if *updateGolden {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update, then review the file)", err)
			}
			if diff := cmp.Diff(string(want), out); diff != "" {
				t.Errorf("output differs (-want +got):\n%s", diff)
			}
		})
	}
}

// Bad input names the flag or field and the fix, and nothing runs.
func TestInterpretCommandErrors(t *testing.T) {
	dir := filepath.Join("testdata", "interpret")
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"unknown operation": {[]string{"-f", filepath.Join(dir, "widget-customization.yaml"), "--operation", "Scale", "--desired", filepath.Join(dir, "desired.yaml")}, "unknown operation \"Scale\""},
		"missing input":     {[]string{"-f", filepath.Join(dir, "widget-customization.yaml"), "--operation", "InterpretHealth"}, "needs the observed object (--observed)"},
		"wrong kind":        {[]string{"-f", "kruise-cloneset", "--operation", "InterpretReplica", "--desired", filepath.Join(dir, "desired.yaml")}, "targets apps.kruise.io/v1alpha1 CloneSet"},
		"no such file":      {[]string{"-f", "nope.yaml", "--operation", "Retain"}, "nor is it a bundled customization's name"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := runCLI(append([]string{"interpret"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q\n%s", err, tc.want, out)
			}
		})
	}
}

func runCLI(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := NewRootCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String() + errOut.String(), err
}

func TestInterpretRejectsNegativeReplicas(t *testing.T) {
	dir := filepath.Join("testdata", "interpret")
	_, err := runCLI("interpret", "-f", filepath.Join(dir, "widget-customization.yaml"), "--operation", "ReviseReplica",
		"--desired", filepath.Join(dir, "desired.yaml"), "--replicas", "-2")
	if err == nil || !strings.Contains(err.Error(), "--replicas -2") {
		t.Fatalf("error = %v, want it to name --replicas", err)
	}
}
