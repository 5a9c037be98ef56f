package registration

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/pull"
)

// PullJoinOptions describe a Pull member to join: no kubeconfig, the control plane never
// reaches it; its agent registers with the token JoinPull returns.
type PullJoinOptions struct {
	Name                                string
	Labels                              map[string]string
	Description, ShortName, Environment string
	// Overwrite replaces the labels and metadata of a Cluster already joined in Pull mode.
	Overwrite bool
	// TokenTTL is how long the bootstrap token registers; pull.DefaultTokenTTL when zero.
	TokenTTL time.Duration
}

// JoinPull writes a Pull Cluster (or keeps the one joined before) and a bootstrap token that
// registers its agent once. A Cluster joined in Push mode is refused: unjoin it first.
func JoinPull(ctx context.Context, c client.Client, o PullJoinOptions) (*clusterv1alpha1.Cluster, pull.Token, time.Time, error) {
	if err := validateName(o.Name); err != nil {
		return nil, pull.Token{}, time.Time{}, err
	}
	if err := validateLabels(o.Labels); err != nil {
		return nil, pull.Token{}, time.Time{}, err
	}
	if o.TokenTTL < 0 || o.TokenTTL > pull.MaxTokenTTL {
		return nil, pull.Token{}, time.Time{}, fmt.Errorf("--bootstrap-token-ttl %s: give a positive duration up to %s, for example 1h", o.TokenTTL, pull.MaxTokenTTL)
	}
	if err := ensureNamespace(ctx, c); err != nil {
		return nil, pull.Token{}, time.Time{}, err
	}
	created := false
	cl := &clusterv1alpha1.Cluster{}
	err := c.Get(ctx, client.ObjectKey{Name: o.Name}, cl)
	switch {
	case apierrors.IsNotFound(err):
		cl = &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: o.Labels},
			Spec: clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.SyncModePull,
				Description: o.Description, ShortName: o.ShortName, Environment: o.Environment}}
		if err := c.Create(ctx, cl); err != nil {
			return nil, pull.Token{}, time.Time{}, fmt.Errorf("creating cluster %q: %w", o.Name, err)
		}
		created = true
	case err != nil:
		return nil, pull.Token{}, time.Time{}, err
	case cl.Spec.SyncMode != clusterv1alpha1.SyncModePull:
		return nil, pull.Token{}, time.Time{}, fmt.Errorf("cluster %s is joined in %s mode: unjoin it first (flotilla unjoin %s), then join it with --mode Pull", o.Name, cl.Spec.SyncMode, o.Name)
	case !cl.DeletionTimestamp.IsZero():
		return nil, pull.Token{}, time.Time{}, fmt.Errorf("cluster %s is being unjoined; wait until it is gone and join it again", o.Name)
	case o.Overwrite:
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, client.ObjectKey{Name: o.Name}, cl); err != nil {
				return err
			}
			cl.Labels = o.Labels
			for _, f := range []struct {
				to   *string
				from string
			}{{&cl.Spec.Description, o.Description}, {&cl.Spec.ShortName, o.ShortName}, {&cl.Spec.Environment, o.Environment}} {
				if f.from != "" {
					*f.to = f.from
				}
			}
			return c.Update(ctx, cl)
		}); err != nil {
			return nil, pull.Token{}, time.Time{}, fmt.Errorf("updating cluster %q: %w", o.Name, err)
		}
	}
	tok, expires, err := pull.NewToken(ctx, c, cl, o.TokenTTL, time.Now())
	if err != nil {
		if created { // nothing half-made: the Cluster goes with the token that failed
			_ = c.Delete(ctx, cl)
		}
		return nil, pull.Token{}, time.Time{}, err
	}
	return cl, tok, expires, nil
}
