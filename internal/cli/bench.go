package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/bench"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

func newBenchCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Measure Flotilla on the local fleet and print figures"}
	var sizes []int
	var profile string
	var probe probeFlags
	up := &cobra.Command{
		Use:   "up",
		Short: "Time `up` to all members Ready, memory per member and of the control plane, and failure detection",
		Example: fmt.Sprintf(`  # Full members, fleets of 3 and 10
  %[1]s bench up
  # Slim members for scale work: memory per member and time to Ready at 10 and 30
  %[1]s bench up --profile slim --members 10,30`, invokedName()),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := probe.validate(); err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			p, err := localfleet.ParseProfile(profile)
			if err != nil {
				return fmt.Errorf("--profile %w", err)
			}
			for i, n := range sizes {
				if err := benchUp(cmd.Context(), g, exe, n, p, probe, i == 0); err != nil {
					return err
				}
			}
			return nil
		},
	}
	up.Flags().IntSliceVar(&sizes, "members", []int{3, 10}, "fleet sizes to measure, one fresh fleet each")
	up.Flags().StringVar(&profile, "profile", string(localfleet.ProfileFull), "member profile: full (apiserver, controller-manager, scheduler, kwok) or slim (apiserver with small caches and kwok)")
	probe.add(up)
	var templates []int
	var samples int
	var managerArgs []string
	propagate := &cobra.Command{
		Use:   "propagate",
		Short: "Time propagating N Deployments to 3 members against a plain SSA client, and single-change latency",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Checked against the controller-manager's own flags now, not after a fleet started.
			if err := newControllerManagerCommand(g).ParseFlags(managerArgs); err != nil {
				return fmt.Errorf("--manager-arg: %w (give flags of `flotilla controller-manager`, e.g. --manager-arg=--pprof-bind-address=127.0.0.1:6060)", err)
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			for _, n := range templates {
				if err := benchPropagate(cmd.Context(), g, exe, n, samples, managerArgs); err != nil {
					return err
				}
			}
			return nil
		},
	}
	propagate.Flags().IntSliceVar(&templates, "templates", []int{100, 1000}, "template counts to measure, one fresh fleet each")
	propagate.Flags().IntVar(&samples, "latency-samples", 50, "single-template changes timed after the bulk run")
	propagate.Flags().StringArrayVar(&managerArgs, "manager-arg", nil, "a flag for the controller-manager under test, e.g. --manager-arg=--pprof-bind-address=127.0.0.1:6060 to profile it; repeatable")
	var rounds int
	releaseCmd := &cobra.Command{
		Use:   "release",
		Short: "Time the release controller: overhead per wave and abort back to stable, on a fresh 3-member fleet",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rounds < 1 {
				return fmt.Errorf("--rounds %d: give at least 1", rounds)
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			lf, cleanup, err := bench.StartFleet(cmd.Context(), g.binDir, exe, crdYAML(), 3, nil)
			if err != nil {
				return err
			}
			defer cleanup()
			return bench.Release(cmd.Context(), lf, rounds, g.streams.Out)
		},
	}
	releaseCmd.Flags().IntVar(&rounds, "rounds", 5, "releases (and aborts) to time")
	var calls int
	var memoryObjects []int
	interpretCmd := &cobra.Command{
		Use:   "interpret",
		Short: "Time every interpreter operation through Lua (VMs pooled) against the built-in Go interpreter, and peak memory of a string-doubling script",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if calls < 100 {
				return fmt.Errorf("--calls %d: give at least 100 for a p99", calls)
			}
			if err := bench.Interpret(calls, g.streams.Out); err != nil {
				return err
			}
			if len(memoryObjects) == 0 {
				return nil
			}
			fmt.Fprintln(g.streams.Out)
			return bench.InterpretMemory(memoryObjects, g.streams.Out)
		},
	}
	interpretCmd.Flags().IntVar(&calls, "calls", 5000, "calls timed per operation and interpreter")
	interpretCmd.Flags().IntSliceVar(&memoryObjects, "memory-objects", []int{3, 30, 300}, "objects whose string-doubling ReflectStatus runs at once, one round each; empty to skip")
	var failoverRounds, failoverWorkloads, failoverReplicas int
	var grace time.Duration
	failoverCmd := &cobra.Command{
		Use:   "failover",
		Short: "Time cluster failover after a member's API server stops: detection, re-placement, replacements available",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if failoverRounds < 1 {
				return fmt.Errorf("--rounds %d: give at least 1", failoverRounds)
			}
			if grace <= 0 {
				return fmt.Errorf("--grace-period %s: give a positive duration, for example 5s", grace)
			}
			if err := failoverSize(failoverWorkloads, failoverReplicas); err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			lf, cleanup, err := bench.StartFleet(cmd.Context(), g.binDir, exe, crdYAML(), 3, []string{
				"--probe-period=1s", "--probe-timeout=1s", "--failure-threshold=2", "--failover-grace-period=" + grace.String()})
			if err != nil {
				return err
			}
			defer cleanup()
			return bench.Failover(cmd.Context(), lf, bench.FailoverOptions{Rounds: failoverRounds, Grace: grace,
				Workloads: failoverWorkloads, Replicas: failoverReplicas}, g.streams.Out)
		},
	}
	failoverCmd.Flags().IntVar(&failoverRounds, "rounds", 3, "member stops to time")
	failoverCmd.Flags().DurationVar(&grace, "grace-period", 5*time.Second, "the controller-manager's --failover-grace-period")
	failoverCmd.Flags().IntVar(&failoverWorkloads, "workloads", 1, "Deployments divided over the members")
	failoverCmd.Flags().IntVar(&failoverReplicas, "replicas", 9, "replicas of each Deployment")
	var driftOpts bench.DriftOptions
	driftCmd := &cobra.Command{
		Use:   "drift",
		Short: "Time from a hand-made change of a member object to corrected, p50/p99 over N changes with M templates placed, on a fresh 3-member fleet",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := driftOpts.Validate(); err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			lf, cleanup, err := bench.StartFleet(cmd.Context(), g.binDir, exe, crdYAML(), 3, nil)
			if err != nil {
				return err
			}
			defer cleanup()
			return bench.Drift(cmd.Context(), lf, driftOpts, g.streams.Out)
		},
	}
	driftCmd.Flags().IntVar(&driftOpts.Templates, "templates", 1000, "Deployments placed on every member")
	driftCmd.Flags().IntVar(&driftOpts.Changes, "changes", 100, "member-side image changes timed, one at a time")
	var appsOpts bench.AppsOptions
	appsCmd := &cobra.Command{
		Use:   "apps",
		Short: "Applications from one git repository on a fresh 3-member fleet: time to all running, from a cluster relabel to every binding re-placed, and from a webhook-announced push to the first member apply",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if appsOpts.Apps < 1 {
				return fmt.Errorf("--apps %d: give at least 1", appsOpts.Apps)
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			lf, cleanup, err := bench.StartFleet(cmd.Context(), g.binDir, exe, crdYAML(), 3, nil)
			if err != nil {
				return err
			}
			defer cleanup()
			return bench.Apps(cmd.Context(), lf, appsOpts, g.streams.Out)
		},
	}
	appsCmd.Flags().IntVar(&appsOpts.Apps, "apps", 500, "Applications, one Deployment each")
	cmd.AddCommand(up, propagate, releaseCmd, interpretCmd, failoverCmd, driftCmd, appsCmd, newBenchScaleCommand(g))
	return cmd
}

