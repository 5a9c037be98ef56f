package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/flotilla-dev/flotilla/internal/pull"
)

// An endpoint that redirects gets neither the token nor the certificate sent on: the agent
// stops at the redirect with the endpoint's status, and the target is never asked.
func TestTheAgentFollowsNoRedirect(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	defer target.Close()
	redirecting := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()
	roots := x509.NewCertPool()
	roots.AddCert(redirecting.Certificate())
	roots.AddCert(target.Certificate())
	a := &Agent{opts: Options{ControlPlane: redirecting.URL}}
	a.anonymous, a.client = controlPlaneClients(&tls.Config{RootCAs: roots}, func() *tls.Certificate { return nil })

	var ref *refusal
	err := a.post(context.Background(), a.anonymous, pull.RegisterPath, pull.RegisterRequest{Cluster: "edge-1", Token: "abcdef.0123456789abcdef0123456789abcdef"}, &pull.RegisterResponse{})
	if !errors.As(err, &ref) || ref.status != http.StatusTemporaryRedirect {
		t.Errorf("registering at a redirecting endpoint: %v; want refused with 307", err)
	}
	if err := a.get(context.Background(), pull.ClusterPath, &pull.ClusterState{}); !errors.As(err, &ref) || ref.status != http.StatusTemporaryRedirect {
		t.Errorf("asking a redirecting endpoint with the certificate: %v; want refused with 307", err)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect's target was asked %d times; want never", n)
	}
}
