package worksync

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

const finalizer = "work.flotilla.dev/executor"

type fixedShard struct {
	held         []string
	leader, addr string
	changed      chan struct{}
}

func (f *fixedShard) Held() []string                 { return f.held }
func (f *fixedShard) Leader() (string, string, bool) { return f.leader, f.addr, true }
func (f *fixedShard) Watch() <-chan struct{}         { return f.changed }

func newWork(cluster, name string) *workv1alpha1.Work {
	return &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Namespace: kube.ExecutionNamespacePrefix + cluster, Name: name},
		Spec: workv1alpha1.WorkSpec{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"}}`)}}}},
	}
}

// eventually polls cond for up to 5s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A replica mirrors only its clusters' Works from the leader, and what its executor writes
// (finalizer, status, the finalizer's removal after a deletion) reaches the leader.
func TestRunnerMirrorsHeldClustersAndReportsBack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cp := fakeclient.NewClientBuilder().WithScheme(kube.Scheme).Build()
	leader, mirror := workstore.New(), workstore.New()
	leaderClient, mirrorClient := leader.Client(cp), mirror.Client(cp)
	for _, w := range []*workv1alpha1.Work{newWork("east", "web"), newWork("west", "web")} {
		if err := leaderClient.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	r := &Runner{Ring: &fixedShard{held: []string{"east"}, leader: "me", changed: make(chan struct{})}, Mirror: mirror, Leader: leader, Identity: "me"}
	go func() { _ = r.Start(ctx) }()
	eventually(t, "the mirror holds east's Work only", func() bool { return mirror.Len() == 1 })
	key := client.ObjectKey{Namespace: kube.ExecutionNamespacePrefix + "east", Name: "web"}
	m := &workv1alpha1.Work{}
	if err := mirrorClient.Get(ctx, key, m); err != nil {
		t.Fatal(err)
	}
	controllerutil.AddFinalizer(m, finalizer)
	if err := mirrorClient.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Status.Conditions = []metav1.Condition{{Type: "Applied", Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: metav1.Now()}}
	if err := mirrorClient.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	l := &workv1alpha1.Work{}
	eventually(t, "the leader has the replica's finalizer and status", func() bool {
		return leaderClient.Get(ctx, key, l) == nil && controllerutil.ContainsFinalizer(l, finalizer) && len(l.Status.Conditions) == 1
	})
	if err := leaderClient.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the mirror's copy is deleting", func() bool {
		return mirrorClient.Get(ctx, key, m) == nil && m.DeletionTimestamp != nil
	})
	controllerutil.RemoveFinalizer(m, finalizer)
	if err := mirrorClient.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the leader lets the Work go once the replica finalized it", func() bool { return leaderClient.Get(ctx, key, l) != nil })
	if leader.Len() != 1 {
		t.Fatalf("the leader holds %d Works, want west's", leader.Len())
	}
}

// The Works stream refuses callers without credentials and callers the control plane does not
// allow to write Work status (every team), and serves the controller-manager's identity.
func TestServerServesOnlyTheControllerManager(t *testing.T) {
	leader := workstore.New()
	if err := leader.Client(fakeclient.NewClientBuilder().WithScheme(kube.Scheme).Build()).Create(context.Background(), newWork("east", "web")); err != nil {
		t.Fatal(err)
	}
	kc := fake.NewClientset()
	var mu sync.Mutex
	var asked []authorizationv1.SubjectAccessReviewSpec
	kc.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		mu.Lock()
		asked = append(asked, sar.Spec)
		mu.Unlock()
		sar.Status.Allowed = sar.Spec.User == "system:flotilla:controller-manager"
		return true, sar, nil
	})
	s := &Server{Store: leader, Kube: kc, Leading: func() bool { return true },
		Authenticate: func(r *http.Request) (*Caller, error) {
			if u := r.Header.Get("X-Test-User"); u != "" {
				return &Caller{Name: u}, nil
			}
			return nil, http.ErrNoCookie
		}}
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	hc := srv.Client()
	hc.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the test server's own certificate
	get := func(user string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+FollowPath+"?cluster=east", nil)
		if user != "" {
			req.Header.Set("X-Test-User", user)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := hc.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			var b strings.Builder
			buf := make([]byte, 512)
			n, _ := resp.Body.Read(buf)
			b.Write(buf[:n])
			return resp.StatusCode, b.String()
		}
		var e workstore.Event
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(e.Type) + " " + e.Work.Namespace + "/" + e.Work.Name
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("no credentials: %d, want 401", code)
	}
	if code, body := get("alice"); code != http.StatusForbidden || !strings.Contains(body, "alice may not update works/status") {
		t.Errorf("a team member: %d %q, want 403 naming the permission", code, body)
	}
	if code, body := get("system:flotilla:controller-manager"); code != http.StatusOK || body != "Added flotilla-es-east/web" {
		t.Errorf("the controller-manager: %d %q, want 200 and east's Work", code, body)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range asked {
		if ra := a.ResourceAttributes; ra == nil || ra.Verb != "update" || ra.Resource != "works" || ra.Subresource != "status" {
			t.Errorf("asked the control plane %+v, want update works/status", a.ResourceAttributes)
		}
	}
}

