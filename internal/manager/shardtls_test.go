package manager

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/testenv"
	"github.com/flotilla-dev/flotilla/internal/worksync"
)

// Replicas given no inventory certificate issue their own from one CA in the control plane:
// each trusts the others' serving certificates, and a replica of another control plane (its
// own CA) is not trusted.
func TestShardReplicasTrustEachOthersSelfIssuedCertificates(t *testing.T) {
	ctx := context.Background()
	_, c := testenv.Start(t)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kube.SystemNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	controlPlane := secrets{c}
	replica := func(store kube.SecretStore, id string) *Options {
		t.Helper()
		o := DefaultOptions()
		o.Shard.Identity, o.Inventory.Address, o.Shard.Address = id, ":8443", "127.0.0.1:8443"
		if err := o.checkShard(); err != nil {
			t.Fatal(err)
		}
		if !o.selfIssuedShardCertificates() {
			t.Fatal("no inventory certificate given, yet not self-issued")
		}
		cleanup, err := o.issueShardCertificate(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cleanup)
		return &o
	}
	leader, follower := replica(controlPlane, "manager-a"), replica(controlPlane, "manager-b")
	// Another control plane, with a CA of its own.
	stranger := replica(secrets{fake.NewClientBuilder().WithScheme(kube.Scheme).Build()}, "manager-c")

	cert, err := tls.LoadX509KeyPair(leader.Inventory.CertFile, leader.Inventory.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("works")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	address := strings.TrimPrefix(srv.URL, "https://")
	get := func(o *Options) error {
		remote, err := worksync.PeerConfig{Credentials: &rest.Config{}, CAFile: o.Shard.PeerCAFile, ServerName: o.Shard.PeerServerName}.Dial(address)
		if err != nil {
			return err
		}
		resp, err := remote.Client.Get(remote.Base + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(follower); err != nil {
		t.Fatalf("a replica of the same control plane does not trust the leader's certificate: %v", err)
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: kube.SystemNamespace, Name: ShardCASecret}, secret); err != nil || secret.Type != corev1.SecretTypeTLS {
		t.Fatalf("the shard CA Secret: %v (type %q)", err, secret.Type)
	}
	if err := get(stranger); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a replica with another CA reached the leader: %v", err)
	}
}

// A peer CA or server name without an inventory certificate is refused, naming the flags.
func TestSelfIssuedShardCertificatesTakeNoPeerCA(t *testing.T) {
	o := DefaultOptions()
	o.Shard.Identity, o.Inventory.Address, o.Shard.PeerCAFile = "manager-a", "10.0.0.5:8443", "/etc/ca.crt"
	if err := o.checkShard(); err == nil || !strings.Contains(err.Error(), "--shard-peer-ca-file") || !strings.Contains(err.Error(), "--inventory-tls-cert-file") {
		t.Fatalf("error = %v, want it to name --shard-peer-ca-file and --inventory-tls-cert-file", err)
	}
}
