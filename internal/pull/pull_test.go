package pull_test

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
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/customization"
	"github.com/flotilla-dev/flotilla/internal/history"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/pull"
	"github.com/flotilla-dev/flotilla/internal/registration"
	"github.com/flotilla-dev/flotilla/internal/testenv"
	"github.com/flotilla-dev/flotilla/internal/workstore"
	"github.com/flotilla-dev/flotilla/internal/worksync"
)

// secretStore adapts a client to pull.SecretStore.
type secretStore struct{ c client.Client }

func (s secretStore) Get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	return s.c.Get(ctx, key, obj)
}
func (s secretStore) Create(ctx context.Context, obj client.Object) error {
	return s.c.Create(ctx, obj)
}

type endpoint struct {
	url     string
	roots   *x509.CertPool
	store   *workstore.Store
	members *clustercache.Cache
	history *records
}

// records keeps what the endpoint appends to the history.
type records struct {
	mu   sync.Mutex
	recs []history.Record
}

func (r *records) Append(_ context.Context, recs ...history.Record) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, recs...)
	return len(recs), nil
}

func (r *records) all() []history.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs)
}

func start(t *testing.T, c client.Client, now func() time.Time) *endpoint {
	t.Helper()
	ca, err := pull.LoadCA(context.Background(), secretStore{c})
	if err != nil {
		t.Fatal(err)
	}
	e := &endpoint{store: workstore.New(), members: clustercache.New(clustercache.DefaultOptions()), history: &records{}}
	srv := httptest.NewUnstartedServer((&pull.Server{Client: c, Reader: c, Works: e.store, CA: ca, Members: e.members, Now: now, History: e.history}).Handler())
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	e.url = srv.URL
	e.roots = x509.NewCertPool()
	e.roots.AddCert(srv.Certificate())
	return e
}

func (e *endpoint) client(cert *tls.Certificate) *http.Client {
	tc := &tls.Config{RootCAs: e.roots}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
}

// register sends a registration and returns the certificate, or the refusal's status and text.
func (e *endpoint) register(t *testing.T, cluster, token string) (*tls.Certificate, int, string) {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	// The agent asks for system:masters; the control plane must not care.
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}}, k)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(pull.RegisterRequest{Cluster: cluster, Token: token,
		CSR: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))})
	resp, err := e.client(nil).Post(e.url+pull.RegisterPath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, string(raw)
	}
	var out pull.RegisterResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(k)
	cert, err := tls.X509KeyPair([]byte(out.Certificate), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return &cert, http.StatusOK, ""
}

func do(t *testing.T, hc *http.Client, method, url string, body any) (int, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, r)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(raw)
}

