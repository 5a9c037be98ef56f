package agent

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-dev/flotilla/internal/pull"
)

// The agent's identity is its key (made here, never sent) and the certificate the control
// plane signed for it, kept where restarts find them: files in the state directory
// (key.pem, cert.pem), or a Secret in the member (in a Deployment, whose pods come and go).
const (
	keyFile  = "key.pem"
	certFile = "cert.pem"
)

// identityStore keeps the key and certificate; read returns nil, nil when there are none.
type identityStore interface {
	read(ctx context.Context) (certPEM, keyPEM []byte, err error)
	write(ctx context.Context, certPEM, keyPEM []byte) error
	// readSnapshot and writeSnapshot keep the last Works beside the identity (snapshot.go).
	readSnapshot(ctx context.Context) ([]byte, error)
	writeSnapshot(ctx context.Context, data []byte) error
	String() string
}

// fileStore keeps them in a directory, 0600.
type fileStore struct{ dir string }

func (f fileStore) String() string { return f.dir }

func (f fileStore) read(context.Context) ([]byte, []byte, error) {
	certPEM, err := os.ReadFile(filepath.Join(f.dir, certFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(f.dir, keyFile))
	return certPEM, keyPEM, err
}

func (f fileStore) write(_ context.Context, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return err
	}
	for name, data := range map[string][]byte{keyFile + ".new": keyPEM, certFile + ".new": certPEM} {
		if err := os.WriteFile(filepath.Join(f.dir, name), data, 0o600); err != nil {
			return err
		}
	}
	if err := os.Rename(filepath.Join(f.dir, keyFile+".new"), filepath.Join(f.dir, keyFile)); err != nil {
		return err
	}
	return os.Rename(filepath.Join(f.dir, certFile+".new"), filepath.Join(f.dir, certFile))
}

// secretStore keeps them in a Secret of the member (type kubernetes.io/tls).
type secretStore struct {
	kube            kubernetes.Interface
	namespace, name string
}

func (s secretStore) String() string {
	return "Secret " + s.namespace + "/" + s.name + " in the member"
}

func (s secretStore) read(ctx context.Context) ([]byte, []byte, error) {
	sec, err := s.kube.CoreV1().Secrets(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey], nil
}

func (s secretStore) write(ctx context.Context, certPEM, keyPEM []byte) error {
	sec := applycorev1.Secret(s.name, s.namespace).WithType(corev1.SecretTypeTLS).
		WithData(map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM})
	_, err := s.kube.CoreV1().Secrets(s.namespace).Apply(ctx, sec, metav1.ApplyOptions{FieldManager: "flotilla-agent", Force: true})
	return err
}

// identity is the agent's current client certificate, swapped in place on renewal.
type identity struct {
	store   identityStore
	current atomic.Pointer[tls.Certificate]
}

func (id *identity) certificate() *tls.Certificate { return id.current.Load() }

func (id *identity) leaf() *x509.Certificate {
	if c := id.current.Load(); c != nil {
		return c.Leaf
	}
	return nil
}

// load reads the saved identity; false when there is none (or it expired).
func (id *identity) load(ctx context.Context, now time.Time) (bool, error) {
	certPEM, keyPEM, err := id.store.read(ctx)
	if err != nil || certPEM == nil {
		return false, err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("%s: %w (delete it and register again with a new bootstrap token)", id.store, err)
	}
	if !now.Before(c.Leaf.NotAfter) {
		return false, nil
	}
	id.current.Store(&c)
	return true, nil
}

// newKey makes a key and a certificate request for it.
func newKey() (*ecdsa.PrivateKey, []byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "flotilla-agent"}}, k)
	if err != nil {
		return nil, nil, err
	}
	return k, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// save keeps key and certificate and makes them current.
func (id *identity) save(ctx context.Context, k *ecdsa.PrivateKey, certPEM []byte) error {
	keyDER, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("the control plane's certificate does not match the agent's key: %w", err)
	}
	if err := id.store.write(ctx, certPEM, keyPEM); err != nil {
		return fmt.Errorf("keeping the agent's identity in %s: %w", id.store, err)
	}
	id.current.Store(&c)
	return nil
}

// register redeems the bootstrap token for a certificate.
func (a *Agent) register(ctx context.Context) error {
	k, csr, err := newKey()
	if err != nil {
		return err
	}
	var resp pull.RegisterResponse
	if err := a.post(ctx, a.anonymous, pull.RegisterPath, pull.RegisterRequest{Cluster: a.opts.Cluster, Token: a.opts.BootstrapToken, CSR: string(csr)}, &resp); err != nil {
		return fmt.Errorf("registering cluster %s: %w", a.opts.Cluster, err)
	}
	return a.id.save(ctx, k, []byte(resp.Certificate))
}

// renew trades the current certificate for one to a new key.
func (a *Agent) renew(ctx context.Context) error {
	k, csr, err := newKey()
	if err != nil {
		return err
	}
	var resp pull.RegisterResponse
	if err := a.post(ctx, a.client, pull.RenewPath, pull.RenewRequest{CSR: string(csr)}, &resp); err != nil {
		return err
	}
	if err := a.id.save(ctx, k, []byte(resp.Certificate)); err != nil {
		return err
	}
	// New connections present the renewed certificate; the control plane accepts the old one
	// until it sees the new one, so open ones (the Works stream) go on meanwhile.
	if t, ok := a.client.Transport.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
	return nil
}

// post sends v as JSON over hc and decodes the answer into out; a refusal is an error with
// the control plane's reason.
func (a *Agent) post(ctx context.Context, hc *http.Client, path string, v, out any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return a.call(ctx, hc, http.MethodPost, path, bytes.NewReader(body), out, 4<<20)
}

// get reads path's JSON answer into out with the agent's certificate.
func (a *Agent) get(ctx context.Context, path string, out any) error {
	return a.call(ctx, a.client, http.MethodGet, path, nil, out, 64<<20)
}

func (a *Agent) call(ctx context.Context, hc *http.Client, method, path string, body io.Reader, out any, limit int64) error {
	req, err := http.NewRequestWithContext(ctx, method, a.opts.ControlPlane+path, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &refusal{status: resp.StatusCode, msg: strings.TrimSpace(string(msg))}
	}
	return json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(out)
}

// refusal is the control plane's answer other than 200.
type refusal struct {
	status int
	msg    string
}

func (r *refusal) Error() string {
	return fmt.Sprintf("the control plane refused (%d): %s", r.status, r.msg)
}

// revoked says whether the control plane no longer accepts this agent's certificate.
func revoked(err error) bool {
	var r *refusal
	return errors.As(err, &r) && (r.status == http.StatusUnauthorized || r.status == http.StatusForbidden)
}
