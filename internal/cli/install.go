package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flotilla-dev/flotilla/internal/install"
	"github.com/flotilla-dev/flotilla/internal/manager"
)

func newInstallCommand(g *globals) *cobra.Command {
	var (
		o                 install.ApplyOptions
		layout            string
		export            bool
		managerKubeconfig string
		tokenTTL          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install or upgrade Flotilla in a Kubernetes API server: CRDs, admission policies, least-privilege roles and the controller-manager",
		Long: `Install applies config/install.yaml with server-side apply after a server-side dry run of every
object, so nothing is applied unless everything would be. Running it again upgrades in place;
user objects (templates, policies, Clusters and their credentials) are never touched.

Two layouts: hosted (default) runs the controller-manager as a Deployment in the cluster whose
API server is the control plane, and waits until it is available; dedicated installs only the
control plane's objects into an API server that runs no workloads, and writes a kubeconfig for
the manager's ServiceAccount with --manager-kubeconfig, to run the manager elsewhere.`,
		Example: fmt.Sprintf(`  %[1]s install --kubeconfig ~/.kube/hub.yaml --image registry.example.com/flotilla-controller-manager:v0.4.0
  %[1]s install --export > flotilla.yaml
  %[1]s install --shard --manager-replicas 3 --image registry.example.com/flotilla-controller-manager:v0.4.0
  %[1]s install --layout dedicated --kubeconfig cp.kubeconfig --manager-kubeconfig manager.kubeconfig`, invokedName()),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Layout = install.Layout(layout)
			if err := checkManagerArgs(o.ManagerArgs); err != nil {
				return usageError(cmd, err)
			}
			if export {
				objs, err := install.Objects(o.Options)
				if err != nil {
					return usageError(cmd, err)
				}
				data, err := install.YAML(objs)
				if err != nil {
					return err
				}
				_, err = g.streams.Out.Write(data)
				return err
			}
			if managerKubeconfig != "" && o.Layout != install.Dedicated {
				return usageError(cmd, fmt.Errorf("--manager-kubeconfig is for --layout dedicated: a hosted manager uses its pod's ServiceAccount token"))
			}
			if tokenTTL < 10*time.Minute {
				return usageError(cmd, fmt.Errorf("--manager-token-ttl %s: give at least 10m (the API server's minimum)", tokenTTL))
			}
			if _, err := install.Objects(o.Options); err != nil {
				return usageError(cmd, err)
			}
			cfg, err := g.controlPlaneConfig()
			if err != nil {
				return err
			}
			o.Out = g.streams.Out
			start := time.Now()
			changes, err := install.Apply(cmd.Context(), cfg, o)
			if err != nil {
				return err
			}
			counts := map[string]int{}
			for _, c := range changes {
				counts[c.Action]++
			}
			fmt.Fprintf(g.streams.Out, "Flotilla %s installed (%s layout) in %s: %d created, %d configured, %d unchanged\n",
				install.Version(), o.Layout, time.Since(start).Round(100*time.Millisecond), counts["created"], counts["configured"], counts["unchanged"])
			if managerKubeconfig != "" {
				data, expires, err := install.ManagerKubeconfig(cmd.Context(), cfg, tokenTTL)
				if err != nil {
					return err
				}
				if err := writePrivate(managerKubeconfig, data); err != nil {
					return err
				}
				fmt.Fprintf(g.streams.Out, "wrote %s: the controller-manager's ServiceAccount, token valid until %s (run install again to renew it); start the manager with flotilla-controller-manager --kubeconfig %s --leader-elect\n",
					managerKubeconfig, expires.UTC().Format(time.RFC3339), managerKubeconfig)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&layout, "layout", string(install.Hosted), "hosted (the manager runs as a Deployment in this cluster) or dedicated (this API server only holds Flotilla's objects; the manager runs elsewhere)")
	fs.StringVar(&o.Image, "image", "", "controller-manager image (default: the released image of this binary's version; make image builds one)")
	fs.BoolVar(&export, "export", false, "print the objects as YAML instead of applying them")
	fs.BoolVar(&o.Force, "force", false, "install over a newer Flotilla, or take over a controller-manager Deployment another tool made")
	fs.DurationVar(&o.Wait, "wait", 5*time.Minute, "how long to wait for the hosted controller-manager to be available; 0 returns once applied")
	fs.StringVar(&managerKubeconfig, "manager-kubeconfig", "", "with --layout dedicated: write a kubeconfig for the controller-manager's ServiceAccount to this file")
	fs.DurationVar(&tokenTTL, "manager-token-ttl", 30*24*time.Hour, "lifetime of the token in --manager-kubeconfig")
	fs.IntVar(&o.Replicas, "manager-replicas", 0, "replicas of the hosted controller-manager (default 2); with --shard each works on its share of the member clusters")
	fs.BoolVar(&o.Shard, "shard", false, "split the member clusters between the hosted controller-manager's replicas: each pod is a replica, the leader serves its Works to the others on port 9443 with certificates the replicas issue from the Secret flotilla-shard-ca")
	fs.StringArrayVar(&o.ManagerArgs, "manager-arg", nil, "a flag added to the hosted controller-manager's arguments, repeatable (e.g. --manager-arg=--history-dsn=postgres://flotilla@db/flotilla)")
	return cmd
}

// checkManagerArgs parses --manager-arg values with the manager's own flags, so a typo is
// refused here and not by a crash-looping pod.
func checkManagerArgs(args []string) error {
	if len(args) == 0 {
		return nil
	}
	fs := pflag.NewFlagSet("controller-manager", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	manager.NewFlags().Bind(fs)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("--manager-arg: %w (see flotilla controller-manager --help)", err)
	}
	return nil
}

// writePrivate writes a credential readable by its owner only, an existing file included.
func writePrivate(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".flotilla-kubeconfig-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path) // CreateTemp made it 0600
}

func newUninstallCommand(g *globals) *cobra.Command {
	var o install.UninstallOptions
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove Flotilla's controller-manager, roles and admission policies; user data stays unless --purge",
		Long: `Uninstall deletes what install applied except Flotilla's CRDs, their objects and the
flotilla-system namespace with the members' credentials: installing again finds the fleet as it
was. --purge deletes those too (member clusters keep what runs there).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.controlPlaneConfig()
			if err != nil {
				return err
			}
			o.Out = g.streams.Out
			if err := install.Uninstall(cmd.Context(), cfg, o); err != nil {
				return err
			}
			fmt.Fprintln(g.streams.Out, "Flotilla uninstalled")
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.Purge, "purge", false, "also delete Flotilla's CRDs with every object of them and the flotilla-system namespace")
	return cmd
}
