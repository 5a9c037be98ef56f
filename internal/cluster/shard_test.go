package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/testenv"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// switchShard is a replica's share that the test moves.
type switchShard struct {
	mu      sync.Mutex
	owned   bool
	changed chan struct{}
}

func (s *switchShard) Owns(string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owned
}
func (s *switchShard) Watch() <-chan struct{} { return s.changed }
func (s *switchShard) set(owned bool) {
	s.mu.Lock()
	s.owned = owned
	s.mu.Unlock()
	s.changed <- struct{}{}
}

// Sharded, a replica connects to and reports on a cluster only while it holds it, takes it at
// once when its share changes, gives up the connection when the cluster moves away, and, as the
// leader, still drains the cluster once it is unjoined.
func TestAShardedReplicaWorksOnlyOnItsClusters(t *testing.T) {
	ctx := context.Background()
	cfg, c := testenv.Start(t)
	memberCfg, _ := testenv.Start(t)
	members := clustercache.New(clustercache.Options{ProbePeriod: time.Second, ProbeTimeout: 2 * time.Second, FailureThreshold: 3})
	share := &switchShard{changed: make(chan struct{})}
	testenv.Manager(t, cfg, func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: workstore.New().Client(mgr.GetClient()), Cache: members, Shard: share, Leading: func() bool { return true }}).SetupWithManager(mgr)
	})
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kube.SystemNamespace}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kube.SystemNamespace, Name: "m1"},
		Data: map[string][]byte{clusterv1alpha1.CredentialsSecretKey: kubeconfigFor(t, memberCfg)}}); err != nil {
		t.Fatal(err)
	}
	cl := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "m1"}, Spec: clusterv1alpha1.ClusterSpec{
		Endpoint: memberCfg.Host, SyncMode: clusterv1alpha1.SyncModePush,
		CredentialsSecretRef: clusterv1alpha1.SecretReference{Namespace: kube.SystemNamespace, Name: "m1"}}}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	get := func() *clusterv1alpha1.Cluster {
		got := &clusterv1alpha1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Name: "m1"}, got); err != nil {
			return nil
		}
		return got
	}
	// Not held: another replica's; nothing here connects or writes status.
	time.Sleep(3 * time.Second)
	if got := get(); got == nil || len(got.Finalizers) != 0 || len(got.Status.Conditions) != 0 {
		t.Fatalf("a cluster this replica does not hold got finalizers %v and conditions %v", got.Finalizers, got.Status.Conditions)
	}
	if _, connected := members.Health("m1"); connected {
		t.Fatal("connected to a cluster this replica does not hold")
	}
	share.set(true)
	eventually(t, "the cluster taken: Ready with its finalizer", func() bool {
		got := get()
		return got != nil && meta.IsStatusConditionTrue(got.Status.Conditions, clusterv1alpha1.ConditionReady) && len(got.Finalizers) == 1
	})
	share.set(false)
	eventually(t, "the connection given up once the cluster moved away", func() bool {
		_, connected := members.Health("m1")
		return !connected
	})
	if err := c.Delete(ctx, cl); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the leader drains the unjoined cluster it does not hold", func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "m1"}, &clusterv1alpha1.Cluster{}))
	})
}
