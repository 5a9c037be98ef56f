package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis"
	"github.com/flotilla-dev/flotilla/internal/history"
	"github.com/flotilla-dev/flotilla/internal/inventory"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
	"github.com/flotilla-dev/flotilla/internal/registration"
	"github.com/flotilla-dev/flotilla/internal/workstore"
	"github.com/flotilla-dev/flotilla/internal/worksync"
)

// Given a fleet with one Push and two Pull members (the control plane gets no kubeconfig of
// the Pull ones; their agents dial the manager), a release in waves runs over all three; an
// agent's certificate reaches only its own cluster's Works; and a Pull member cut off from
// the control plane for 60 s keeps its workload, puts back hand-made drift by itself, and
// takes the template change made meanwhile once it is back.
func TestAPullMemberTheControlPlaneCannotReach(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	fleetFile := localfleet.GeneratedFleet(3, localfleet.ProfileSlim)
	fleetFile.Members[1].Mode, fleetFile.Members[2].Mode = "Pull", "Pull"
	hub, edge, edge2 := fleetFile.Members[0].Name, fleetFile.Members[1].Name, fleetFile.Members[2].Name
	// A partition longer than the silence limit must not move the edge's workload away here.
	lf, err := startFleet(ctx, filepath.Join(t.TempDir(), "pull"), fleetFile, "--failover-grace-period=10m", "--agent-silence-limit=20s")
	if lf != nil {
		t.Cleanup(func() { _ = lf.Down(true) })
	}
	if err != nil {
		t.Fatalf("starting a fleet with Pull members: %v", err)
	}
	cp, err := controlPlaneClient(lf)
	if err != nil {
		t.Fatal(err)
	}
	members := map[string]client.Client{}
	for _, m := range []string{hub, edge, edge2} {
		cfg, err := lf.RESTConfig(m)
		if err != nil {
			t.Fatal(err)
		}
		if members[m], err = client.New(cfg, client.Options{Scheme: kube.Scheme}); err != nil {
			t.Fatal(err)
		}
	}

	// The control plane holds nothing that reaches a Pull member.
	cl := &clusterv1alpha1.Cluster{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Name: edge}, cl)).To(gomega.Succeed())
	g.Expect(cl.Spec.SyncMode).To(gomega.Equal(clusterv1alpha1.SyncModePull))
	g.Expect(cl.Spec.Endpoint).To(gomega.BeEmpty())
	g.Expect(cl.Spec.CredentialsSecretRef.Name).To(gomega.BeEmpty())
	g.Expect(cl.Status.Agent).NotTo(gomega.BeNil())
	g.Expect(cl.Status.Agent.Identity).To(gomega.Equal("flotilla:agent:" + edge))
	g.Expect(meta.FindStatusCondition(cl.Status.Conditions, clusterv1alpha1.ConditionReady).Reason).To(gomega.Equal(clusterv1alpha1.ReasonAgentConnected))
	secrets := &corev1.SecretList{}
	g.Expect(cp.List(ctx, secrets, client.InNamespace(kube.SystemNamespace))).To(gomega.Succeed())
	for _, s := range secrets.Items {
		g.Expect(s.Name).NotTo(gomega.ContainSubstring(edge), "the control plane stores a Secret for the Pull member %s", edge)
	}

	// A release in waves over Push and Pull members.
	ns := "pulled"
	g.Expect(cp.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(gomega.Succeed())
	bake := intstr.FromString("5s")
	g.Expect(cp.Create(ctx, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "edge-first", ClusterNames: []string{edge}, Gates: policyv1alpha1.Gates{BakeTime: &bake}},
				{Name: "rest", ClusterNames: []string{hub, edge2}},
			}},
		},
	})).To(gomega.Succeed())
	web := webDeployment(ns, 2)
	g.Expect(cp.Create(ctx, web)).To(gomega.Succeed())
	binding := func() *workv1alpha1.ResourceBinding {
		b := &workv1alpha1.ResourceBinding{}
		_ = cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-deployment"}, b)
		return b
	}
	g.Eventually(func() workv1alpha1.Health { return binding().Status.Health }, 2*time.Minute).Should(gomega.Equal(workv1alpha1.HealthHealthy))
	image := func(m string) string {
		d := &appsv1.Deployment{}
		if err := members[m].Get(ctx, client.ObjectKeyFromObject(web), d); err != nil {
			return ""
		}
		return d.Spec.Template.Spec.Containers[0].Image
	}
	setImage := func(img string) {
		g.Eventually(func() error {
			cur := &appsv1.Deployment{}
			if err := cp.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
				return err
			}
			cur.Spec.Template.Spec.Containers[0].Image = img
			return cp.Update(ctx, cur)
		}).Should(gomega.Succeed())
	}
	releasePhase := func(name string) rolloutv1alpha1.ReleasePhase {
		rel := &rolloutv1alpha1.Release{}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rel); err != nil {
			return ""
		}
		return rel.Status.Phase
	}
	setImage("registry.example/web:2")
	g.Eventually(func() string { return image(edge) }, time.Minute).Should(gomega.Equal("registry.example/web:2"))
	g.Expect(image(hub)).To(gomega.Equal("registry.example/web:1"), "the second wave started before the Pull member's wave baked")
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase("web-deployment-r2") }, 2*time.Minute).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	for _, m := range []string{hub, edge, edge2} {
		g.Expect(image(m)).To(gomega.Equal("registry.example/web:2"), "member %s", m)
	}

	t.Run("AnAgentReachesOnlyItsOwnCluster", func(t *testing.T) {
		g := newG(t)
		agent := agentClient(t, lf, edge)
		status, works := followWorks(t, agent, lf.AgentEndpoint()+worksync.FollowPath+"?cluster="+edge)
		g.Expect(status).To(gomega.Equal(http.StatusOK))
		g.Expect(works).NotTo(gomega.BeEmpty())
		for _, w := range works {
			g.Expect(w).To(gomega.HavePrefix(kube.ExecutionNamespacePrefix+edge+"/"), "the agent of %s received another cluster's Work", edge)
		}
		status, _ = followWorks(t, agent, lf.AgentEndpoint()+worksync.FollowPath+"?cluster="+edge2)
		g.Expect(status).To(gomega.Equal(http.StatusForbidden), "the agent of %s followed %s's Works", edge, edge2)
		body := strings.NewReader(`[{"namespace":"` + kube.ExecutionNamespacePrefix + edge2 + `","name":"pulled.web-deployment","status":{}}]`)
		resp, err := agent.Post(lf.AgentEndpoint()+worksync.ReportPath, "application/json", body)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(gomega.Equal(http.StatusForbidden), "the agent of %s reported on %s's Work", edge, edge2)
		// Its certificate opens nothing else: the control plane's API server does not know it.
		for _, path := range []string{"/api/v1/namespaces/" + ns + "/secrets", "/apis/apps/v1/namespaces/" + ns + "/deployments"} {
			resp, err := agent.Get(strings.TrimSuffix(cpConfig(t, lf).Host, "/") + path)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			resp.Body.Close()
			g.Expect(resp.StatusCode).To(gomega.BeElementOf(http.StatusUnauthorized, http.StatusForbidden), "the agent's certificate read %s from the control plane", path)
		}
	})

	// The partition: the edge's agent dials through a relay the test cuts.
	g.Expect(lf.StopComponent(edge + "-flotilla-agent")).To(gomega.Succeed())
	relay := startRelay(t, strings.TrimPrefix(lf.AgentEndpoint(), "https://"))
	stopAgent := startAgent(t, lf, edge, "https://"+relay.addr())
	ready := func() (string, metav1.ConditionStatus) {
		c := &clusterv1alpha1.Cluster{}
		if err := cp.Get(ctx, client.ObjectKey{Name: edge}, c); err != nil {
			return "", ""
		}
		r := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ConditionReady)
		if r == nil {
			return "", ""
		}
		return r.Reason, r.Status
	}
	g.Eventually(func() int { return relay.served() }, 30*time.Second).Should(gomega.BeNumerically(">", 0), "the agent does not dial through the relay")
	// Its first heartbeats through the relay (one after its first probe of the member) keep the cluster Ready.
	time.Sleep(12 * time.Second)
	before, beforeStatus := ready()
	g.Expect(before).To(gomega.Equal(clusterv1alpha1.ReasonAgentConnected))
	g.Expect(beforeStatus).To(gomega.Equal(metav1.ConditionTrue))
	relay.cut()
	cutAt := time.Now()
	t.Logf("partition of %s starts", edge)

	// Hand-made drift is put back by the agent alone.
	g.Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := members[edge].Get(ctx, client.ObjectKeyFromObject(web), d); err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/by-hand:1"
		return members[edge].Update(ctx, d)
	}).Should(gomega.Succeed())
	g.Eventually(func() string { return image(edge) }, 30*time.Second).Should(gomega.Equal("registry.example/web:2"))
	t.Logf("drift put back %.1fs into the partition", time.Since(cutAt).Seconds())

	// An agent restarted while cut off starts from the Works it kept, and keeps correcting.
	stopAgent()
	startAgent(t, lf, edge, "https://"+relay.addr())
	restarted := time.Now()
	g.Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := members[edge].Get(ctx, client.ObjectKeyFromObject(web), d); err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/by-hand:2"
		return members[edge].Update(ctx, d)
	}).Should(gomega.Succeed())
	g.Eventually(func() string { return image(edge) }, time.Minute).Should(gomega.Equal("registry.example/web:2"), "the restarted agent left the drift")
	t.Logf("an agent restarted during the partition put drift back %.1fs after its restart", time.Since(restarted).Seconds())

	// A template change made meanwhile waits for the edge.
	setImage("registry.example/web:3")
	g.Eventually(func() metav1.ConditionStatus { _, s := ready(); return s }, time.Minute).Should(gomega.Equal(metav1.ConditionFalse))
	reason, _ := ready()
	g.Expect(reason).To(gomega.Equal(clusterv1alpha1.ReasonAgentSilent))
	t.Logf("%s not Ready (AgentSilent) %.1fs into the partition", edge, time.Since(cutAt).Seconds())
	time.Sleep(time.Until(cutAt.Add(60 * time.Second)))
	g.Expect(image(edge)).To(gomega.Equal("registry.example/web:2"), "the edge changed during the partition")
	d := &appsv1.Deployment{}
	g.Expect(members[edge].Get(ctx, client.ObjectKeyFromObject(web), d)).To(gomega.Succeed())
	g.Expect(d.Status.AvailableReplicas).To(gomega.BeNumerically(">", 0), "the edge's workload stopped running during the partition")

	relay.restore()
	back := time.Now()
	checkHistory := func() {
		// History has the edge's correction at its edge time, before the change it took once back.
		page := edgeHistory(t, lf, edge)
		var drift, applied *inventory.HistoryItem
		for i := range page {
			it := &page[i]
			if it.Cause == history.CauseDrift && it.Outcome == history.OutcomeCorrected && it.Name == "web" && drift == nil {
				drift = it
			}
			if it.ToRevision == 3 && it.Name == "web" && it.Cause != history.CauseDrift {
				applied = it
			}
		}
		g.Expect(drift).NotTo(gomega.BeNil(), "no drift record of %s in its history: %+v", edge, page)
		g.Expect(drift.Time).To(gomega.BeTemporally(">=", cutAt.Truncate(time.Second)))
		g.Expect(drift.Time).To(gomega.BeTemporally("<", back), "the correction is recorded at the time it was reported, not when it happened")
		g.Expect(applied).NotTo(gomega.BeNil(), "no record of revision 3 reaching %s: %+v", edge, page)
		g.Expect(applied.Time).To(gomega.BeTemporally(">", drift.Time))
	}
	g.Eventually(func() string { return image(edge) }, 2*time.Minute).Should(gomega.Equal("registry.example/web:3"))
	t.Logf("%s runs the change %.1fs after the partition ended", edge, time.Since(back).Seconds())
	g.Eventually(func() metav1.ConditionStatus { _, s := ready(); return s }, time.Minute).Should(gomega.Equal(metav1.ConditionTrue))
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase("web-deployment-r3") }, 2*time.Minute).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	for _, m := range []string{hub, edge, edge2} {
		g.Expect(image(m)).To(gomega.Equal("registry.example/web:3"), "member %s", m)
	}
	checkHistory()

	// A failing analysis gate on the Pull member's wave rolls it back by itself.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"errorRate": 0.40}`))
	}))
	t.Cleanup(srv.Close)
	g.Expect(cp.Create(ctx, &rolloutv1alpha1.AnalysisTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "error-rate", Namespace: ns},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{Metrics: []rolloutv1alpha1.Metric{{
			Name: "error-rate", Interval: "1s", Count: ptr.To[int32](2), SuccessCondition: "result <= 0.05",
			Provider: rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: srv.URL, JSONPath: "{$.errorRate}"}},
		}}},
	})).To(gomega.Succeed())
	g.Eventually(func() error {
		p := &policyv1alpha1.PropagationPolicy{}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, p); err != nil {
			return err
		}
		p.Spec.Rollout.Waves[0].Gates.Analysis = &policyv1alpha1.AnalysisGate{Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: "error-rate"}}}
		return cp.Update(ctx, p)
	}).Should(gomega.Succeed())
	hubGeneration := func() int64 {
		d := &appsv1.Deployment{}
		_ = members[hub].Get(ctx, client.ObjectKeyFromObject(web), d)
		return d.Generation
	}
	before4 := hubGeneration()
	setImage("registry.example/web:4")
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase("web-deployment-r4") }, 2*time.Minute).Should(gomega.Equal(rolloutv1alpha1.ReleaseRolledBack))
	g.Eventually(func() string { return image(edge) }, time.Minute).Should(gomega.Equal("registry.example/web:3"), "the Pull member is back on the stable revision")
	g.Expect(image(hub)).To(gomega.Equal("registry.example/web:3"))
	g.Expect(image(edge2)).To(gomega.Equal("registry.example/web:3"))
	g.Expect(hubGeneration()).To(gomega.Equal(before4), "a later wave changed")

	// A Job analysis gate runs its Job in the Pull member: the agent applies it and reports it.
	jobPods := podSpec("smoke")
	jobPods.Spec.RestartPolicy = "Never"
	jobPods.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	jobPods.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	jobSpec, err := json.Marshal(&batchv1.JobSpec{Template: jobPods, BackoffLimit: ptr.To[int32](0)})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(cp.Create(ctx, &rolloutv1alpha1.AnalysisTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: ns},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{Metrics: []rolloutv1alpha1.Metric{{
			Name: "smoke", Provider: rolloutv1alpha1.MetricProvider{Job: &rolloutv1alpha1.JobMetric{Spec: runtime.RawExtension{Raw: jobSpec}}},
		}}},
	})).To(gomega.Succeed())
	g.Eventually(func() error {
		p := &policyv1alpha1.PropagationPolicy{}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, p); err != nil {
			return err
		}
		p.Spec.Rollout.Waves[0].Gates.Analysis = &policyv1alpha1.AnalysisGate{Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: "smoke"}}}
		return cp.Update(ctx, p)
	}).Should(gomega.Succeed())
	setImage("registry.example/web:5")
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase("web-deployment-r5") }, 2*time.Minute).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	jobs := &batchv1.JobList{}
	g.Expect(members[edge].List(ctx, jobs, client.InNamespace(ns), client.MatchingLabels{analysis.AnalysisRunLabel: "web-deployment-r5-edge-first"})).To(gomega.Succeed())
	g.Expect(jobs.Items).To(gomega.HaveLen(1), "the analysis Job ran in the Pull member")
	run := &rolloutv1alpha1.AnalysisRun{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-deployment-r5-edge-first"}, run)).To(gomega.Succeed())
	g.Expect(run.Status.Phase).To(gomega.Equal(rolloutv1alpha1.AnalysisSuccessful))
	for _, m := range []string{hub, edge, edge2} {
		g.Expect(image(m)).To(gomega.Equal("registry.example/web:5"), "member %s", m)
	}

	// Unjoining a Pull member drains its Works through its agent and leaves its workload running
	// (deletionPolicy Orphan, the default), though the Works' own rule is to delete.
	g.Expect(registration.Unjoin(ctx, cp, edge2, registration.UnjoinOptions{Wait: 2 * time.Minute})).To(gomega.Succeed())
	g.Expect(image(edge2)).To(gomega.Equal("registry.example/web:5"), "unjoining the Pull member removed its workload")
}

func cpConfig(t *testing.T, lf *localfleet.LocalFleet) *rest.Config {
	t.Helper()
	cfg, err := lf.RESTConfig("")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// edgeHistory reads a cluster's history from the fleet's inventory API, newest first.
func edgeHistory(t *testing.T, lf *localfleet.LocalFleet, cluster string) []inventory.HistoryItem {
	t.Helper()
	cfg, err := lf.RESTConfig("")
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg) // the fleet's CA signs the inventory API's certificate too
	if err != nil {
		t.Fatal(err)
	}
	var page inventory.HistoryPage
	var lastErr error
	for range 30 {
		resp, err := hc.Get(lf.InventoryURL() + "/api/v1/history?limit=100&cluster=" + cluster)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&page)
			resp.Body.Close()
		}
		if err == nil && len(page.Items) > 0 {
			return page.Items
		}
		lastErr = err
		time.Sleep(time.Second)
	}
	t.Fatalf("reading the history of %s: %v", cluster, lastErr)
	return nil
}

// agentClient is an HTTPS client with the client certificate the member's agent registered for.
func agentClient(t *testing.T, lf *localfleet.LocalFleet, member string) *http.Client {
	t.Helper()
	dir := lf.PullAgentStateDir(member)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(lf.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}}
}

// followWorks reads a Works stream until Synced: the status and the Works named.
func followWorks(t *testing.T, hc *http.Client, url string) (int, []string) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	var names []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var e workstore.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Type == workstore.Synced {
			return resp.StatusCode, names
		}
		if e.Work != nil {
			names = append(names, e.Work.Namespace+"/"+e.Work.Name)
		}
	}
	t.Fatalf("the Works stream ended before Synced: %v", sc.Err())
	return 0, nil
}

