package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis"
	"github.com/flotilla-dev/flotilla/internal/cluster"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/shard"
	"github.com/flotilla-dev/flotilla/internal/workstore"
	"github.com/flotilla-dev/flotilla/internal/worksync"
)

// Shard Leases: a replica that stops renewing for shardLeaseDuration loses its clusters.
const (
	shardLeaseDuration = 15 * time.Second
	shardRenewPeriod   = 2 * time.Second
	// Replicas started together (a rollout, a restart of all) come up within a few seconds of
	// each other: each waits this long before its first claim, so they split at once.
	shardJoinWait = 3 * shardRenewPeriod
)

// checkShard checks the sharding flags and fills their defaults; errors name the flag.
func (o *Options) checkShard() error {
	if err := shard.ValidateIdentity(o.Shard.Identity); err != nil {
		return err
	}
	if !o.LeaderElection {
		return errors.New("--shard-identity needs --leader-elect: the leader runs the control-plane-wide controllers and keeps the Works")
	}
	if o.Inventory.Address == "" {
		return errors.New("--shard-identity needs --inventory-bind-address: the leader serves its Works to the other replicas there")
	}
	if o.Shard.Address == "" {
		o.Shard.Address = o.Inventory.Address
	}
	if host, _, err := net.SplitHostPort(o.Shard.Address); err != nil || host == "" || host == "0.0.0.0" || host == "::" {
		return fmt.Errorf("--shard-address %q: give the host:port other replicas reach this one's inventory address at, for example $(POD_IP):8443", o.Shard.Address)
	}
	if o.selfIssuedShardCertificates() {
		if o.Shard.PeerCAFile != "" || o.Shard.PeerServerName != "" {
			return errors.New("--shard-peer-ca-file and --shard-peer-server-name need --inventory-tls-cert-file: without it each replica issues its own serving certificate from the Secret " + ShardCASecret + " and trusts only that CA for its peers")
		}
		return nil
	}
	if o.Shard.PeerCAFile == "" {
		o.Shard.PeerCAFile = o.Inventory.ClientCAFile
	}
	if o.Shard.PeerCAFile == "" {
		return errors.New("--shard-identity needs --shard-peer-ca-file (or --inventory-client-ca-file): the CA of the replicas' inventory serving certificates")
	}
	return nil
}

// selfIssuedShardCertificates: a sharded replica given no inventory certificate issues its own.
func (o *Options) selfIssuedShardCertificates() bool {
	return o.Inventory.CertFile == "" && o.Inventory.KeyFile == ""
}

// shardLeaderLock is the leader election Lease held under this replica's identity.
func shardLeaderLock(cfg *rest.Config, name, identity string) (resourcelock.Interface, error) {
	lc := rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	lc.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(lc)
	if err != nil {
		return nil, err
	}
	return resourcelock.New(resourcelock.LeasesResourceLock, kube.SystemNamespace, name, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: identity})
}

// startShard adds the shard ring and the Works follower; it returns the ring, the server of
// this replica's Works (served while it leads) and the mirror its executor applies.
func (o *Options) startShard(mgr ctrl.Manager, cfg *rest.Config, works *workstore.Store) (*shard.Ring, *worksync.Server, *workstore.Store, error) {
	direct, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return nil, nil, nil, err
	}
	ring := &shard.Ring{Client: direct, Clusters: mgr.GetClient(), Namespace: kube.SystemNamespace, LeaderLease: o.LeaderElectionID,
		Identity: o.Shard.Identity, Address: o.Shard.Address, LeaseDuration: shardLeaseDuration, RenewPeriod: shardRenewPeriod, JoinWait: shardJoinWait}
	if err := mgr.Add(ring); err != nil {
		return nil, nil, nil, err
	}
	mirror := workstore.New()
	runner := &worksync.Runner{Ring: ring, Mirror: mirror, Leader: works, Identity: o.Shard.Identity,
		Peers: worksync.PeerConfig{Credentials: cfg, CAFile: o.Shard.PeerCAFile, ServerName: o.Shard.PeerServerName}}
	if err := mgr.Add(runner); err != nil {
		return nil, nil, nil, err
	}
	return ring, &worksync.Server{Store: works, Leading: leading(mgr)}, mirror, nil
}

// leading says whether this replica has been elected.
func leading(mgr ctrl.Manager) func() bool {
	elected := mgr.Elected()
	return func() bool {
		select {
		case <-elected:
			return true
		default:
			return false
		}
	}
}

// memberClients reaches members for analysis Jobs on the leader: through this replica's
// connection to a cluster it holds, else with a client of its own from the Cluster's
// credentials (no informers, no probes).
type memberClients struct {
	cache            *clustercache.Cache
	reader           client.Reader
	allowExecPlugins []string

	mu      sync.Mutex
	clients map[string]memberClient
}

type memberClient struct {
	fingerprint string
	clientset   kubernetes.Interface
}

func (m *memberClients) Clientset(name string) (kubernetes.Interface, error) {
	if cs, err := (analysis.CacheMembers{Cache: m.cache}).Clientset(name); err == nil {
		return cs, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := &clusterv1alpha1.Cluster{}
	if err := m.reader.Get(ctx, client.ObjectKey{Name: name}, cl); err != nil {
		return nil, err
	}
	cfg, fingerprint, err := cluster.MemberConfig(ctx, m.reader, cl, m.allowExecPlugins)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.clients[name]; ok && c.fingerprint == fingerprint {
		return c.clientset, nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if m.clients == nil {
		m.clients = map[string]memberClient{}
	}
	m.clients[name] = memberClient{fingerprint: fingerprint, clientset: cs}
	return cs, nil
}
