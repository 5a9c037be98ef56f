package localfleet

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the set of files every component of the fleet shares. One CA signs every serving
// and client certificate: the fleet lives on 127.0.0.1 and belongs to one user.
type pki struct{ dir string }

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

const (
	caCert, caKey           = "ca.crt", "ca.key"
	frontProxyCACert        = "front-proxy-ca.crt"
	frontProxyClientCert    = "front-proxy-client.crt"
	frontProxyClientKey     = "front-proxy-client.key"
	serverCert, serverKey   = "server.crt", "server.key"
	adminCert, adminKey     = "admin.crt", "admin.key"
	managerCert, managerKey = "manager.crt", "manager.key"
	// The control plane's audit webhook presents this to the inventory API.
	auditWebhookCert, auditWebhookKey = "audit-webhook.crt", "audit-webhook.key"
	// etcd has a CA of its own: it accepts any certificate its CA signed, so one shared with
	// user certificates (UserKubeconfig) would let every user read etcd.
	etcdCACert, etcdCAKey           = "etcd-ca.crt", "etcd-ca.key"
	etcdServerCert, etcdServerKey   = "etcd-server.crt", "etcd-server.key"
	etcdClientCert, etcdClientKey   = "etcd-apiserver-client.crt", "etcd-apiserver-client.key"
	serviceAccountKey, serviceAcPub = "sa.key", "sa.pub"
	pkiDoneMarker                   = "complete"
)

// ensure writes the PKI once; later calls keep it so kubeconfigs stay valid across up/down,
// and only add the certificates a newer version needs.
func (p pki) ensure() error {
	if _, err := os.Stat(p.path(pkiDoneMarker)); err == nil {
		return p.ensureIdentities()
	}
	if err := p.ensureCA(); err != nil {
		return err
	}
	return p.ensureIdentities()
}

// auditWebhookUser is the identity the control plane's audit webhook posts events as; the
// control plane grants it nothing.
const auditWebhookUser = "system:flotilla:audit-webhook"

// ensureIdentities issues the certificates of the fleet's own components that are not the
// admin: the controller-manager acts as itself (so admission can tell its writes from a
// user's), and the apiservers reach etcd with a client certificate etcd requires.
func (p pki) ensureIdentities() error {
	if err := p.issueClient(managerCert, managerKey, "system:flotilla:controller-manager", nil); err != nil {
		return err
	}
	if err := p.issueClient(auditWebhookCert, auditWebhookKey, auditWebhookUser, nil); err != nil {
		return err
	}
	return p.ensureEtcd()
}

// ensureEtcd writes etcd's own CA, its serving (and peer) certificate and the apiservers'
// client certificate, once.
func (p pki) ensureEtcd() error {
	if _, err := os.Stat(p.path(etcdClientCert)); err == nil {
		return nil
	}
	ca, signer, err := newCA("flotilla-local-etcd-ca")
	if err != nil {
		return err
	}
	if err := p.writeCert(etcdCACert, ca, etcdCAKey, signer); err != nil {
		return err
	}
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "flotilla-local-etcd"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if err := p.issue(etcdServerCert, etcdServerKey, server, ca, signer); err != nil {
		return err
	}
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-etcd-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return p.issue(etcdClientCert, etcdClientKey, client, ca, signer)
}

// ensureCA writes the CAs and the shared serving, admin and front-proxy certificates.
func (p pki) ensureCA() error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	ca, caSigner, err := newCA("flotilla-local-ca")
	if err != nil {
		return err
	}
	fpCA, fpSigner, err := newCA("flotilla-local-front-proxy-ca")
	if err != nil {
		return err
	}
	if err := p.writeCert(caCert, ca, caKey, caSigner); err != nil {
		return err
	}
	if err := p.writeCert(frontProxyCACert, fpCA, "", nil); err != nil {
		return err
	}
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "flotilla-local-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if err := p.issue(serverCert, serverKey, server, ca, caSigner); err != nil {
		return err
	}
	admin := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "flotilla-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := p.issue(adminCert, adminKey, admin, ca, caSigner); err != nil {
		return err
	}
	fpClient := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "front-proxy-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := p.issue(frontProxyClientCert, frontProxyClientKey, fpClient, fpCA, fpSigner); err != nil {
		return err
	}
	// Service-account tokens are signed with RSA: every Kubernetes client verifies RS256.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	if err := p.writeKey(serviceAccountKey, saKey); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.path(serviceAcPub), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(p.path(pkiDoneMarker), nil, 0o600)
}

func newCA(name string) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func (p pki) issue(certFile, keyFile string, tmpl, ca *x509.Certificate, caSigner crypto.Signer) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().AddDate(10, 0, 0)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caSigner)
	if err != nil {
		return fmt.Errorf("issuing %s: %w", certFile, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	return p.writeCert(certFile, cert, keyFile, key)
}

func (p pki) writeCert(certFile string, cert *x509.Certificate, keyFile string, key crypto.Signer) error {
	if err := os.WriteFile(p.path(certFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		return err
	}
	if keyFile == "" {
		return nil
	}
	return p.writeKey(keyFile, key)
}

func (p pki) writeKey(keyFile string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(p.path(keyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

// loadCA reads the fleet's CA certificate and key.
func (p pki) loadCA() (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(p.path(caCert))
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(p.path(caKey))
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("the fleet CA in %s is damaged: run `flotilla down --purge`", p.dir)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("the fleet CA key in %s is not a signing key", p.dir)
	}
	return cert, signer, nil
}

// issueClient issues a client certificate for user with groups (the apiserver reads the
// groups from the certificate's organizations), unless one with that file name exists.
func (p pki) issueClient(certFile, keyFile, user string, groups []string) error {
	if _, err := os.Stat(p.path(certFile)); err == nil {
		return nil
	}
	ca, signer, err := p.loadCA()
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return p.issue(certFile, keyFile, tmpl, ca, signer)
}
