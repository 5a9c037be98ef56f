package manager

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/kube"
)

// ShardCASecret holds the CA that signs the replicas' own inventory serving certificates when
// a sharded replica is given none (--inventory-tls-cert-file). It signs nothing else, and the
// replicas trust it only for one another.
const ShardCASecret = "flotilla-shard-ca"

// shardCertificateLife bounds a self-issued serving certificate; a replica issues a new one
// at every start, so only a process running for a year outlives it.
const shardCertificateLife = 365 * 24 * time.Hour

// issueShardCertificate gives this replica a serving certificate for the host of its
// --shard-address, signed by the shard CA (made on the first start), and trusts that CA for
// its peers: a sharded install needs no certificate of its own. The files live in a private
// temporary directory; the returned func removes it.
func (o *Options) issueShardCertificate(ctx context.Context, store kube.SecretStore) (func(), error) {
	caCert, caKey, err := kube.LoadOrMakeCA(ctx, store, ShardCASecret)
	if err != nil {
		return nil, fmt.Errorf("--shard-identity without --inventory-tls-cert-file: %w", err)
	}
	host, _, err := net.SplitHostPort(o.Shard.Address)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := kube.IssueServingCertificate(caCert, caKey, o.Shard.Identity, host, shardCertificateLife)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "flotilla-shard-tls-")
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"tls.crt": certPEM,
		"tls.key": keyPEM,
		"ca.crt":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	o.Inventory.CertFile, o.Inventory.KeyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	o.Shard.PeerCAFile = filepath.Join(dir, "ca.crt")
	return func() { _ = os.RemoveAll(dir) }, nil
}

// secrets is a client as a kube.SecretStore.
type secrets struct{ c client.Client }

func (s secrets) Get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	return s.c.Get(ctx, key, obj)
}

func (s secrets) Create(ctx context.Context, obj client.Object) error { return s.c.Create(ctx, obj) }
