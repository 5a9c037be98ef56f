package pull

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flotilla-dev/flotilla/internal/kube"
)

// CASecretName is the Secret in flotilla-system holding the CA that signs agents' client
// certificates. It signs nothing else, and nothing else is trusted on the agent endpoint.
const CASecretName = "flotilla-agent-ca"

// IdentityPrefix starts the user name of an agent: flotilla:agent:CLUSTER.
const IdentityPrefix = "flotilla:agent:"

// DefaultCertificateTTL is how long an agent's certificate is valid; the agent renews it at
// two thirds of that.
const DefaultCertificateTTL = 30 * 24 * time.Hour

// MaxCertificateTTL bounds an agent certificate's life, so a stolen key stops working in time.
const MaxCertificateTTL = 90 * 24 * time.Hour

// CA signs and verifies agents' client certificates.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
	pool *x509.CertPool
}

// SecretStore reads and creates Secrets of flotilla-system.
type SecretStore = kube.SecretStore

// LoadCA reads the agents' CA from its Secret, making it on the first start.
func LoadCA(ctx context.Context, c SecretStore) (*CA, error) {
	cert, key, err := kube.LoadOrMakeCA(ctx, c, CASecretName)
	if err != nil {
		return nil, fmt.Errorf("the agents' CA: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{cert: cert, key: key, pool: pool}, nil
}

// Sign issues a client certificate for cluster's agent to the key of csrPEM. The CSR's own
// subject and extensions are ignored: the name comes from the redeemed token, never from the
// caller.
func (ca *CA) Sign(csrPEM []byte, cluster string, ttl time.Duration, now time.Time) ([]byte, *x509.Certificate, error) {
	b, _ := pem.Decode(csrPEM)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, nil, errors.New("csr is not a PEM CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, nil, errors.New("csr does not parse as a certificate request")
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, nil, errors.New("csr is not signed by its own key")
	}
	if ttl <= 0 {
		ttl = DefaultCertificateTTL
	}
	tmpl := &x509.Certificate{
		SerialNumber: kube.CertificateSerial(),
		Subject:      pkix.Name{CommonName: IdentityPrefix + cluster},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(ttl),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, csr.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert, nil
}

// ClusterOf verifies cert against the CA and returns the cluster it names.
func (ca *CA) ClusterOf(cert *x509.Certificate, now time.Time) (string, error) {
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.pool, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return "", fmt.Errorf("the client certificate is not an agent certificate of this control plane (%v); register with a bootstrap token", err)
	}
	name, ok := strings.CutPrefix(cert.Subject.CommonName, IdentityPrefix)
	if !ok || name == "" {
		return "", errors.New("the client certificate names no agent")
	}
	return name, nil
}

// Fingerprint is the SHA-256 of a certificate, in hex.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return hex.EncodeToString(sum[:])
}