// failoverPods is what the two members left in the bench fleet hold: 2 kwok nodes of 110 pods
// each, less room for the kube-system pods.
const failoverPods = 400

func failoverSize(workloads, replicas int) error {
	switch {
	case workloads < 1:
		return fmt.Errorf("--workloads %d: give at least 1", workloads)
	case replicas < 3:
		return fmt.Errorf("--replicas %d: give at least 3, one per member", replicas)
	case workloads*replicas > failoverPods:
		return fmt.Errorf("--workloads %d x --replicas %d = %d pods: the two members left after a stop hold at most %d; give fewer", workloads, replicas, workloads*replicas, failoverPods)
	}
	return nil
}

func benchPropagate(ctx context.Context, g *globals, exe string, n, samples int, managerArgs []string) error {
	lf, cleanup, err := bench.StartFleet(ctx, g.binDir, exe, crdYAML(), 3, managerArgs)
	if err != nil {
		return err
	}
	defer cleanup()
	pid := 0
	for _, s := range lf.Status() {
		if s.Name == "flotilla-controller-manager" {
			pid = s.PID
		}
	}
	return bench.Propagation(ctx, lf, pid, bench.PropagationOptions{Templates: n, LatencySamples: samples}, g.streams.Out)
}

// benchUp starts a fresh fleet of n members in a temporary state directory, measures it and
// removes it again.
func benchUp(ctx context.Context, g *globals, exe string, n int, profile localfleet.Profile, probe probeFlags, detectFailure bool) error {
	out := g.streams.Out
	dir, err := os.MkdirTemp("", "flotilla-bench-")
	if err != nil {
		return err
	}
	progress := bench.FleetProgress(out, n)
	lf, err := localfleet.Open(localfleet.Options{
		StateDir: dir, BinDir: g.binDir, Fleet: localfleet.GeneratedFleet(n, profile), CRDs: crdYAML(),
		Manager: &localfleet.ManagerCommand{Binary: exe, Args: probe.args()}, Out: progress,
	})
	if err != nil {
		return err
	}
	defer func() { _ = lf.Down(true) }()

	fmt.Fprintf(out, "== fleet of %d %s members\n", n, profile)
	start := time.Now()
	res, err := lf.Up(ctx)
	if err != nil {
		return err
	}
	cfg, err := lf.RESTConfig("")
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: g.scheme()})
	if err != nil {
		return err
	}
	if err := lf.Join(ctx, c, progress, 5*time.Minute); err != nil {
		return err
	}
	progress.Finish()
	total := time.Since(start)
	fmt.Fprintf(out, "up, processes ready:        %6.1fs\n", res.Duration.Seconds())
	fmt.Fprintf(out, "up to all members Ready:    %6.1fs\n", total.Seconds())

	time.Sleep(5 * time.Second) // let start-up allocations settle before reading memory
	mem := bench.FleetMemory(lf.Status())
	fmt.Fprint(out, mem.Report(n))
	if detectFailure {
		victim := lf.Fleet().Members[0].Name
		stopStart := time.Now()
		if err := lf.StopComponent(victim + "-apiserver"); err != nil {
			return err
		}
		stopped, stopAt := time.Since(stopStart), time.Now()
		for {
			cl := &clusterv1alpha1.Cluster{}
			if err := c.Get(ctx, client.ObjectKey{Name: victim}, cl); err == nil {
				if cond := meta.FindStatusCondition(cl.Status.Conditions, clusterv1alpha1.ConditionReady); cond != nil && cond.Status == metav1.ConditionFalse {
					break
				}
			}
			if time.Since(stopAt) > 5*time.Minute {
				return fmt.Errorf("cluster %s still Ready 5 minutes after its apiserver stopped", victim)
			}
			time.Sleep(100 * time.Millisecond)
		}
		fmt.Fprintf(out, "apiserver stop -> NotReady: %6.1fs (probe every %s, timeout %s, threshold %d; measured from the apiserver's exit, which took %.1fs)\n",
			time.Since(stopAt).Seconds(), probe.ProbePeriod, probe.ProbeTimeout, probe.FailureThreshold, stopped.Seconds())
	}
	return nil
}

