package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/flotilla-dev/flotilla/internal/localfleet"
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

// up refuses nonsense controller settings before it starts anything, naming the flag or the
// fleet file's field.
func TestUpRefusesBadManagerSettings(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--failover-grace-period=0s"}, "--failover-grace-period"},
		{[]string{"--log-level=loud"}, "--log-level"},
	} {
		_, err := run(t, append([]string{"up", "--state-dir", t.TempDir()}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error = %v, want it to name %s", tt.args, err, tt.want)
		}
	}
	file := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmembers: [{name: a}]\nmanager: {failoverGracePeriod: soon, logLevel: loud}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, "up", "--state-dir", t.TempDir(), "--fleet", file)
	if err == nil || !strings.Contains(err.Error(), "manager.failoverGracePeriod") || !strings.Contains(err.Error(), "manager.logLevel") {
		t.Errorf("fleet file: error = %v, want it to name manager.failoverGracePeriod and manager.logLevel", err)
	}
}

// A fleet file's manager section sets what no flag sets; explicit flags win.
func TestUpTakesManagerSettingsFromTheFleetFile(t *testing.T) {
	var u upManagerFlags
	cmd := &cobra.Command{}
	u.add(cmd)
	if err := cmd.Flags().Parse([]string{"--probe-period=3s"}); err != nil {
		t.Fatal(err)
	}
	u.fromFleet(cmd, &localfleet.ManagerSettings{ProbePeriod: "9s", FailoverGracePeriod: "20s", LogLevel: "debug", FailureThreshold: 5})
	got := strings.Join(u.args(), " ")
	for _, want := range []string{"--probe-period=3s", "--failure-threshold=5", "--failover-grace-period=20s", "--zap-log-level=debug"} {
		if !strings.Contains(got, want) {
			t.Errorf("manager args %q lack %s", got, want)
		}
	}
}

func TestDashboardRefusesCleartextBeyondLoopback(t *testing.T) {
	var out bytes.Buffer
	cmd := NewRootCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out})
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd.SetArgs([]string{"dashboard", "--address", "0.0.0.0:8090", "--kubeconfig", kubeconfig, "--inventory-url", "https://127.0.0.1:2", "--state-dir", dir})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--tls-cert-file") {
		t.Fatalf("serving tokens in clear beyond this machine must be refused, got %v", err)
	}
}

// A subcommand a group does not have is a usage error (exit 2), as in kubectl, not its help
// with exit 0; the group alone still prints its help.
func TestUnknownSubcommandFails(t *testing.T) {
	for _, args := range [][]string{{"export", "bogus"}, {"release", "bogus", "-n", "shop"}, {"team", "nosuch-verb", "--kubeconfig", "x"}} {
		_, err := run(t, args...)
		if err == nil || !strings.Contains(err.Error(), "unknown command \""+args[1]+"\"") {
			t.Errorf("%v: error = %v, want unknown command", args, err)
		}
		if code := exitCode(err); code != ExitUsage {
			t.Errorf("%v: exit code %d, want %d", args, code, ExitUsage)
		}
	}
	out, err := run(t, "export")
	if err != nil || !strings.Contains(out, "argocd") {
		t.Errorf("export alone: %v, want its help listing argocd:\n%s", err, out)
	}
}

// history -n takes a team's namespace: anything that cannot be one is refused before any
// request, naming the flag.
func TestHistoryRefusesANamespaceThatCannotBeOne(t *testing.T) {
	_, err := run(t, "history", "-n", "Bad NS!", "--kubeconfig", filepath.Join(t.TempDir(), "none"))
	if err == nil || !strings.Contains(err.Error(), `-n "Bad NS!"`) {
		t.Fatalf("error = %v, want it to name -n", err)
	}
}

// What the CLI prints comes partly from tenants (descriptions, member condition messages): no
// escape sequence or other control character of theirs reaches the terminal, on stdout or in
// an error; tabs and newlines stay.
func TestCLIPrintsNoControlCharactersFromTheControlPlane(t *testing.T) {
	var out bytes.Buffer
	w := &safeWriter{w: &out}
	hostile := "web\x1b]0;pwned\x07\x1b[2J\tready\x7f\x08\r\nnext\x00"
	if n, err := w.Write([]byte(hostile)); err != nil || n != len(hostile) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if got, want := out.String(), "web]0;pwned[2J\tready\r\nnext"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	// Every command prints through the filter.
	cmd := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	out.Reset()
	fmt.Fprint(cmd.OutOrStdout(), "\x1b[31mred")
	if strings.ContainsRune(out.String(), 0x1b) {
		t.Errorf("the root command's output passes ESC: %q", out.String())
	}
}

