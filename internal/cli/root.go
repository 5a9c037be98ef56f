// Package cli is the command line of the one flotilla binary: the local fleet (up, down,
// status, fleet, kubeconfig), cluster registration (join, unjoin), reading (get), the
// controller-manager, and the bench. It parses flags, calls the capability packages and
// prints; it holds no behaviour of its own that a controller or a test would need.
//
// The binary answers both as `flotilla` and as the kubectl plugin `kubectl-flotilla`; help and
// examples use the name it was invoked by.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// invokedName is "kubectl flotilla" when run as a kubectl plugin, else "flotilla".
func invokedName() string {
	if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") {
		return "kubectl flotilla"
	}
	return "flotilla"
}

// globals are the flags every command shares.
type globals struct {
	streams  genericiooptions.IOStreams
	kube     *genericclioptions.ConfigFlags
	stateDir string
	binDir   string
}

// NewRootCommand builds the command tree.
func NewRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	// Tenants write part of what is printed: no control character reaches the terminal.
	streams.Out, streams.ErrOut = &safeWriter{w: streams.Out}, &safeWriter{w: streams.ErrOut}
	g := &globals{streams: streams, kube: genericclioptions.NewConfigFlags(true)}
	name := invokedName()
	root := &cobra.Command{
		Use:           name,
		Short:         "Flotilla makes a fleet of Kubernetes clusters behave like one for delivery",
		SilenceUsage:  true,
		SilenceErrors: true,
		Example: strings.ReplaceAll(`  # Start a local fleet of three member clusters and join them
  NAME up
  # See the members
  NAME get clusters -o wide
  # Join an existing cluster
  NAME join east-1 --kubeconfig ~/.kube/east-1.yaml --label region=us-east`, "NAME", name),
	}
	// Commands other than controller-manager log nothing through controller-runtime; it sets its
	// own. controller-runtime takes only the first logger set, so exactly one is set per process.
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		if cmd.Name() != "controller-manager" {
			ctrl.SetLogger(logr.Discard())
		}
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	pf := root.PersistentFlags()
	pf.StringVar(&g.stateDir, "state-dir", defaultStateDir(), "directory of the local fleet's state (data, kubeconfigs, pids, logs)")
	pf.StringVar(&g.binDir, "bin-dir", defaultBinDir(), "`DIR` holding the local-fleet tools that make tools builds")

	root.AddCommand(
		newUpCommand(g), newDownCommand(g), newStatusCommand(g), newFleetCommand(g), newKubeconfigCommand(g),
		withKubeFlags(g, newJoinCommand(g)), withKubeFlags(g, newUnjoinCommand(g)), withKubeFlags(g, newGetCommand(g)), withKubeFlags(g, newDescribeCommand(g)),
		withKubeFlags(g, newControllerManagerCommand(g)), newReleaseCommand(g), newTeamCommand(g), newAppCommand(g), newTargetCommand(g), newHistoryCommand(g), newDashboardCommand(g), newWhereCommand(g), newWhatIfCommand(g), newExportCommand(g), newInterpretCommand(g), newCustomizationsCommand(g),
	)
	root.AddCommand(newSyncCommands(g)...)
	root.AddCommand(newSuperviseCommand(g))
	root.AddCommand(
		newBenchCommand(g), newDemoCommand(g), newVersionCommand(g),
	)
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes a command group (export, release, team, ...) fail on a
// subcommand it does not have, as kubectl does: cobra would print its help and exit 0, so a
// typo in a script would pass unnoticed. Without arguments a group still prints its help.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() || cmd == cmd.Root() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	// Flags of the subcommands (--kubeconfig, -n) must not hide the unknown command.
	cmd.FParseErrWhitelist.UnknownFlags = true
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		var names []string
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				names = append(names, s.Name())
			}
		}
		return fmt.Errorf("unknown command %q for %q: use one of %s (%s --help)", args[0], c.CommandPath(), strings.Join(names, ", "), c.CommandPath())
	}
}

// withKubeFlags adds kubectl's connection flags to commands that talk to the control plane.
// join keeps --kubeconfig for the member and names the control plane's --control-plane-kubeconfig.
func withKubeFlags(g *globals, cmd *cobra.Command) *cobra.Command {
	fs := cmd.Flags()
	if cmd.Name() == "join" {
		fs.StringVar(g.kube.KubeConfig, "control-plane-kubeconfig", "", "kubeconfig of the control plane (default: $KUBECONFIG, else the local fleet's)")
		return cmd
	}
	fs.StringVar(g.kube.KubeConfig, "kubeconfig", "", "kubeconfig of the control plane (default: $KUBECONFIG, else the local fleet's)")
	fs.StringVar(g.kube.Context, "context", "", "kubeconfig context of the control plane")
	return cmd
}

func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "flotilla")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "flotilla")
	}
	return filepath.Join(os.TempDir(), "flotilla")
}

// defaultBinDir: $FLOTILLA_BIN_DIR, else the directory of this binary (make build puts it in
// bin/ beside the tools).
func defaultBinDir() string {
	if d := os.Getenv("FLOTILLA_BIN_DIR"); d != "" {
		return d
	}
	if exe, err := os.Executable(); err == nil {
		return filepath.Dir(exe)
	}
	return "bin"
}

// controlPlaneConfig resolves the control plane: an explicit --kubeconfig/--context, else
// $KUBECONFIG, else the local fleet in --state-dir.
func (g *globals) controlPlaneConfig() (*rest.Config, error) {
	explicit := *g.kube.KubeConfig
	if explicit == "" && os.Getenv("KUBECONFIG") == "" {
		local := g.localKubeconfig()
		if _, err := os.Stat(local); err == nil {
			explicit = local
		}
	}
	ctx := ""
	if g.kube.Context != nil {
		ctx = *g.kube.Context
	}
	return kube.RESTConfig(explicit, ctx)
}

// localKubeconfig is the local fleet's control-plane kubeconfig.
func (g *globals) localKubeconfig() string {
	return filepath.Join(g.stateDir, "kubeconfigs", localfleet.ControlPlaneName+".kubeconfig")
}

func (g *globals) controlPlaneClient() (client.Client, error) {
	cfg, err := g.controlPlaneConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: kube.Scheme})
}

func (g *globals) scheme() *runtime.Scheme { return kube.Scheme }

func (g *globals) openFleet(fleet *localfleet.Fleet, manager *localfleet.ManagerCommand, out io.Writer) (*localfleet.LocalFleet, error) {
	return localfleet.Open(localfleet.Options{StateDir: g.stateDir, BinDir: g.binDir, Fleet: fleet, Manager: manager, Out: out, CRDs: crdYAML()})
}

// Execute runs the command line and returns the process exit code.
func Execute(ctx context.Context) int {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	cmd := NewRootCommand(streams)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(&safeWriter{w: streams.ErrOut}, "error: %v\n", err)
		var exit *ExitError
		if errors.As(err, &exit) {
			return exit.Code
		}
		return 1
	}
	return 0
}

// ExitError ends a command with an exit code of its own (documented by the command).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }
