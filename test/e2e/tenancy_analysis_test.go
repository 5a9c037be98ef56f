package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis"
)

// releaseWithAnalysis places web in east with a wave gated by the namespace's template, moves
// it to a new image and returns the wave's AnalysisRun once it has finished.
func releaseWithAnalysis(t *testing.T, g gomega.Gomega, ns string, tmpl *rolloutv1alpha1.AnalysisTemplate) *rolloutv1alpha1.AnalysisRun {
	t.Helper()
	ctx := context.Background()
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "checked", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{Analysis: &policyv1alpha1.AnalysisGate{
					Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: tmpl.Name}},
				}}},
			}},
		},
	}
	web := webDeployment(ns, 1)
	createAll(t, g, tmpl, policy, web)
	g.Eventually(func() string { return memberImage(t, "east", ns, "web") }).Should(gomega.Equal("registry.example/web:1"))
	g.Eventually(func() *workv1alpha1.Revisions { return bindingOf(ctx, ns, "web-deployment").Spec.Revisions }).ShouldNot(gomega.BeNil())

	setImage(t, g, web, "registry.example/web:2")
	return firstWaveRun(g, ns, "web-deployment-r2")
}

// firstWaveRun waits until the first wave of a release has run its analysis to the end, and
// returns that AnalysisRun.
func firstWaveRun(g gomega.Gomega, ns, release string) *rolloutv1alpha1.AnalysisRun {
	run := &rolloutv1alpha1.AnalysisRun{}
	g.Eventually(func() bool {
		r := getRelease(ns, release)
		if r == nil || len(r.Status.Waves) == 0 || r.Status.Waves[0].AnalysisRun == "" {
			return false
		}
		return cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: r.Status.Waves[0].AnalysisRun}, run) == nil && run.Status.Phase.Completed()
	}).WithTimeout(2*time.Minute).Should(gomega.BeTrue(), releaseState(ns))
	return run
}

// metricResult is the run's result of one metric.
func metricResult(g gomega.Gomega, run *rolloutv1alpha1.AnalysisRun, name string) rolloutv1alpha1.MetricResult {
	for _, r := range run.Status.MetricResults {
		if r.Name == name {
			return r
		}
	}
	g.Expect(run.Status.MetricResults).To(gomega.ContainElement(gomega.HaveField("Name", name)))
	return rolloutv1alpha1.MetricResult{}
}

// etcdClientPort reads the local fleet's etcd client port from its state.
func etcdClientPort(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fleet.StateDir(), "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var state struct {
		Ports struct {
			EtcdClient int `json:"etcdClient"`
		} `json:"ports"`
	}
	if err := json.Unmarshal(data, &state); err != nil || state.Ports.EtcdClient == 0 {
		t.Fatalf("no etcd client port in the fleet's state: %v", err)
	}
	return state.Ports.EtcdClient
}

