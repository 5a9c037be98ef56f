package audit

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func event(user, verb string, code int32, at time.Time, name string) auditv1.Event {
	return auditv1.Event{
		Stage: auditv1.StageResponseComplete, Verb: verb, User: authnv1.UserInfo{Username: user},
		ObjectRef:      &auditv1.ObjectReference{APIGroup: "apps", Resource: "deployments", Namespace: "a", Name: name},
		ResponseStatus: &metav1.Status{Code: code}, StageTimestamp: metav1.NewMicroTime(at),
	}
}

var web = Ref{Group: "apps", Resource: "deployments", Namespace: "a", Name: "web"}

func TestLogKeepsSuccessfulWritesOnly(t *testing.T) {
	l := NewLog(10)
	get := event("gina", "get", 200, t0, "web")
	failed := event("fred", "update", 409, t0, "web")
	status := event("sam", "patch", 200, t0, "web")
	status.ObjectRef.Subresource = "status"
	started := event("ann", "update", 200, t0, "web")
	started.Stage = auditv1.StageRequestReceived
	for _, ev := range []auditv1.Event{get, failed, status, started} {
		if l.Add(&ev) {
			t.Errorf("kept %s %s (stage %s, code %d)", ev.User.Username, ev.Verb, ev.Stage, ev.ResponseStatus.Code)
		}
	}
	if w, ok := l.Last(web, time.Time{}); ok {
		t.Fatalf("Last = %+v, want nothing", w)
	}
	ok := event("alice", "patch", 200, t0, "web")
	if !l.Add(&ok) {
		t.Fatal("a successful patch was not kept")
	}
	if w, _ := l.Last(web, time.Time{}); w.User != "alice" || w.Verb != "patch" {
		t.Fatalf("Last = %+v, want alice's patch", w)
	}
}

func TestLastIsTheNewestWriteNotAfterATime(t *testing.T) {
	l := NewLog(10)
	// Out of order, as batches can arrive.
	for _, ev := range []auditv1.Event{
		event("carol", "update", 200, t0.Add(2*time.Second), "web"),
		event("alice", "update", 200, t0, "web"),
		event("bob", "update", 200, t0.Add(time.Second), "web"),
	} {
		l.Add(&ev)
	}
	for _, c := range []struct {
		notAfter time.Time
		want     string
	}{
		{t0.Add(-time.Second), ""},
		{t0, "alice"},
		{t0.Add(1500 * time.Millisecond), "bob"},
		{t0.Add(time.Hour), "carol"},
		{time.Time{}, "carol"},
	} {
		w, _ := l.Last(web, c.notAfter)
		if w.User != c.want {
			t.Errorf("Last(notAfter %s) = %q, want %q", c.notAfter.Format(time.TimeOnly), w.User, c.want)
		}
	}
}

func TestImpersonatedWritesNameWhoTheyWereMadeAs(t *testing.T) {
	l := NewLog(10)
	ev := event("system:flotilla:controller-manager", "patch", 201, t0, "web")
	ev.ImpersonatedUser = &authnv1.UserInfo{Username: "flotilla:application:a:shop"}
	l.Add(&ev)
	if w, _ := l.Last(web, time.Time{}); w.User != "flotilla:application:a:shop" {
		t.Fatalf("Last = %+v", w)
	}
}

func TestLogIsBounded(t *testing.T) {
	l := NewLog(3)
	for i, name := range []string{"a", "b", "c", "d"} {
		ev := event("alice", "create", 201, t0.Add(time.Duration(i)*time.Second), name)
		l.Add(&ev)
	}
	if _, ok := l.Last(Ref{Group: "apps", Resource: "deployments", Namespace: "a", Name: "a"}, time.Time{}); ok {
		t.Error("the least recently written object was kept past the bound")
	}
	if _, ok := l.Last(Ref{Group: "apps", Resource: "deployments", Namespace: "a", Name: "d"}, time.Time{}); !ok {
		t.Error("the newest object was dropped")
	}
	for i := range 3 * writesPerObject {
		ev := event("bob", "update", 200, t0.Add(time.Duration(i)*time.Second), "d")
		l.Add(&ev)
	}
	if n := len(l.objects[Ref{Group: "apps", Resource: "deployments", Namespace: "a", Name: "d"}].Value.(*entry).writes); n != writesPerObject {
		t.Errorf("%d writes kept of one object, want %d", n, writesPerObject)
	}
}

// The handler takes batches only from the configured client certificate.
func TestHandlerTakesEventsOnlyFromTheWebhookCertificate(t *testing.T) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	clientCert := func(cn string) tls.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, _ := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	l := NewLog(10)
	srv := httptest.NewUnstartedServer(l.Handler("system:flotilla:audit-webhook"))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	srv.TLS = &tls.Config{ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.StartTLS()
	defer srv.Close()
	body, _ := json.Marshal(auditv1.EventList{Items: []auditv1.Event{event("alice", "update", 200, t0, "web")}})
	post := func(certs ...tls.Certificate) int {
		tr := srv.Client().Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.Certificates = certs
		resp, err := (&http.Client{Transport: tr}).Post(srv.URL+Path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(); code != http.StatusForbidden {
		t.Errorf("without a certificate: %d, want 403", code)
	}
	if code := post(clientCert("mallory")); code != http.StatusForbidden {
		t.Errorf("a user's certificate: %d, want 403", code)
	}
	if _, ok := l.Last(web, time.Time{}); ok {
		t.Fatal("a refused batch was kept")
	}
	if code := post(clientCert("system:flotilla:audit-webhook")); code != http.StatusOK {
		t.Fatalf("the webhook's certificate: %d, want 200", code)
	}
	if w, _ := l.Last(web, time.Time{}); w.User != "alice" {
		t.Fatalf("Last = %+v", w)
	}
}

// The policy the control plane runs with decodes as an audit.k8s.io/v1 Policy, records the
// heartbeat and writes, and skips Flotilla's own manager.
func TestPolicyIsAValidAuditPolicy(t *testing.T) {
	var p auditv1.Policy
	if err := yaml.UnmarshalStrict(Policy, &p); err != nil {
		t.Fatalf("policy.yaml: %v", err)
	}
	if p.Kind != "Policy" || p.APIVersion != "audit.k8s.io/v1" || len(p.Rules) < 3 {
		t.Fatalf("policy.yaml: %s %s with %d rules", p.APIVersion, p.Kind, len(p.Rules))
	}
	first := p.Rules[0]
	if first.Level != auditv1.LevelMetadata || len(first.Resources) != 1 || first.Resources[0].ResourceNames[0] != HeartbeatName || first.Namespaces[0] != HeartbeatNamespace {
		t.Errorf("the first rule must audit the heartbeat: %+v", first)
	}
	last := p.Rules[len(p.Rules)-1]
	if last.Level != auditv1.LevelNone {
		t.Errorf("the last rule must drop everything else: %+v", last)
	}
}