func newBenchScaleCommand(g *globals) *cobra.Command {
	o := bench.ScaleOptions{Members: 100, Templates: 1000, LatencySamples: 50, FailoverReplicas: 2, Bake: 5 * time.Second, Idle: 30 * time.Second, ManagerReplicas: 1}
	var profile string
	var managerArgs []string
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "On one fresh fleet of N slim members and M templates on every member: time to all available against a plain SSA client, aggregation lag, change latency, a 1%/10%/89% release, N clusters lost at once, manager memory, CPU and writes per member object, probing cost, and a restart at full load",
		Example: fmt.Sprintf(`  # The issue's size: 100 slim members, 1000 Deployments on each (100 000 member objects); about 19 GiB
  %[1]s bench scale
  # Small, to try it out
  %[1]s bench scale --members 5 --templates 50
  # Label subsets: each Deployment on the members of one region (the generated fleet has 3)
  %[1]s bench scale --members 100 --templates 1500 --spread-by region`, invokedName()),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("lose") {
				o.Lose = bench.DefaultLose(o.Members)
			}
			if !cmd.Flags().Changed("release-lose") {
				o.ReleaseLose = bench.DefaultReleaseLose(o.Members)
			}
			if err := o.Validate(); err != nil {
				return err
			}
			if grace <= 0 {
				return fmt.Errorf("--grace-period %s: give a positive duration, for example 10s", grace)
			}
			p, err := localfleet.ParseProfile(profile)
			if err != nil {
				return fmt.Errorf("--profile %w", err)
			}
			// Given after the bench's own, so a --manager-arg wins over them.
			args := append([]string{"--failover-grace-period=" + grace.String()}, managerArgs...)
			if err := newControllerManagerCommand(g).ParseFlags(args); err != nil {
				return fmt.Errorf("--manager-arg: %w (give flags of `flotilla controller-manager`, e.g. --manager-arg=--probe-period=5s)", err)
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			// A stopped bench (Ctrl-C, SIGTERM) still takes its fleet down: 100 members left
			// running would hold most of the machine.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(g.streams.Out, "starting a fleet of %d %s members...\n", o.Members, p)
			start := time.Now()
			fleet := localfleet.GeneratedFleet(o.Members, p)
			fleet.Manager = &localfleet.ManagerSettings{Replicas: o.ManagerReplicas}
			lf, cleanup, err := bench.StartFleetShowing(ctx, g.binDir, exe, crdYAML(), fleet, args, g.streams.Out)
			if err != nil {
				return err
			}
			defer cleanup()
			fmt.Fprintf(g.streams.Out, "fleet up and joined in %.1fs\n", time.Since(start).Seconds())
			return bench.Scale(ctx, lf, o, g.streams.Out)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Members, "members", o.Members, "member clusters")
	f.IntVar(&o.Templates, "templates", o.Templates, "Deployments of 1 replica, each placed on every member (or, with --spread-by, on one label value's members)")
	f.StringVar(&o.SpreadBy, "spread-by", "", "a member label, e.g. region: each Deployment goes to the members of one of its values, the values in turn, by one PropagationPolicy per value; empty places every Deployment on every member")
	f.StringVar(&profile, "profile", string(localfleet.ProfileSlim), "member profile: slim (apiserver and kwok) or full")
	f.IntVar(&o.LatencySamples, "latency-samples", o.LatencySamples, "single-template changes timed after the bulk run")
	f.IntVar(&o.Lose, "lose", 10, "members stopped at once for failover; default 10, or half the members when fewer than 20")
	f.IntVar(&o.FailoverReplicas, "failover-replicas", o.FailoverReplicas, "replicas per member of the Deployment divided over the members for failover")
	f.DurationVar(&o.Bake, "bake", o.Bake, "bakeTime gate of each release wave")
	f.DurationVar(&o.Idle, "idle", o.Idle, "how long the manager's idle CPU is measured, before and after the bulk run")
	f.StringSliceVar(&o.Skip, "skip", nil, "phases left out, comma-separated: "+strings.Join(bench.ScalePhases, ", "))
	f.IntVar(&o.ReleaseLose, "release-lose", 5, "clusters of the release's last wave stopped once its first wave began; the release must finish on the others; default 5, or a quarter of a smaller fleet")
	f.IntVar(&o.ManagerReplicas, "manager-replicas", 1, fmt.Sprintf("controller-manager replicas sharing the members (1 to %d); each one's memory is printed", localfleet.MaxManagerReplicas))
	f.DurationVar(&grace, "grace-period", 10*time.Second, "the controller-manager's --failover-grace-period")
	f.StringArrayVar(&managerArgs, "manager-arg", nil, "a flag for the controller-manager under test, e.g. --manager-arg=--pprof-bind-address=127.0.0.1:6060; repeatable")
	return cmd
}