// Given a namespace's AnalysisTemplate (tenant input), when its web metrics aim at the cloud
// metadata service, a private address, a file, another host through a redirect or the fleet's
// etcd, then no request leaves for them and each measurement says why; a server on 127.0.0.1
// (the local fleet's --analysis-allow-cidr default) is still measured.
func TestTenantAnalysisEgressIsControlled(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "tenancy-egress"
	ensureNamespace(t, cp, ns)

	var redirectedTo atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/elsewhere":
			// localhost is the same machine but another host: the redirect must not be followed.
			http.Redirect(w, r, strings.Replace("http://"+r.Host, "127.0.0.1", "localhost", 1)+"/target", http.StatusFound)
		case "/target":
			redirectedTo.Add(1)
			_, _ = w.Write([]byte(`{"ok": true}`))
		default:
			_, _ = w.Write([]byte(`{"ok": true}`))
		}
	}))
	t.Cleanup(srv.Close)

	// When etcd answers plain HTTP on loopback (the local fleet before its etcd took client
	// certificates), the local fleet's --analysis-allow-cidr=127.0.0.1/32 lets analysis reach it.
	etcdPort := etcdClientPort(t)
	etcdURL := fmt.Sprintf("https://127.0.0.1:%d", etcdPort)
	plainEtcd := false
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", etcdPort)); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			plainEtcd = true
			etcdURL = fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
			t.Logf("the fleet's etcd still serves plain HTTP without client certificates at %s: checking only that the measurement holds nothing but the bounded JSON-path result", etcdURL)
		}
	}
	canary := "e2e-etcd-canary-value"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-secret", Namespace: ns}, StringData: map[string]string{"token": canary}}
	g.Expect(cp.Create(ctx, secret)).To(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(ctx, secret) })
	b64 := base64.StdEncoding.EncodeToString
	etcdRange := fmt.Sprintf(`{"key":%q,"range_end":%q}`, b64([]byte("/registry/secrets/"+ns+"/")), b64([]byte("/registry/secrets/"+ns+"0")))

	// Admission refuses a scheme other than http and https where the URL is written out.
	for _, provider := range []rolloutv1alpha1.MetricProvider{
		{Web: &rolloutv1alpha1.WebMetric{URL: "file:///etc/passwd"}},
		{Prometheus: &rolloutv1alpha1.PrometheusMetric{Address: "gopher://127.0.0.1:70", Query: "up"}},
	} {
		bad := &rolloutv1alpha1.AnalysisTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "bad-scheme", Namespace: ns},
			Spec:       rolloutv1alpha1.AnalysisTemplateSpec{Metrics: []rolloutv1alpha1.Metric{{Name: "m", Provider: provider}}},
		}
		err := cp.Create(ctx, bad)
		g.Expect(err).To(gomega.HaveOccurred(), "a template with another scheme is refused")
		g.Expect(err.Error()).To(gomega.SatisfyAny(
			gomega.And(gomega.ContainSubstring("spec.metrics[0].provider.web.url"), gomega.ContainSubstring(`scheme "file" is not allowed; use http or https`)),
			gomega.And(gomega.ContainSubstring("spec.metrics[0].provider.prometheus.address"), gomega.ContainSubstring(`scheme "gopher" is not allowed; use http or https`)),
		))
	}

	web := func(name, url string) rolloutv1alpha1.Metric {
		return rolloutv1alpha1.Metric{Name: name, ConsecutiveErrorLimit: ptr.To[int32](0),
			Provider: rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: url, JSONPath: "{$.ok}", TimeoutSeconds: 5}}}
	}
	etcd := web("etcd", etcdURL+"/v3/kv/range")
	etcd.Provider.Web.Method, etcd.Provider.Web.Body, etcd.Provider.Web.JSONPath = "POST", etcdRange, "{$.count}"
	tmpl := &rolloutv1alpha1.AnalysisTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "egress", Namespace: ns},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{
			// A scheme that comes from an argument is checked when measured.
			Args: []rolloutv1alpha1.Argument{{Name: "base", Value: ptr.To("file:///etc")}},
			Metrics: []rolloutv1alpha1.Metric{
				web("metadata", "http://169.254.169.254/latest/meta-data"),
				web("private", "http://10.255.255.1:2379/v3/kv/range"),
				web("file", "{{args.base}}/passwd"),
				web("redirect", srv.URL+"/elsewhere"),
				etcd,
				web("allowed", srv.URL+"/ok"),
			},
			// Every metric is measured to its end; none decides the run.
			DryRun: []rolloutv1alpha1.DryRun{{MetricName: "*"}},
		},
	}
	run := releaseWithAnalysis(t, g, ns, tmpl)

	for _, tt := range []struct{ metric, want string }{
		{"metadata", "169.254.169.254 is a cloud metadata address: analysis may not reach it unless the platform allows the range with the controller's --analysis-allow-cidr"},
		{"private", "10.255.255.1 is private: an AnalysisTemplate of a namespace may not reach it; use a ClusterAnalysisTemplate"},
		{"file", `provider.web.url: scheme "file" is not allowed; use http or https`},
		{"redirect", "analysis follows redirects only within the same host"},
	} {
		r := metricResult(g, run, tt.metric)
		g.Expect(r.Phase).To(gomega.Equal(rolloutv1alpha1.AnalysisError), "metric %s", tt.metric)
		g.Expect(r.Measurements).NotTo(gomega.BeEmpty(), "metric %s", tt.metric)
		g.Expect(r.Measurements[len(r.Measurements)-1].Message).To(gomega.ContainSubstring(tt.want), "metric %s", tt.metric)
		g.Expect(r.Successful).To(gomega.BeZero(), "metric %s never got an answer", tt.metric)
	}
	g.Expect(redirectedTo.Load()).To(gomega.BeZero(), "the redirect to another host was not followed")
	g.Expect(metricResult(g, run, "allowed").Phase).To(gomega.Equal(rolloutv1alpha1.AnalysisSuccessful), "127.0.0.1 is allowed by the local fleet's default")

	etcdResult := metricResult(g, run, "etcd")
	for _, m := range etcdResult.Measurements {
		for _, text := range []string{m.Value, m.Message} {
			g.Expect(text).NotTo(gomega.ContainSubstring(canary))
			g.Expect(text).NotTo(gomega.ContainSubstring(b64([]byte(canary))))
			g.Expect(text).NotTo(gomega.ContainSubstring("kvs"), "no body text beyond the JSON-path result")
			g.Expect(text).NotTo(gomega.ContainSubstring(b64([]byte("/registry/"))))
		}
		if plainEtcd {
			// Only what jsonPath picked, the number of keys, is recorded.
			g.Expect(m.Value).To(gomega.Or(gomega.BeEmpty(), gomega.MatchRegexp(`^"?[0-9]+"?$`)))
		}
	}
	if !plainEtcd {
		g.Expect(etcdResult.Phase).To(gomega.Equal(rolloutv1alpha1.AnalysisError), "etcd answers no one without a client certificate")
		for _, m := range etcdResult.Measurements {
			g.Expect(m.Value).To(gomega.BeEmpty(), "no etcd data")
		}
	}
}

