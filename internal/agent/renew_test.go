package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/luavm"
	"github.com/flotilla-dev/flotilla/internal/pull"
	"github.com/flotilla-dev/flotilla/internal/registration"
	"github.com/flotilla-dev/flotilla/internal/testenv"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// secrets adapts a client to pull.SecretStore.
type secrets struct{ client.Client }

func (s secrets) Get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	return s.Client.Get(ctx, key, obj)
}
func (s secrets) Create(ctx context.Context, obj client.Object) error {
	return s.Client.Create(ctx, obj)
}

// An agent whose certificate has less than a third of its life left renews it on its own
// heartbeats, against a real control plane: it keeps the new key and certificate where it
// keeps its identity, and the Cluster records the new certificate.
func TestTheAgentRenewsItsCertificateBeforeItExpires(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, c := testenv.Start(t)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kube.SystemNamespace}}); err != nil {
		t.Fatal(err)
	}
	_, tok, _, err := registration.JoinPull(ctx, c, registration.PullJoinOptions{Name: "edge"})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pull.LoadCA(ctx, secrets{c})
	if err != nil {
		t.Fatal(err)
	}
	// Certificates of 2 minutes, backdated 5: each has less than a third of its life left.
	srv := httptest.NewUnstartedServer((&pull.Server{Client: c, Reader: c, Works: workstore.New(), CA: ca,
		Members: clustercache.New(clustercache.DefaultOptions()), CertificateTTL: 2 * time.Minute}).Handler())
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	dir := t.TempDir()
	a := &Agent{opts: Options{Cluster: "edge", ControlPlane: srv.URL, BootstrapToken: tok.String(), HeartbeatInterval: 200 * time.Millisecond},
		id: &identity{store: fileStore{dir: dir}}, journal: &journal{},
		interpreters: interpret.NewRegistry(luavm.Limits{}), customizations: map[string]bool{}}
	a.anonymous, a.client = controlPlaneClients(&tls.Config{RootCAs: roots}, a.id.certificate)
	if err := a.register(ctx); err != nil {
		t.Fatal(err)
	}
	first := a.id.leaf()
	go a.heartbeats(ctx, clustercache.New(clustercache.DefaultOptions()))

	var renewed *x509.Certificate
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if l := a.id.leaf(); l.SerialNumber.Cmp(first.SerialNumber) != 0 {
			renewed = l
			break
		}
	}
	cancel()
	if renewed == nil {
		t.Fatal("the agent did not renew a certificate with less than a third of its life left")
	}
	if renewed.PublicKey.(*ecdsa.PublicKey).Equal(first.PublicKey) {
		t.Error("the renewed certificate is for the old key; want a new key")
	}
	kept := &identity{store: fileStore{dir: dir}}
	if ok, err := kept.load(context.Background(), time.Now()); err != nil || !ok || kept.leaf().SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Errorf("the state directory holds %v (%v, %v); want a renewed certificate", kept.leaf(), ok, err)
	}
	cl := &clusterv1alpha1.Cluster{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "edge"}, cl); err != nil || cl.Status.Agent == nil || cl.Status.Agent.CertificateSHA256 == pull.Fingerprint(first) {
		t.Errorf("the Cluster still records the first certificate: %+v (%v)", cl.Status.Agent, err)
	}
}
