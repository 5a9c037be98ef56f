package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/config/crd"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
	"github.com/flotilla-dev/flotilla/internal/manager"
)

func crdYAML() []byte { return crd.YAML() }

// probeFlags are the controller-manager's probe settings, also given by `up` to the manager
// it starts.
type probeFlags struct{ clustercache.Options }

// upManagerFlags are the settings `up` gives the controller-manager it starts: the probe
// settings, the failover grace period and the log level. A fleet file's manager section
// fills in what no flag sets explicitly.
type upManagerFlags struct {
	probeFlags
	failoverGrace time.Duration
	logLevel      string
}

func (u *upManagerFlags) add(cmd *cobra.Command) {
	u.probeFlags.add(cmd)
	cmd.Flags().DurationVar(&u.failoverGrace, "failover-grace-period", time.Minute,
		"how long a member may stay not Ready before it is tainted unreachable and its Divided replicas move")
	cmd.Flags().StringVar(&u.logLevel, "log-level", "info", "controller-manager log level: debug, info, error, or a positive integer for more debug detail")
}

// fromFleet takes the fleet file's manager settings for every flag not given explicitly.
func (u *upManagerFlags) fromFleet(cmd *cobra.Command, m *localfleet.ManagerSettings) {
	if m == nil {
		return
	}
	set := func(flag, value string) {
		if value != "" && !cmd.Flags().Changed(flag) {
			_ = cmd.Flags().Set(flag, value) // validated with the fleet file
		}
	}
	set("probe-period", m.ProbePeriod)
	set("probe-timeout", m.ProbeTimeout)
	if m.FailureThreshold > 0 {
		set("failure-threshold", fmt.Sprint(m.FailureThreshold))
	}
	set("discovery-interval", m.DiscoveryInterval)
	set("failover-grace-period", m.FailoverGracePeriod)
	set("log-level", m.LogLevel)
}

func (u *upManagerFlags) validate() error {
	if err := u.probeFlags.validate(); err != nil {
		return err
	}
	if u.failoverGrace <= 0 {
		return fmt.Errorf("--failover-grace-period %s: give a positive duration such as 1m", u.failoverGrace)
	}
	if err := localfleet.ValidLogLevel(u.logLevel); err != nil {
		return fmt.Errorf("--log-level %w", err)
	}
	return nil
}

func (u *upManagerFlags) args() []string {
	return append(u.probeFlags.args(), "--failover-grace-period="+u.failoverGrace.String(), "--zap-log-level="+u.logLevel)
}

func (p *probeFlags) add(cmd *cobra.Command) { manager.BindProbeFlags(cmd.Flags(), &p.Options) }

func (p *probeFlags) options() clustercache.Options {
	return clustercache.Options{ProbePeriod: p.ProbePeriod, ProbeTimeout: p.ProbeTimeout, FailureThreshold: p.FailureThreshold, DiscoveryInterval: p.DiscoveryInterval}
}

func (p *probeFlags) validate() error {
	return p.options().Validate()
}

func (p *probeFlags) args() []string {
	return []string{
		"--probe-period=" + p.ProbePeriod.String(), "--probe-timeout=" + p.ProbeTimeout.String(),
		fmt.Sprintf("--failure-threshold=%d", p.FailureThreshold), "--discovery-interval=" + p.DiscoveryInterval.String(),
	}
}