// Given a namespace's AnalysisTemplate whose job metric asks for hostNetwork, hostPID, a
// privileged container and hostPath "/", when its release is analysed, then the measurement
// is refused naming the Pod Security violations and no Job exists in the member; the same pod
// made restricted-compliant runs there and passes the gate.
func TestTenantAnalysisJobPodSecurity(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "tenancy-job"
	ensureNamespace(t, cp, ns)
	jobSpec := func(pod corev1.PodSpec) runtime.RawExtension {
		pod.RestartPolicy = corev1.RestartPolicyNever
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "smoke"}}, Spec: pod},
		})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		data, err := json.Marshal(raw)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return runtime.RawExtension{Raw: data}
	}
	container := corev1.Container{Name: "smoke", Image: "registry.example/smoke:1"}
	privileged := corev1.PodSpec{
		HostNetwork: true, HostPID: true,
		Volumes: []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
		Containers: []corev1.Container{func() corev1.Container {
			c := container
			c.VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
			c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true), Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
			return c
		}()},
	}
	restricted := corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{func() corev1.Container {
			c := container
			c.SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
			return c
		}()},
	}
	tmpl := &rolloutv1alpha1.AnalysisTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: ns},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Metrics: []rolloutv1alpha1.Metric{
				{Name: "privileged", ConsecutiveErrorLimit: ptr.To[int32](0), Provider: rolloutv1alpha1.MetricProvider{Job: &rolloutv1alpha1.JobMetric{Spec: jobSpec(privileged)}}},
				{Name: "restricted", Provider: rolloutv1alpha1.MetricProvider{Job: &rolloutv1alpha1.JobMetric{Spec: jobSpec(restricted)}}},
			},
			// The refused metric is measured to its end but does not decide the gate.
			DryRun: []rolloutv1alpha1.DryRun{{MetricName: "privileged"}},
		},
	}
	run := releaseWithAnalysis(t, g, ns, tmpl)

	refused := metricResult(g, run, "privileged")
	g.Expect(refused.Phase).To(gomega.Equal(rolloutv1alpha1.AnalysisError))
	g.Expect(refused.Measurements).NotTo(gomega.BeEmpty())
	g.Expect(refused.Measurements[len(refused.Measurements)-1].Message).To(gomega.And(
		gomega.ContainSubstring(`provider.job.spec.template violates Pod Security "restricted"`),
		gomega.ContainSubstring("host namespaces"), gomega.ContainSubstring("privileged"), gomega.ContainSubstring("restricted volume types"),
		gomega.ContainSubstring("no Job was created"), gomega.ContainSubstring("set securityContext.runAsNonRoot: true"),
	))
	jobsOf := func(metric string) []batchv1.Job {
		list := &batchv1.JobList{}
		g.Expect(memberClient(t, "east").List(ctx, list, client.InNamespace(ns), client.MatchingLabels{analysis.AnalysisMetricLabel: metric})).To(gomega.Succeed())
		return list.Items
	}
	g.Expect(jobsOf("privileged")).To(gomega.BeEmpty(), "no Job for the refused pod")

	g.Expect(metricResult(g, run, "restricted").Phase).To(gomega.Equal(rolloutv1alpha1.AnalysisSuccessful), "the restricted pod ran and completed")
	g.Expect(jobsOf("restricted")).To(gomega.HaveLen(1))
	g.Expect(run.Status.Phase).To(gomega.Equal(rolloutv1alpha1.AnalysisSuccessful))
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, "web-deployment-r2") }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
}
