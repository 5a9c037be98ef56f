package cli

import (
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-dev/flotilla/internal/supervisor"
)

// newSuperviseCommand is the supervisor `up` runs each local-fleet component under; users
// never type it, so it is hidden.
func newSuperviseCommand(g *globals) *cobra.Command {
	var component string
	var grace time.Duration
	cmd := &cobra.Command{
		Use:    "supervise --component NAME --state-dir DIR -- BINARY [ARGS...]",
		Short:  "Run one local-fleet component and start it again whenever it exits (used by up)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if component == "" {
				return errors.New("--component: name the component, e.g. east-apiserver")
			}
			dir, err := filepath.Abs(g.stateDir)
			if err != nil {
				return err
			}
			signals := make(chan os.Signal, 1)
			signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
			defer signal.Stop(signals)
			s := &supervisor.Supervisor{
				Component: component, StateDir: dir, Binary: args[0], Args: args[1:],
				Log: g.streams.Out, StopGrace: grace,
			}
			return s.Run(signals)
		},
	}
	cmd.Flags().StringVar(&component, "component", "", "component name, e.g. east-apiserver")
	cmd.Flags().DurationVar(&grace, "stop-grace", 10*time.Second, "how long the component may take to exit after SIGTERM before it is killed")
	return cmd
}
