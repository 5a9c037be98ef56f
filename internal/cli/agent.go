package cli

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/flotilla-dev/flotilla/internal/agent"
)

func newAgentCommand(g *globals) *cobra.Command {
	flags := &agent.Flags{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the agent of a Pull member: dial the control plane, apply the cluster's Works to the member (--kubeconfig)",
		Long: `Run the agent of a Pull member. --kubeconfig names the member the agent runs in (not the
control plane): the agent dials the control plane's agent endpoint (--control-plane), registers
once with the bootstrap token ` + "`flotilla join NAME --mode Pull`" + ` printed, and then applies its
cluster's Works to the member and reports their status, also while the control plane is
unreachable. The flotilla-agent binary runs the same with the same flags, for images.`,
		Example: `  flotilla join edge-1 --mode Pull > token
  flotilla agent --kubeconfig edge-1.kubeconfig --cluster edge-1 --control-plane https://cp.example:8444 \
    --ca-file cp-ca.crt --bootstrap-token-file token --state-dir /var/lib/flotilla-agent`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := flags.Options()
			if err != nil {
				return usageError(cmd, err)
			}
			ctrl.SetLogger(flags.Logger())
			cfg, err := g.controlPlaneConfig()
			if err != nil {
				return err
			}
			return agent.Run(ctrl.SetupSignalHandler(), cfg, o)
		},
	}
	flags.Bind(cmd.Flags())
	return cmd
}