func work(cluster, name string) *workv1alpha1.Work {
	return &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Namespace: kube.ExecutionNamespacePrefix + cluster, Name: name,
			Labels: map[string]string{workv1alpha1.ClusterLabel: cluster}},
		Spec: workv1alpha1.WorkSpec{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"` + name + `","namespace":"default"},"stringData":{"k":"` + cluster + `"}}`)}}}},
	}
}

// followOnce reads the Works stream until Synced and returns the Works it named.
func followOnce(t *testing.T, hc *http.Client, url string) (int, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	var names []string
	dec := json.NewDecoder(resp.Body)
	for {
		var e workstore.Event
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		switch e.Type {
		case workstore.Added:
			names = append(names, e.Work.Namespace+"/"+e.Work.Name)
		case workstore.Synced:
			return http.StatusOK, names
		}
	}
}

func TestAnAgentRegistersOnceAndReachesOnlyItsOwnCluster(t *testing.T) {
	_, c := testenv.Start(t)
	ctx := context.Background()
	clock := time.Now()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kube.SystemNamespace}}); err != nil {
		t.Fatal(err)
	}
	e := start(t, c, func() time.Time { return clock })

	join := func(name string, ttl time.Duration) string {
		_, tok, _, err := registration.JoinPull(ctx, c, registration.PullJoinOptions{Name: name, TokenTTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return tok.String()
	}
	tokA, tokB := join("edge-a", time.Hour), join("edge-b", time.Hour)
	for _, w := range []*workv1alpha1.Work{work("edge-a", "app"), work("edge-b", "app"), work("edge-b", "other")} {
		if err := e.store.Client(c).Create(ctx, w); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("RefusalsNameWhyAndEchoNoToken", func(t *testing.T) {
		for _, tc := range []struct {
			name, cluster, token string
			status               int
			says                 string
		}{
			{"another cluster's token", "edge-a", tokB, http.StatusForbidden, "registers cluster edge-b, not edge-a"},
			{"not a token", "edge-a", "hello", http.StatusBadRequest, "not ID.SECRET"},
			{"a made-up token", "edge-a", "abcdef.0123456789abcdef0123456789abcdef", http.StatusForbidden, "not known"},
			{"no cluster", "", tokA, http.StatusBadRequest, "cluster:"},
			{"a cluster that cannot be a name", "<b>edge-a</b>\x1b[2J", tokA, http.StatusBadRequest, "a DNS label"},
		} {
			_, status, msg := e.register(t, tc.cluster, tc.token)
			if status != tc.status || !strings.Contains(msg, tc.says) {
				t.Errorf("%s: %d %q; want %d saying %q", tc.name, status, msg, tc.status, tc.says)
			}
			if strings.Contains(msg, strings.SplitN(tokA, ".", 2)[1]) || strings.Contains(msg, strings.SplitN(tokB, ".", 2)[1]) || strings.Contains(msg, "<b>") {
				t.Errorf("%s: the refusal echoes a token secret: %q", tc.name, msg)
			}
		}
	})

	certA, status, msg := e.register(t, "edge-a", tokA)
	if status != http.StatusOK {
		t.Fatalf("registering edge-a: %d %s", status, msg)
	}
	if cn := certA.Leaf.Subject.CommonName; cn != "flotilla:agent:edge-a" || len(certA.Leaf.Subject.Organization) != 0 {
		t.Fatalf("the certificate names %q %v; want flotilla:agent:edge-a and no groups, whatever the CSR asked", cn, certA.Leaf.Subject.Organization)
	}
	if _, status, msg := e.register(t, "edge-a", tokA); status != http.StatusForbidden || !strings.Contains(msg, "not known") {
		t.Errorf("a token used twice: %d %q; want 403, not known", status, msg)
	}
	cl := &clusterv1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: "edge-a"}, cl); err != nil || cl.Status.Agent == nil || cl.Status.Agent.CertificateSHA256 != pull.Fingerprint(certA.Leaf) {
		t.Fatalf("the Cluster does not record the agent's certificate: %+v (%v)", cl.Status.Agent, err)
	}

	agentA := e.client(certA)
	t.Run("OnlyItsOwnWorks", func(t *testing.T) {
		if status, names := followOnce(t, agentA, e.url+worksync.FollowPath+"?cluster=edge-a"); status != http.StatusOK || len(names) != 1 || names[0] != kube.ExecutionNamespacePrefix+"edge-a/app" {
			t.Errorf("following edge-a: %d %v; want only its one Work", status, names)
		}
		if status, _ := followOnce(t, agentA, e.url+worksync.FollowPath+"?cluster=edge-a&cluster=edge-b"); status != http.StatusForbidden {
			t.Errorf("following edge-b with edge-a's certificate: %d; want 403", status)
		}
		if status, _ := followOnce(t, agentA, e.url+worksync.FollowPath); status != http.StatusOK {
			t.Errorf("following without naming the cluster: %d; want its own Works", status)
		}
		other := workstore.Report{Namespace: kube.ExecutionNamespacePrefix + "edge-b", Name: "app", Finalizers: nil}
		if status, msg := do(t, agentA, http.MethodPost, e.url+worksync.ReportPath, []workstore.Report{other}); status != http.StatusForbidden || !strings.Contains(msg, "only on Works of edge-a") {
			t.Errorf("reporting on edge-b's Work: %d %q; want 403", status, msg)
		}
		if status, _ := followOnce(t, e.client(nil), e.url+worksync.FollowPath+"?cluster=edge-a"); status != http.StatusUnauthorized {
			t.Errorf("following without a certificate: %d; want 401", status)
		}
	})

	t.Run("ACertificateOfAnotherCAIsRefused", func(t *testing.T) {
		forged := selfSigned(t, "flotilla:agent:edge-a")
		if status, _ := followOnce(t, e.client(forged), e.url+worksync.FollowPath+"?cluster=edge-a"); status != http.StatusUnauthorized {
			t.Errorf("a self-made certificate naming edge-a: %d; want 401", status)
		}
	})

	t.Run("HeartbeatsReachTheClustersHealth", func(t *testing.T) {
		time.Sleep(time.Second) // the refusals above spent part of the cluster's heartbeat budget
		status, msg := do(t, agentA, http.MethodPost, e.url+pull.HeartbeatPath, pull.Heartbeat{Readiness: clustercache.ReadinessReady, KubernetesVersion: "v1.37.2", AgentVersion: "test"})
		if status != http.StatusOK {
			t.Fatalf("heartbeat: %d %s", status, msg)
		}
		if h, ok := e.members.Reported("edge-a"); !ok || h.Readiness != clustercache.ReadinessReady || h.Version != "v1.37.2" {
			t.Errorf("reported health %+v %v; want Ready v1.37.2", h, ok)
		}
		if _, ok := e.members.Reported("edge-b"); ok {
			t.Error("edge-b has a reported health though its agent never reported")
		}
	})

	t.Run("CustomizationsAreServedToAgentsOnly", func(t *testing.T) {
		bundled, err := customization.Bundled()
		if err != nil || len(bundled) == 0 {
			t.Fatalf("bundled customizations: %v", err)
		}
		ric := bundled[0].DeepCopy()
		if err := c.Create(ctx, ric); err != nil {
			t.Fatal(err)
		}
		status, body := do(t, agentA, http.MethodGet, e.url+pull.CustomizationsPath, nil)
		if status != http.StatusOK || !strings.Contains(body, ric.Name) {
			t.Errorf("customizations for an agent: %d; want 200 listing %s", status, ric.Name)
		}
		var beat pull.HeartbeatResponse
		status, body = do(t, agentA, http.MethodPost, e.url+pull.HeartbeatPath, pull.Heartbeat{Readiness: clustercache.ReadinessReady})
		if err := json.Unmarshal([]byte(body), &beat); status != http.StatusOK || err != nil || beat.Customizations == "" {
			t.Errorf("a heartbeat's answer names no customizations version: %d %q", status, body)
		}
		if status, _ := do(t, e.client(nil), http.MethodGet, e.url+pull.CustomizationsPath, nil); status != http.StatusUnauthorized {
			t.Errorf("customizations without a certificate: %d; want 401", status)
		}
	})

	t.Run("OversizedRequestsAreRefused", func(t *testing.T) {
		many := pull.Heartbeat{Readiness: clustercache.ReadinessReady, Events: make([]pull.EdgeEvent, 501)}
		if status, msg := do(t, agentA, http.MethodPost, e.url+pull.HeartbeatPath, many); status != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "at most 500") {
			t.Errorf("501 events in one heartbeat: %d %q; want 413", status, msg)
		}
		huge := pull.Heartbeat{Error: strings.Repeat("x", 5<<20)}
		if status, msg := do(t, agentA, http.MethodPost, e.url+pull.HeartbeatPath, huge); status != http.StatusRequestEntityTooLarge || strings.Contains(msg, "xxxx") {
			t.Errorf("a 5 MiB heartbeat: %d %q; want 413 echoing nothing", status, msg)
		}
		req := pull.RegisterRequest{Cluster: "edge-b", Token: strings.Repeat("a", 5<<20)}
		if status, msg := do(t, e.client(nil), http.MethodPost, e.url+pull.RegisterPath, req); status != http.StatusRequestEntityTooLarge || strings.Contains(msg, "aaaa") {
			t.Errorf("a 5 MiB registration: %d %q; want 413 echoing nothing", status, msg)
		}
	})

	t.Run("RenewalKeepsTheOldCertificateUntilTheNewOneIsUsed", func(t *testing.T) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "x"}}, k)
		var out pull.RegisterResponse
		status, body := do(t, agentA, http.MethodPost, e.url+pull.RenewPath, pull.RenewRequest{CSR: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))})
		if status != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil {
			t.Fatalf("renewing: %d %s", status, body)
		}
		keyDER, _ := x509.MarshalECPrivateKey(k)
		renewed, err := tls.X509KeyPair([]byte(out.Certificate), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
		if err != nil {
			t.Fatal(err)
		}
		// Until the renewed certificate is presented, the open connections' old one works.
		if status, msg := do(t, agentA, http.MethodPost, e.url+pull.HeartbeatPath, pull.Heartbeat{}); status != http.StatusOK {
			t.Fatalf("the old certificate right after renewal: %d %q; want 200", status, msg)
		}
		agentA = e.client(&renewed)
		if status, msg := do(t, agentA, http.MethodPost, e.url+pull.HeartbeatPath, pull.Heartbeat{}); status != http.StatusOK {
			t.Fatalf("the renewed certificate: %d %q; want 200", status, msg)
		}
		if status, _ := do(t, e.client(certA), http.MethodPost, e.url+pull.HeartbeatPath, pull.Heartbeat{}); status != http.StatusForbidden {
			t.Errorf("the old certificate once the renewed one was used: %d; want 403", status)
		}
		certA = &renewed
	})

	t.Run("AFloodingAgentIsHeldToItsBounds", func(t *testing.T) {
		time.Sleep(5 * time.Second) // a full heartbeat budget
		for _, tc := range []struct {
			name string
			hb   pull.Heartbeat
			says string
		}{
			{"a long version", pull.Heartbeat{AgentVersion: strings.Repeat("v", 65)}, "agentVersion"},
			{"too many group versions", pull.Heartbeat{APIEnablements: make([]clusterv1alpha1.APIEnablement, 513)}, "apiEnablements"},
		} {
			if status, msg := do(t, agentA, http.MethodPost, e.url+pull.HeartbeatPath, tc.hb); status != http.StatusBadRequest || !strings.Contains(msg, tc.says) {
				t.Errorf("%s: %d %q; want 400 naming %s", tc.name, status, msg, tc.says)
			}
		}
		limited := 0
		for range 20 {
			if status, msg := do(t, agentA, http.MethodPost, e.url+pull.HeartbeatPath, pull.Heartbeat{Readiness: clustercache.ReadinessReady}); status == http.StatusTooManyRequests && strings.Contains(msg, "too often") {
				limited++
			}
		}
		if limited < 5 {
			t.Errorf("20 heartbeats at once: %d refused with 429; want those beyond a burst of 5 and one a second", limited)
		}

		// Two streams (one in use, one reconnecting); a third is refused until one closes.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		open := func() *http.Response {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+worksync.FollowPath+"?cluster=edge-a", nil)
			resp, err := agentA.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		first, second := open(), open()
		third := open()
		third.Body.Close()
		if first.StatusCode != http.StatusOK || second.StatusCode != http.StatusOK || third.StatusCode != http.StatusTooManyRequests {
			t.Errorf("three Works streams of one agent: %d %d %d; want 200 200 429", first.StatusCode, second.StatusCode, third.StatusCode)
		}
		first.Body.Close()
		second.Body.Close()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			resp := open()
			defer resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		}); err != nil {
			t.Error("a Works stream is still refused after the agent closed its two")
		}
	})

	t.Run("EdgeEventsAreOnlyDriftAndDatedWithinAWeek", func(t *testing.T) {
		rb := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-deployment"},
			Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"},
				PolicyRef: workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "default", Name: "web"}}}
		if err := c.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
		w := work("edge-a", "web")
		w.Labels[workv1alpha1.BindingNamespaceLabel], w.Labels[workv1alpha1.BindingNameLabel] = rb.Namespace, rb.Name
		if err := e.store.Client(c).Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		bOther := work("edge-b", "web")
		bOther.Labels[workv1alpha1.BindingNamespaceLabel], bOther.Labels[workv1alpha1.BindingNameLabel] = rb.Namespace, rb.Name
		if err := e.store.Client(c).Create(ctx, bOther); err != nil {
			t.Fatal(err)
		}
		own := kube.ExecutionNamespacePrefix + "edge-a"
		hb := pull.Heartbeat{Readiness: clustercache.ReadinessReady, Events: []pull.EdgeEvent{
			{Time: clock.Add(24 * time.Hour), Reason: "DriftCorrected", Message: "from the future", WorkNamespace: own, WorkName: "web"},
			{Time: clock.Add(-30 * 24 * time.Hour), Reason: "Drifted", Message: "from long ago", WorkNamespace: own, WorkName: "web"},
			{Time: clock, Reason: "Rollback", Message: "not the executor's", WorkNamespace: own, WorkName: "web"},
			{Time: clock, Reason: "DriftCorrected", Message: "of another cluster", WorkNamespace: kube.ExecutionNamespacePrefix + "edge-b", WorkName: "web"},
		}}
		time.Sleep(time.Second)
		status, body := do(t, agentA, http.MethodPost, e.url+pull.HeartbeatPath, hb)
		var beat pull.HeartbeatResponse
		if status != http.StatusOK || json.Unmarshal([]byte(body), &beat) != nil || beat.EventsTaken != len(hb.Events) {
			t.Fatalf("a heartbeat with events: %d %q; want 200 taking all %d", status, body, len(hb.Events))
		}
		got := map[string]history.Record{}
		for _, r := range e.history.all() {
			got[r.Message] = r
		}
		if len(got) != 2 {
			t.Fatalf("history took %d records (%v); want the two drift events of edge-a's own Work", len(got), got)
		}
		if r := got["from the future"]; !r.Time.Equal(clock) || r.Cause != history.CauseDrift || r.Outcome != history.OutcomeCorrected || r.Cluster != "edge-a" {
			t.Errorf("an event dated tomorrow: %+v; want dated now, drift corrected on edge-a", r)
		}
		if r := got["from long ago"]; !r.Time.Equal(clock.Add(-7*24*time.Hour)) || r.Outcome != history.OutcomeDrifted {
			t.Errorf("an event dated a month ago: %+v; want dated a week ago, drifted", r)
		}
		time.Sleep(2 * time.Second) // the next subtests' heartbeats need budget
	})

	t.Run("ReportsCarryOnlyTheExecutorsFinalizer", func(t *testing.T) {
		w := &workv1alpha1.Work{}
		if err := e.store.Client(c).Get(ctx, client.ObjectKey{Namespace: kube.ExecutionNamespacePrefix + "edge-a", Name: "app"}, w); err != nil {
			t.Fatal(err)
		}
		rep := workstore.Report{Namespace: w.Namespace, Name: w.Name, UID: w.UID, Finalizers: []string{"example.com/forever"}}
		if status, msg := do(t, agentA, http.MethodPost, e.url+worksync.ReportPath, []workstore.Report{rep}); status != http.StatusForbidden || !strings.Contains(msg, "not the executor's") {
			t.Errorf("a report with a foreign finalizer: %d %q; want 403", status, msg)
		}
	})

	t.Run("RegisteringAgainRevokesTheEarlierCertificate", func(t *testing.T) {
		again, status, msg := e.register(t, "edge-a", join("edge-a", time.Hour))
		if status != http.StatusOK {
			t.Fatalf("registering again: %d %s", status, msg)
		}
		if status, msg := do(t, agentA, http.MethodPost, e.url+pull.HeartbeatPath, pull.Heartbeat{}); status != http.StatusForbidden || !strings.Contains(msg, "replaced") {
			t.Errorf("the earlier certificate: %d %q; want 403 replaced", status, msg)
		}
		if status, _ := do(t, e.client(again), http.MethodPost, e.url+pull.HeartbeatPath, pull.Heartbeat{}); status != http.StatusOK {
			t.Errorf("the new certificate: %d; want 200", status)
		}
	})

	t.Run("AnExpiredTokenIsRefused", func(t *testing.T) {
		tok := join("edge-b", time.Minute)
		clock = clock.Add(2 * time.Minute)
		if _, status, msg := e.register(t, "edge-b", tok); status != http.StatusForbidden || !strings.Contains(msg, "expired") {
			t.Errorf("an expired token: %d %q; want 403 expired", status, msg)
		}
	})

	t.Run("APushClusterTakesNoAgent", func(t *testing.T) {
		push := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "core"}, Spec: clusterv1alpha1.ClusterSpec{
			SyncMode: clusterv1alpha1.SyncModePush, Endpoint: "https://10.0.0.1:6443",
			CredentialsSecretRef: clusterv1alpha1.SecretReference{Namespace: kube.SystemNamespace, Name: "core-credentials"}}}
		if err := c.Create(ctx, push); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := registration.JoinPull(ctx, c, registration.PullJoinOptions{Name: "core"}); err == nil || !strings.Contains(err.Error(), "joined in Push mode") {
			t.Errorf("join --mode Pull of a Push cluster: %v; want refused", err)
		}
	})

	t.Run("APullClusterHoldsNoCredentials", func(t *testing.T) {
		bad := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "half"}, Spec: clusterv1alpha1.ClusterSpec{
			SyncMode: clusterv1alpha1.SyncModePull, Endpoint: "https://10.0.0.1:6443"}}
		if err := c.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "must be empty with syncMode Pull") {
			t.Errorf("a Pull cluster with an endpoint: %v; want refused", err)
		}
		secrets := &corev1.SecretList{}
		if err := c.List(ctx, secrets, client.InNamespace(kube.SystemNamespace)); err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets.Items {
			if s.Labels[pull.TokenClusterLabel] == "edge-a" {
				t.Errorf("a used token of edge-a is still stored: %s", s.Name)
			}
		}
	})
}

func selfSigned(t *testing.T, cn string) *tls.Certificate {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k, Leaf: leaf}
}
