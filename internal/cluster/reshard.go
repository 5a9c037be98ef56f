package cluster

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
)

// reshardSource queues every Cluster when this replica's share changes, so clusters taken are
// connected and clusters given away disconnected at once.
type reshardSource struct {
	client client.Reader
	shard  Shard
	out    chan<- event.GenericEvent
}

func (s *reshardSource) NeedLeaderElection() bool { return false }

func (s *reshardSource) Start(ctx context.Context) error {
	changed := s.shard.Watch()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		clusters := &clusterv1alpha1.ClusterList{}
		if err := s.client.List(ctx, clusters); err != nil {
			continue
		}
		for i := range clusters.Items {
			select {
			case s.out <- event.GenericEvent{Object: &clusters.Items[i]}:
			case <-ctx.Done():
				return nil
			}
		}
	}
}