func newUpCommand(g *globals) *cobra.Command {
	var fleetFile, profile string
	var members, managerReplicas int
	var probe upManagerFlags
	var readyTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the local fleet (etcd, control plane, member clusters, controller-manager) and join its members",
		Example: fmt.Sprintf(`  # Three members with distinct regions
  %[1]s up
  # Members described by a fleet file
  %[1]s up --fleet examples/fleet.yaml
  # Faster failover and debug logs for a demo
  %[1]s up --failover-grace-period 20s --probe-period 2s --log-level debug
  # Fifty slim members (an apiserver and kwok each, no controller-manager) for scale work
  %[1]s up --members 50 --profile slim
  # Two controller-manager replicas sharing the members (see them with: %[1]s shards)
  %[1]s up --members 4 --profile slim --manager-replicas 2`, invokedName()),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fleet, err := upFleet(cmd, fleetFile, members, profile)
			if err != nil {
				return err
			}
			if fleet != nil {
				probe.fromFleet(cmd, fleet.Manager)
			}
			if err := probe.validate(); err != nil {
				return err
			}
			if readyTimeout <= 0 {
				return fmt.Errorf("--ready-timeout %s: give a positive duration such as 3m", readyTimeout)
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			out := g.streams.Out
			if managerReplicas < 0 || managerReplicas > localfleet.MaxManagerReplicas {
				return fmt.Errorf("--manager-replicas %d: give 1 to %d", managerReplicas, localfleet.MaxManagerReplicas)
			}
			lf, err := g.openFleet(fleet, &localfleet.ManagerCommand{Binary: exe, Args: probe.args(), Replicas: managerReplicas}, out)
			if err != nil {
				return err
			}
			start := time.Now()
			res, err := lf.Up(cmd.Context())
			if err != nil {
				return err
			}
			if res.AlreadyUp {
				return nil
			}
			c, err := g.controlPlaneClientFor(lf)
			if err != nil {
				return err
			}
			if err := lf.Join(cmd.Context(), c, out, readyTimeout); err != nil {
				return err
			}
			fmt.Fprintf(out, "fleet ready in %.1fs: %d members joined and Ready\n", time.Since(start).Seconds(), len(lf.Fleet().Members))
			fmt.Fprintf(out, "control plane: export KUBECONFIG=%s\n", lf.Kubeconfig(""))
			fmt.Fprintf(out, "dashboard: %s dashboard (or %s with a bearer token)\n", invokedName(), lf.DashboardURL())
			fmt.Fprintf(out, "git push webhook: POST http://%s/hooks/git\n", lf.ManagerMetricsAddress())
			return nil
		},
	}
	cmd.Flags().StringVarP(&fleetFile, "fleet", "f", "", "fleet file (YAML) describing the members; default: 3 members in distinct regions")
	cmd.Flags().IntVar(&members, "members", 0, "start this many members named member-01.. over three regions instead of the default three (not with --fleet)")
	cmd.Flags().StringVar(&profile, "profile", "", "member profile: full (apiserver, controller-manager, scheduler, kwok; the default) or slim (apiserver with small caches and kwok, for scale work); with --fleet, the profile of members that name none")
	cmd.Flags().IntVar(&managerReplicas, "manager-replicas", 0, "controller-manager replicas; more than one share the member clusters (see `flotilla shards`); default: the fleet file's manager.replicas, else as many as last started, else 1")
	cmd.Flags().DurationVar(&readyTimeout, "ready-timeout", 3*time.Minute, "how long to wait for the members to be Ready")
	probe.add(cmd)
	return cmd
}

// upFleet is the fleet `up` asks for: the fleet file's, a generated one of --members, the
// default fleet with --profile, or nil (the saved fleet, else the default) when none is given.
func upFleet(cmd *cobra.Command, fleetFile string, members int, profile string) (*localfleet.Fleet, error) {
	var p localfleet.Profile
	if profile != "" {
		var err error
		if p, err = localfleet.ParseProfile(profile); err != nil {
			return nil, fmt.Errorf("--profile %w", err)
		}
	}
	switch {
	case fleetFile != "" && cmd.Flags().Changed("members"):
		return nil, errors.New("--members and --fleet: give one; a fleet file lists its members")
	case fleetFile != "":
		data, err := os.ReadFile(fleetFile)
		if err != nil {
			return nil, fmt.Errorf("reading fleet file: %w", err)
		}
		f, err := localfleet.ParseFleetWithProfile(data, p)
		if err != nil {
			return nil, fmt.Errorf("fleet file %s: %w", fleetFile, err)
		}
		return f, nil
	case cmd.Flags().Changed("members"):
		if members < 1 {
			return nil, fmt.Errorf("--members %d: give at least 1", members)
		}
		f := localfleet.GeneratedFleet(members, p)
		return f, f.Validate()
	case p != "":
		f := localfleet.DefaultFleet()
		f.Profile = p
		for i := range f.Members {
			f.Members[i].Profile = p
		}
		return f, nil
	}
	return nil, nil
}

func (g *globals) controlPlaneClientFor(lf *localfleet.LocalFleet) (client.Client, error) {
	cfg, err := lf.RESTConfig("")
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: kube.Scheme})
}

func newDownCommand(g *globals) *cobra.Command {
	var purge bool
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the processes of the local fleet (its data stays unless --purge)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lf, err := g.openFleet(nil, nil, g.streams.Out)
			if err != nil {
				return err
			}
			if !lf.Initialized() {
				fmt.Fprintf(g.streams.Out, "no local fleet in %s\n", lf.StateDir())
				return nil
			}
			return lf.Down(purge)
		},
	}
	cmd.Flags().BoolVar(&purge, "purge", false, "also delete the state directory (all data of the fleet)")
	return cmd
}

func newStatusCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the local fleet's processes (pid, memory, restarts, last exit) and the members' readiness",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lf, err := g.openFleet(nil, nil, nil)
			if err != nil {
				return err
			}
			out := g.streams.Out
			if !lf.Initialized() {
				fmt.Fprintf(out, "no local fleet in %s: run `%s up`\n", lf.StateDir(), invokedName())
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "COMPONENT\tCLUSTER\tPID\tRSS\tSTATE\tRESTARTS\tLAST EXIT")
			running := 0
			statuses := lf.Status()
			now := time.Now()
			for _, s := range statuses {
				pid, rss := "-", "-"
				if s.Running {
					running++
					pid, rss = fmt.Sprint(s.PID), fmt.Sprintf("%dMi", s.RSSBytes>>20)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.Name, s.Cluster, pid, rss, componentState(s, now), s.Restarts, lastExit(s, now))
			}
			_ = tw.Flush()
			fmt.Fprintf(out, "\n%d of %d components running; state in %s\n", running, len(statuses), lf.StateDir())
			if args := lf.ManagerSettings(); len(args) > 0 {
				fmt.Fprintf(out, "controller-manager settings: %s\n", strings.Join(args, " "))
			}
			if running > 0 {
				fmt.Fprintln(out)
				cfg, err := lf.RESTConfig("")
				if err != nil {
					return err
				}
				if err := printClusterTable(cmd.Context(), cfg, out, true); err != nil {
					fmt.Fprintf(out, "control plane not answering: %v\n", err)
				} else if c, err := client.New(cfg, client.Options{Scheme: kube.Scheme}); err == nil {
					fmt.Fprintln(out)
					_ = printShards(cmd.Context(), c, out)
				}
			}
			return nil
		},
	}
}

// componentState is running, stopped, or restarting (its supervisor waits out the backoff);
// a component that runs without a supervisor (started by an older flotilla) says so.
func componentState(s localfleet.ComponentStatus, now time.Time) string {
	switch {
	case s.Running && s.Supervised:
		return "running"
	case s.Running:
		return "running (unsupervised: down and up to supervise it)"
	case s.Supervised && !s.NextStart.IsZero():
		return fmt.Sprintf("restarting in %s", max(s.NextStart.Sub(now), 0).Round(time.Second))
	case s.Supervised:
		return "starting"
	default:
		return "stopped"
	}
}

// lastExit is how and how long ago the component last exited, or "-".
func lastExit(s localfleet.ComponentStatus, now time.Time) string {
	if s.LastExit == "" {
		return "-"
	}
	return fmt.Sprintf("%s, %s ago", s.LastExit, now.Sub(s.LastExitTime).Round(time.Second))
}

func newFleetCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Stop or start one member of the local fleet (fault injection)",
	}
	stop := &cobra.Command{
		Use:   "stop CLUSTER",
		Short: "Stop every process of one member; its data stays",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lf, err := g.openInitializedFleet()
			if err != nil {
				return err
			}
			return lf.StopMember(args[0])
		},
	}
	start := &cobra.Command{
		Use:   "start CLUSTER",
		Short: "Start a stopped member again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lf, err := g.openInitializedFleet()
			if err != nil {
				return err
			}
			return lf.StartMember(cmd.Context(), args[0])
		},
	}
	cmd.AddCommand(stop, start)
	return cmd
}

func (g *globals) openInitializedFleet() (*localfleet.LocalFleet, error) {
	lf, err := g.openFleet(nil, nil, g.streams.Out)
	if err != nil {
		return nil, err
	}
	if !lf.Initialized() {
		return nil, fmt.Errorf("no local fleet in %s: run `%s up` first", lf.StateDir(), invokedName())
	}
	return lf, nil
}

func newKubeconfigCommand(g *globals) *cobra.Command {
	var user string
	var groups []string
	cmd := &cobra.Command{
		Use:   "kubeconfig [CLUSTER]",
		Short: "Print the path of the admin kubeconfig of the control plane or of a member, or of a user's with --user",
		Example: fmt.Sprintf(`  kubectl --kubeconfig $(%[1]s kubeconfig) get clusters
  kubectl --kubeconfig $(%[1]s kubeconfig east) get nodes
  # A tenant: alice of group team-a-devs, with only what RBAC grants her
  kubectl --kubeconfig $(%[1]s kubeconfig --user alice --group team-a-devs) auth whoami`, invokedName()),
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lf, err := g.openInitializedFleet()
			if err != nil {
				return err
			}
			name := ""
			if len(args) == 1 && args[0] != localfleet.ControlPlaneName {
				name = args[0]
				if _, ok := lf.Fleet().Member(name); !ok {
					return fmt.Errorf("no member %q in this fleet (members: %s)", name, strings.Join(lf.Fleet().Names(), ", "))
				}
			}
			if user != "" {
				path, err := lf.UserKubeconfig(name, user, groups...)
				if err != nil {
					return fmt.Errorf("--user %s: %w", user, err)
				}
				fmt.Fprintln(g.streams.Out, path)
				return nil
			}
			if len(groups) > 0 {
				return fmt.Errorf("--group needs --user: the admin kubeconfig has its own identity")
			}
			path := lf.Kubeconfig(name)
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s does not exist yet: run `%s up`", path, invokedName())
			}
			fmt.Fprintln(g.streams.Out, path)
			return nil
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "issue (once) and print a kubeconfig authenticating as this user with a client certificate of the fleet's CA")
	cmd.Flags().StringSliceVar(&groups, "group", nil, "groups of --user (repeat or comma-separate)")
	return cmd
}
