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

	"github.com/flotilla-dev/flotilla/internal/pull"
)

// The agent's identity lives in its state directory: key.pem (made here, never sent) and
// cert.pem (what the control plane signed for it).
const (
	keyFile  = "key.pem"
	certFile = "cert.pem"
)

// identity is the agent's current client certificate, swapped in place on renewal.
type identity struct {
	dir     string
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
func (id *identity) load(now time.Time) (bool, error) {
	certPEM, err := os.ReadFile(filepath.Join(id.dir, certFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(id.dir, keyFile))
	if err != nil {
		return false, err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("%s: %w (delete it and register again with a new bootstrap token)", id.dir, err)
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

// save writes key and certificate (0600, key first) and makes them current.
func (id *identity) save(k *ecdsa.PrivateKey, certPEM []byte) error {
	keyDER, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("the control plane's certificate does not match the agent's key: %w", err)
	}
	if err := os.MkdirAll(id.dir, 0o700); err != nil {
		return err
	}
	for name, data := range map[string][]byte{keyFile + ".new": keyPEM, certFile + ".new": certPEM} {
		if err := os.WriteFile(filepath.Join(id.dir, name), data, 0o600); err != nil {
			return err
		}
	}
	if err := os.Rename(filepath.Join(id.dir, keyFile+".new"), filepath.Join(id.dir, keyFile)); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(id.dir, certFile+".new"), filepath.Join(id.dir, certFile)); err != nil {
		return err
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
	return a.id.save(k, []byte(resp.Certificate))
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
	return a.id.save(k, []byte(resp.Certificate))
}

// post sends v as JSON and decodes the answer into out; a refusal is an error with the
// control plane's reason.
func (a *Agent) post(ctx context.Context, hc *http.Client, path string, v, out any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.opts.ControlPlane+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &refusal{status: resp.StatusCode, msg: strings.TrimSpace(string(msg))}
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(out)
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
