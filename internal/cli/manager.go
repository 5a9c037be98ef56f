package cli

import (
	"flag"

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
			o.Probe.ProbePeriod, o.Probe.ProbeTimeout, o.Probe.FailureThreshold = probe.period, probe.timeout, probe.threshold
			return manager.Run(ctrl.SetupSignalHandler(), cfg, o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.MetricsAddress, "metrics-bind-address", o.MetricsAddress, "address of the Prometheus /metrics endpoint; 0 disables it")
	fs.StringVar(&o.HealthProbeAddress, "health-probe-bind-address", o.HealthProbeAddress, "address of /healthz and /readyz")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "elect a leader so only one replica acts")
	probe.add(cmd)
	goflags := flag.NewFlagSet("zap", flag.ContinueOnError)
	zapOpts.BindFlags(goflags)
	fs.AddGoFlagSet(goflags)
	return cmd
}