func exitCode(err error) int {
	var exit *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.Code
	}
	return ExitFailure
}

// Calling a command wrongly exits 2 wherever the mistake is (an unknown command or flag, the
// wrong number of arguments, a kind get does not know); a command that fails exits 1.
func TestUsageErrorsExit2(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none")
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"bogus"}, ExitUsage},
		{[]string{"get", "clusters", "--no-such-flag"}, ExitUsage},
		{[]string{"get"}, ExitUsage},
		{[]string{"get", "pods"}, ExitUsage},
		{[]string{"release", "get"}, ExitUsage},
		{[]string{"join", "east", "--kubeconfig", none}, ExitUsage},
		{[]string{"history", "-n", "Bad NS!", "--kubeconfig", none}, ExitFailure},
	} {
		_, err := run(t, tt.args...)
		if code := exitCode(err); code != tt.want {
			t.Errorf("%v: exit code %d (%v), want %d", tt.args, code, err, tt.want)
		}
	}
}

// -n defaults to the namespace of the kubeconfig's context, else default; commands that read
// across teams read every team when neither -n nor the context names one.
func TestNamespaceComesFromTheKubeconfigContext(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := func(ns string) string {
		path := filepath.Join(dir, "kubeconfig-"+ns)
		data := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\n" +
			"contexts: [{name: c, context: {cluster: c, user: u, namespace: '" + ns + "'}}, {name: other, context: {cluster: c, user: u, namespace: other}}]\ncurrent-context: c\n"
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tt := range []struct {
		name, contextNS, flagNS, context string
		want, wantGiven                  string
	}{
		{name: "the context's", contextNS: "shop", want: "shop", wantGiven: "shop"},
		{name: "none in the context", want: "default", wantGiven: ""},
		{name: "-n wins", contextNS: "shop", flagNS: "store", want: "store", wantGiven: "store"},
		{name: "--context's", contextNS: "shop", context: "other", want: "other", wantGiven: "other"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := &globals{kube: newConfigFlags(), stateDir: dir}
			*g.kube.KubeConfig = kubeconfig(tt.contextNS)
			*g.kube.Namespace = tt.flagNS
			*g.kube.Context = tt.context
			if got := g.namespace(); got != tt.want {
				t.Errorf("namespace() = %q, want %q", got, tt.want)
			}
			if got := g.namespaceGiven(); got != tt.wantGiven {
				t.Errorf("namespaceGiven() = %q, want %q", got, tt.wantGiven)
			}
		})
	}
}

// completion prints cobra's scripts; get completes its kinds without a control plane.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		out, err := run(t, "completion", shell)
		if err != nil || !strings.Contains(out, "flotilla") {
			t.Errorf("completion %s: %v\n%.200s", shell, err, out)
		}
	}
	out, err := run(t, "__complete", "get", "cl")
	if err != nil || !strings.Contains(out, "clusters\n") || !strings.Contains(out, "clusterbindings\n") || strings.Contains(out, "works") {
		t.Errorf("get cl<TAB>: %v\n%s", err, out)
	}
}

// A bootstrap token's life outside one minute to a week is refused before anything is
// written, naming the flag.
func TestJoinPullRefusesATokenLifeOutsideItsBounds(t *testing.T) {
	for _, ttl := range []string{"0s", "-1h", "30s", "720h"} {
		out, err := run(t, "join", "edge-1", "--mode", "Pull", "--bootstrap-token-ttl", ttl, "--kubeconfig", "/nonexistent")
		if err == nil || !strings.Contains(out+err.Error(), "--bootstrap-token-ttl") {
			t.Errorf("--bootstrap-token-ttl %s: error = %v, output %q; want a refusal naming the flag", ttl, err, out)
		}
	}
}
