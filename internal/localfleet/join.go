package localfleet

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/registration"
)

// Join joins (or re-joins, keeping endpoints current after a restart) every member of
// a local fleet and waits until each is Ready, printing a line per member.
func (f *LocalFleet) Join(ctx context.Context, c client.Client, out io.Writer, timeout time.Duration) error {
	start := time.Now()
	for _, m := range f.Fleet().Members {
		if m.Pull() {
			if err := f.joinPull(ctx, c, m); err != nil {
				return fmt.Errorf("member %s: %w", m.Name, err)
			}
			continue
		}
		// Flotilla's own identity in the member, not the fleet's admin certificate: the fleet
		// made it (ensureAgent), so it is stored as given.
		kc, err := clientcmd.LoadFromFile(f.AgentKubeconfig(m.Name))
		if err != nil {
			return fmt.Errorf("member %s: %w", m.Name, err)
		}
		if _, err := registration.Join(ctx, c, registration.JoinOptions{Name: m.Name, Kubeconfig: kc, Labels: m.Labels, Overwrite: true, Credentials: registration.CredentialsAsGiven,
			Description: m.Description, ShortName: m.ShortName, Environment: m.Environment}); err != nil {
			return err
		}
	}
	err := registration.WaitReady(ctx, c, f.Fleet().Names(), timeout, func(cl *clusterv1alpha1.Cluster) {
		if out != nil {
			fmt.Fprintf(out, "  ✓ %-34s Ready after %.1fs (%s, %d nodes)\n", "cluster/"+cl.Name, time.Since(start).Seconds(), cl.Status.KubernetesVersion, cl.Status.NodeSummary.Ready)
		}
	})
	return err
}
