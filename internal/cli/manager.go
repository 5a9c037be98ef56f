package cli

import (
	"flag"
	"fmt"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flotilla-dev/flotilla/internal/manager"
)

func newControllerManagerCommand(g *globals) *cobra.Command {
	o := manager.DefaultOptions()
	var probe probeFlags
	zapOpts := zap.Options{}
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run Flotilla's controllers against the control plane (leader-elected)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			cfg, err := g.controlPlaneConfig()
			if err != nil {
				return err
			}
			qps, burst := o.Probe.MemberQPS, o.Probe.MemberBurst
			o.Probe = probe.options()
			o.Probe.MemberQPS, o.Probe.MemberBurst = qps, burst
			if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 || o.Probe.MemberQPS <= 0 || o.Probe.MemberBurst < 1 {
				return fmt.Errorf("--kube-api-qps, --kube-api-burst, --member-api-qps and --member-api-burst must be positive")
			}
			return manager.Run(ctrl.SetupSignalHandler(), cfg, o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.MetricsAddress, "metrics-bind-address", o.MetricsAddress, "address of the Prometheus /metrics endpoint; 0 disables it")
	fs.StringVar(&o.HealthProbeAddress, "health-probe-bind-address", o.HealthProbeAddress, "address of /healthz and /readyz")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "elect a leader so only one replica acts")
	fs.DurationVar(&o.FailoverGracePeriod, "failover-grace-period", o.FailoverGracePeriod, "how long a cluster may stay not Ready before it is tainted unreachable and its Divided replicas move to healthy clusters")
	fs.StringVar(&o.PprofAddress, "pprof-bind-address", "", "address of net/http/pprof for profiling; off when empty")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "queries per second to the control plane")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "burst of queries to the control plane")
	o.Probe.MemberQPS, o.Probe.MemberBurst = 500, 1000
	fs.Float32Var(&o.Probe.MemberQPS, "member-api-qps", o.Probe.MemberQPS, "queries per second to each member")
	fs.IntVar(&o.Probe.MemberBurst, "member-api-burst", o.Probe.MemberBurst, "burst of queries to each member")
	probe.add(cmd)
	goflags := flag.NewFlagSet("zap", flag.ContinueOnError)
	zapOpts.BindFlags(goflags)
	fs.AddGoFlagSet(goflags)
	return cmd
}
