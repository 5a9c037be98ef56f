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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	streams genericiooptions.IOStreams
	// kube are kubectl's connection flags (--kubeconfig, --context, -n, --as, --token, ...),
	// persistent on the root so every command reads them the same way.
	kube     *genericclioptions.ConfigFlags
	stateDir string
	binDir   string
	// localDefaulted: the local fleet's kubeconfig was put in --kubeconfig's place once.
	localDefaulted bool
}

// Exit codes of every command, documented in the root's help.
const (
	// ExitFailure: any error that is not one of the others.
	ExitFailure = 1
	// ExitUsage: an unknown command or flag, or wrong arguments.
	ExitUsage = 2
)

const exitCodesHelp = `Exit codes:
  0  success
  1  an error (the message says which)
  2  usage: an unknown command or flag, or wrong arguments
  3  release watch|status: the release ended badly (rolled back, aborted, superseded), a wave
     failed and waits for abort or retry, or a problem only a fix ends holds it
  4  release watch|status: --timeout passed before the release finished`

// NewRootCommand builds the command tree.
func NewRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	// Tenants write part of what is printed: no control character reaches the terminal.
	streams.Out, streams.ErrOut = &safeWriter{w: streams.Out}, &safeWriter{w: streams.ErrOut}
	g := &globals{streams: streams, kube: newConfigFlags()}
	name := invokedName()
	root := &cobra.Command{
		Use:   name,
		Short: "Flotilla makes a fleet of Kubernetes clusters behave like one for delivery",
		Long: `Flotilla makes a fleet of Kubernetes clusters behave like one for delivery.

--kubeconfig, --context, -n and the other connection flags name the control plane, as in
kubectl: --kubeconfig defaults to $KUBECONFIG, else the local fleet's, else ~/.kube/config; -n
to the kubeconfig context's namespace, else default.

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Example: strings.ReplaceAll(`  # Start a local fleet of three member clusters and join them
  NAME up
  # See the members
  NAME get clusters -o wide
  # Join an existing cluster
  NAME join east-1 --member-kubeconfig ~/.kube/east-1.yaml --label region=us-east`, "NAME", name),
	}
	// Commands other than controller-manager and agent log nothing through controller-runtime;
	// those set their own. controller-runtime takes only the first logger set, so exactly one is
	// set per process.
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		if cmd.Name() != "controller-manager" && cmd.Name() != "agent" {
			ctrl.SetLogger(logr.Discard())
		}
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	pf := root.PersistentFlags()
	pf.StringVar(&g.stateDir, "state-dir", defaultStateDir(), "directory of the local fleet's state (data, kubeconfigs, pids, logs)")
	pf.StringVar(&g.binDir, "bin-dir", defaultBinDir(), "`DIR` holding the local-fleet tools that make tools builds")
	g.kube.AddFlags(pf)

	root.AddCommand(
		newUpCommand(g), newDownCommand(g), newStatusCommand(g), newFleetCommand(g), newKubeconfigCommand(g),
		newInstallCommand(g), newUninstallCommand(g), newJoinCommand(g), newUnjoinCommand(g), newGetCommand(g), newDescribeCommand(g),
		newControllerManagerCommand(g), newAgentCommand(g), newReleaseCommand(g), newTeamCommand(g), newAppCommand(g), newTargetCommand(g), newHistoryCommand(g), newDashboardCommand(g), newWhereCommand(g), newWhatIfCommand(g), newWindowsCommand(g), newShardsCommand(g), newExportCommand(g), newInterpretCommand(g), newCustomizationsCommand(g),
	)
	root.AddCommand(newSyncCommands(g)...)
	root.AddCommand(newSuperviseCommand(g))
	root.AddCommand(
		newBenchCommand(g), newDemoCommand(g), newVersionCommand(g),
	)
	refuseUnknownSubcommands(root)
	usageErrorsExit2(root)
	return root
}

// newConfigFlags are kubectl's connection flags but --cluster and --user, which name a member
// cluster and a fleet user in flotilla's own commands (history --cluster, kubeconfig --user).
func newConfigFlags() *genericclioptions.ConfigFlags {
	f := genericclioptions.NewConfigFlags(true)
	f.ClusterName, f.AuthInfoName = nil, nil
	return f
}

// usageError marks err as the caller's mistake in calling the command: exit code 2.
func usageError(cmd *cobra.Command, err error) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())}
}

// usageErrorsExit2 makes bad flags and wrong arguments anywhere in the tree exit 2, so a
// script can tell "called wrongly" from "failed"; cobra reports both as plain errors.
func usageErrorsExit2(root *cobra.Command) {
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError(c, err) })
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					var exit *ExitError
					if errors.As(err, &exit) {
						return err
					}
					return usageError(cmd, err)
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// refuseUnknownSubcommands makes a command group (export, release, team, ...) fail on a
// subcommand it does not have, as kubectl does: cobra would print its help and exit 0, so a
// typo in a script would pass unnoticed. Without arguments a group still prints its help.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	// Flags of the subcommands (--cluster, -o) must not hide the unknown command.
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
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("unknown command %q for %q: use one of %s (%s --help)", args[0], c.CommandPath(), strings.Join(names, ", "), c.CommandPath())}
	}
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

// configFlags are the connection flags with the local fleet filled in: an explicit
// --kubeconfig, else $KUBECONFIG, else the local fleet in --state-dir, else ~/.kube/config.
func (g *globals) configFlags() *genericclioptions.ConfigFlags {
	if !g.localDefaulted {
		// Once, before the first use: ConfigFlags keeps the loader it builds first.
		g.localDefaulted = true
		if *g.kube.KubeConfig == "" && os.Getenv("KUBECONFIG") == "" {
			if local := g.localKubeconfig(); fileExists(local) {
				*g.kube.KubeConfig = local
			}
		}
	}
	return g.kube
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// controlPlaneConfig is the control plane as the connection flags name it. Every client of
// the control plane is built from it.
func (g *globals) controlPlaneConfig() (*rest.Config, error) {
	cfg, err := g.configFlags().ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

// namespace is -n, else the kubeconfig context's namespace, else default.
func (g *globals) namespace() string {
	ns, _, err := g.configFlags().ToRawKubeConfigLoader().Namespace()
	if err != nil || ns == "" {
		return metav1.NamespaceDefault
	}
	return ns
}

// namespaceGiven is the namespace -n or the kubeconfig context names, "" when neither does:
// commands that read across teams (history, export) then read every team.
func (g *globals) namespaceGiven() string {
	if *g.kube.Namespace != "" {
		return *g.kube.Namespace
	}
	raw, err := g.configFlags().ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return ""
	}
	current := raw.CurrentContext
	if *g.kube.Context != "" {
		current = *g.kube.Context
	}
	if c := raw.Contexts[current]; c != nil {
		return c.Namespace
	}
	return ""
}

// templateNamespace is where a KIND/NAME template is looked for: -n or the kubeconfig
// context's namespace; "" when neither names one, which findBinding reads as default, else a
// cluster-scoped template (a Namespace, a ClusterRole).
func (g *globals) templateNamespace() string { return g.namespaceGiven() }

// namespaceFlagSet says whether -n was given on the command line.
func (g *globals) namespaceFlagSet() bool { return *g.kube.Namespace != "" }

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
		return ExitFailure
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
