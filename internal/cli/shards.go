package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/shard"
)

// leaderLeaseName is the controller-manager's leader election Lease (its --leader-election-id).
const leaderLeaseName = "flotilla-controller-manager"

func newShardsCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "shards",
		Short: "Show the controller-manager's replicas, which one leads, and the member clusters each works on",
		Long: `Show the replicas of a sharded controller-manager (started with --shard-identity): each one's
live shard Lease, the member clusters it works on (connections, informers, applies), and the
leader, which runs the control-plane-wide controllers and keeps the Works.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			return printShards(cmd.Context(), c, g.streams.Out)
		},
	}
}

// printShards writes a table of the live replicas; an unsharded controller-manager says so.
func printShards(ctx context.Context, c client.Reader, out io.Writer) error {
	replicas, err := shard.ReadReplicas(ctx, c, kube.SystemNamespace)
	if err != nil {
		return fmt.Errorf("reading the shard Leases in %s: %w", kube.SystemNamespace, err)
	}
	if len(replicas) == 0 {
		fmt.Fprintln(out, "The controller-manager is not sharded: one replica (the leader) works on every cluster.")
		return nil
	}
	leader := ""
	l := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: kube.SystemNamespace, Name: leaderLeaseName}, l); err == nil && l.Spec.HolderIdentity != nil {
		leader = *l.Spec.HolderIdentity
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPLICA\tROLE\tADDRESS\tLEASE EXPIRES\tCLUSTERS")
	for _, r := range replicas {
		role := "shard"
		if r.Identity == leader {
			role = "leader"
		}
		if wait := time.Until(r.JoiningUntil); wait > 0 {
			role += fmt.Sprintf(" (joining, takes clusters in %s)", wait.Round(time.Second))
		}
		clusters := strings.Join(r.Clusters, ",")
		if clusters == "" {
			clusters = "<none>"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\tin %s\t%d: %s\n", r.Identity, role, r.Address, time.Until(r.Expires).Round(time.Second), len(r.Clusters), clusters)
	}
	return tw.Flush()
}
