package cli

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/flotilla-dev/flotilla/internal/manager"
)

func newControllerManagerCommand(g *globals) *cobra.Command {
	flags := manager.NewFlags()
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run Flotilla's controllers against the control plane (leader-elected)",
		Long: `Run Flotilla's controllers against the control plane (leader-elected). The
flotilla-controller-manager binary runs the same with the same flags, without the rest of the
CLI (the local fleet, bench, demo), for images.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(flags.Logger())
			cfg, err := g.controlPlaneConfig()
			if err != nil {
				return err
			}
			o, err := flags.Options(cmd.Flags())
			if err != nil {
				return err
			}
			return manager.Run(ctrl.SetupSignalHandler(), cfg, o)
		},
	}
	flags.Bind(cmd.Flags())
	return cmd
}