// startAgent runs a Pull member's agent outside the fleet's supervision, dialing controlPlane,
// and returns what stops it.
func startAgent(t *testing.T, lf *localfleet.LocalFleet, member, controlPlane string) func() {
	t.Helper()
	logFile, err := os.Create(filepath.Join(t.TempDir(), member+"-agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(flotillaBin, lf.PullAgentArgs(member, controlPlane)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			out, _ := os.ReadFile(logFile.Name())
			t.Logf("agent log:\n%s", out)
		}
	})
	return stop
}

// relay forwards TCP connections to target until cut: then it drops every open connection
// and refuses new ones, as a network partition would, until restored.
type relay struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	open  bool
	conns map[net.Conn]struct{}
	count int
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{l: l, target: target, open: true, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { _ = l.Close(); r.cut() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go r.serve(in)
		}
	}()
	return r
}

func (r *relay) addr() string { return r.l.Addr().String() }

func (r *relay) served() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

func (r *relay) serve(in net.Conn) {
	r.mu.Lock()
	if !r.open {
		r.mu.Unlock()
		_ = in.Close()
		return
	}
	r.count++
	r.mu.Unlock()
	out, err := net.Dial("tcp", r.target)
	if err != nil {
		_ = in.Close()
		return
	}
	r.mu.Lock()
	r.conns[in], r.conns[out] = struct{}{}, struct{}{}
	r.mu.Unlock()
	go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
	_, _ = io.Copy(in, out)
	_ = in.Close()
}

func (r *relay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open = false
	for c := range r.conns {
		_ = c.Close()
	}
	clear(r.conns)
}

func (r *relay) restore() {
	r.mu.Lock()
	r.open = true
	r.mu.Unlock()
}