// A report batch that is not JSON, or too large, is refused without echoing what was sent, and
// nothing of it is applied.
func TestServerRefusesBadAndOversizedReports(t *testing.T) {
	leader := workstore.New()
	c := leader.Client(fakeclient.NewClientBuilder().WithScheme(kube.Scheme).Build())
	w := newWork("east", "web")
	if err := c.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	kc := fake.NewClientset()
	kc.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		sar.Status.Allowed = true
		return true, sar, nil
	})
	s := &Server{Store: leader, Kube: kc, Leading: func() bool { return true }, MaxReportBytes: 1024,
		Authenticate: func(*http.Request) (*Caller, error) { return &Caller{Name: "system:flotilla:controller-manager"}, nil }}
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(body string) (int, string) {
		resp, err := http.Post(srv.URL+ReportPath, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := make([]byte, 1024)
		n, _ := resp.Body.Read(b)
		return resp.StatusCode, string(b[:n])
	}
	if code, body := post(`<script>secret-token</script>`); code != http.StatusBadRequest || strings.Contains(body, "secret-token") {
		t.Errorf("not JSON: %d %q, want 400 without the body echoed", code, body)
	}
	big := `[{"namespace":"flotilla-es-east","name":"web","uid":"` + string(w.UID) + `","finalizers":["` + strings.Repeat("x", 2048) + `"]}]`
	if code, body := post(big); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "over 1024 bytes") {
		t.Errorf("oversized: %d %q, want 413 naming the bound", code, body)
	}
	got := &workv1alpha1.Work{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(w), got); err != nil || len(got.Finalizers) != 0 {
		t.Fatalf("a refused report changed the Work: finalizers %v, %v", got.Finalizers, err)
	}
}

// A shard Lease pointing a replica at a server without a certificate of the replicas' CA (a
// redirect to an attacker) gets no request through: the TLS handshake fails before the
// replica's credentials are sent.
func TestARedirectedReplicaSendsNoCredentials(t *testing.T) {
	var sawCredentials atomic.Bool
	attacker := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			sawCredentials.Store(true)
		}
	}))
	defer attacker.Close()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "replicas-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	peers := PeerConfig{Credentials: &rest.Config{BearerToken: "manager-token"}, CAFile: caFile}
	remote, err := peers.Dial(strings.TrimPrefix(attacker.URL, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = remote.Follow(ctx, []string{"east"}, func(workstore.Event) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("following a server outside the replicas' CA: %v, want a certificate error", err)
	}
	if err := remote.Report(ctx, []workstore.Report{{Namespace: "flotilla-es-east", Name: "web"}}); err == nil {
		t.Fatal("reporting to a server outside the replicas' CA succeeded")
	}
	if sawCredentials.Load() {
		t.Fatal("the replica's token reached a server outside the replicas' CA")
	}
}

// A Works stream outlives the server's read and write timeouts: a follower kept listening
// past them still gets the next change, instead of being cut and listing everything again.
// A Work added after the first listing arrives at once, not with the next ping.
func TestAStreamOutlivesTheServersTimeoutsAndDeliversNewWorksAtOnce(t *testing.T) {
	store := workstore.New()
	w := newWork("m1", "first")
	w.Labels = map[string]string{workv1alpha1.ClusterLabel: "m1"}
	if err := store.Client(nil).Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ServeFollow(w, r, store, []string{"m1"})
	}))
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond
	srv.Start()
	defer srv.Close()
	// Ends before the stream's first ping, which would flush a Work held back.
	ctx, cancel := context.WithTimeout(context.Background(), pingEvery*8/10)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+FollowPath, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	next := func() (workstore.Event, error) {
		for {
			var e workstore.Event
			if err := dec.Decode(&e); err != nil || e.Type != "" {
				return e, err
			}
		}
	}
	for e, err := next(); e.Type != workstore.Synced; e, err = next() {
		if err != nil {
			t.Fatalf("reading the first listing: %v", err)
		}
	}
	time.Sleep(time.Second) // five times the server's timeouts
	later := newWork("m1", "later")
	later.Labels = map[string]string{workv1alpha1.ClusterLabel: "m1"}
	if err := store.Client(nil).Create(context.Background(), later); err != nil {
		t.Fatal(err)
	}
	e, err := next()
	if err != nil || e.Work == nil || e.Work.Name != "later" {
		t.Fatalf("after the timeouts passed: %+v, %v; want the new Work on the same stream", e, err)
	}
}
