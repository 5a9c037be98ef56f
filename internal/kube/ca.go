package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretStore reads and creates Secrets of the system namespace.
type SecretStore interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object) error
	Create(ctx context.Context, obj client.Object) error
}

// LoadOrMakeCA reads the CA kept in the Secret name of the system namespace, making it on the
// first start (ECDSA P-256, valid 10 years, its common name the Secret's name). Replicas that
// start together agree on the one created first. Each CA has one purpose, told by its name.
func LoadOrMakeCA(ctx context.Context, c SecretStore, name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key := client.ObjectKey{Namespace: SystemNamespace, Name: name}
	s := &corev1.Secret{}
	err := c.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		s, err = newCASecret(name)
		if err != nil {
			return nil, nil, err
		}
		if err = c.Create(ctx, s); apierrors.IsAlreadyExists(err) { // another replica made it first
			err = c.Get(ctx, key, s)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("the CA in Secret %s/%s: %w", key.Namespace, key.Name, err)
	}
	cert, caKey, err := parseCA(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, nil, fmt.Errorf("the CA in Secret %s/%s: %w", key.Namespace, key.Name, err)
	}
	return cert, caKey, nil
}

// IssueServingCertificate issues a serving certificate for host (an IP address or a DNS name),
// named commonName and valid for life but never past the CA, with a new key. It returns both
// PEM-encoded.
func IssueServingCertificate(caCert *x509.Certificate, caKey *ecdsa.PrivateKey, commonName, host string, life time.Duration) (certPEM, keyPEM []byte, err error) {
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: CertificateSerial(),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(life),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if caCert.NotAfter.Before(tmpl.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	return sign(tmpl, caCert, caKey)
}

// sign makes a new key and the certificate of tmpl for it, signed by parent (tmpl itself when
// parent is nil: self-signed with the new key).
func sign(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if parent == nil {
		parent, parentKey = tmpl, k
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func newCASecret(name string) (*corev1.Secret, error) {
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          CertificateSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	certPEM, keyPEM, err := sign(tmpl, nil, nil)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	}, nil
}

func parseCA(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("it holds no PEM certificate and key")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// CertificateSerial is a random serial number for a certificate.
func CertificateSerial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}
