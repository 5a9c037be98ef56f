package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubectl/pkg/polymorphichelpers"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/cli"
	"github.com/flotilla-dev/flotilla/internal/names"
)

// rolloutStatus runs `kubectl rollout status`'s own judgement (k8s.io/kubectl's status
// viewer) on the control plane's template: done, its message, or its error.
func rolloutStatus(t *testing.T, ns, name string) (bool, string, error) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return false, "", err
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := polymorphichelpers.StatusViewerFor(schema.GroupKind{Group: "apps", Kind: "Deployment"})
	if err != nil {
		t.Fatal(err)
	}
	msg, done, err := viewer.Status(&unstructured.Unstructured{Object: raw}, 0)
	return done, msg, err
}

// argoCDHealth is Argo CD's verdict on a control-plane object, from its gitops-engine health
// package (bin/argocd-check, built by `make tools`).
func argoCDHealth(t *testing.T, ns, kindName string) (string, string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "argocd-check"), "health", "--kubeconfig", fleet.Kubeconfig(""), "-n", ns, kindName).Output()
	if err != nil {
		t.Fatalf("argocd-check health %s: %v", kindName, err)
	}
	var h struct{ Status, Message string }
	if err := json.Unmarshal(out, &h); err != nil {
		t.Fatalf("argocd-check output %q: %v", out, err)
	}
	return h.Status, h.Message
}

// memberRunsHealthy: the member's Deployment runs image at its full share, every replica
// updated and available.
func memberRunsHealthy(t *testing.T, cluster, ns, name, image string) bool {
	d := &appsv1.Deployment{}
	if err := memberClient(t, cluster).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return false
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	return d.Spec.Template.Spec.Containers[0].Image == image && d.Status.ObservedGeneration >= d.Generation &&
		d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas == want && d.Status.Replicas == want
}

func exitCode(err error) int {
	var exit *cli.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.Code
	}
	return 1
}

// A Deployment of 12 replicas divided 6/3/3 is released in waves [east] (bake 10s) then
// [west, europe]. At every sample, the control-plane template never reads "all updated"
// (kubectl rollout status done, Argo CD Healthy) before every member runs the new image at
// its full share; the bake lasts at least 10s measured from the members; once the release
// succeeds both say done. A release rolled back by its analysis then reads failed to kubectl
// (progress deadline exceeded) and Degraded to Argo CD, and `release status` run right after
// the change waits for that change's release (not the previous, finished one) and exits 2.
func TestTemplateStatusTellsTheReleaseTruth(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "truth"
	ensureNamespace(t, cp, ns)
	var failing atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			_, _ = w.Write([]byte(`{"ok": false}`))
			return
		}
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(srv.Close)
	analysis := &rolloutv1alpha1.AnalysisTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "ok", Namespace: ns},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{Metrics: []rolloutv1alpha1.Metric{{
			Name: "ok", SuccessCondition: "result == true",
			Provider: rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: srv.URL, JSONPath: "{$.ok}"}},
		}}},
	}
	weight := func(cluster string, w int64) policyv1alpha1.StaticClusterWeight {
		return policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{cluster}}, Weight: w}
	}
	const bake = 10 * time.Second
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{
				Type: policyv1alpha1.ReplicaSchedulingDivided, DivisionPreference: policyv1alpha1.DivisionWeighted,
				WeightPreference: &policyv1alpha1.WeightPreference{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
					weight("east", 2), weight("west", 1), weight("europe", 1)}},
			}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{
					BakeTime: policyv1alpha1.DurationOf(bake),
					Analysis: &policyv1alpha1.AnalysisGate{Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: "ok"}}},
				}},
				{Name: "rest", ClusterNames: []string{"west", "europe"}},
			}},
		},
	}
	web := webDeployment(ns, 12)
	createAll(t, g, analysis, policy, web)
	members := []string{"east", "west", "europe"}
	g.Eventually(func() []int32 {
		return []int32{memberReplicas(t, "east", ns, "web"), memberReplicas(t, "west", ns, "web"), memberReplicas(t, "europe", ns, "web")}
	}).Should(gomega.Equal([]int32{6, 3, 3}))
	waitFirstRevision(g, ns)
	g.Eventually(func() error { _, _, err := rolloutStatus(t, ns, "web"); return err }).Should(gomega.Succeed())
	g.Eventually(func() bool { done, _, _ := rolloutStatus(t, ns, "web"); return done }).Should(gomega.BeTrue(), "revision 1 runs everywhere")

	// The bake measured from the members: east healthy on :2 until west is changed.
	var eastHealthy, westChanged time.Time
	var mu sync.Mutex
	stopSampler := make(chan struct{})
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		for {
			select {
			case <-stopSampler:
				return
			case <-time.After(25 * time.Millisecond):
			}
			now := time.Now()
			mu.Lock()
			if eastHealthy.IsZero() && memberRunsHealthy(t, "east", ns, "web", "registry.example/web:2") {
				eastHealthy = now
			}
			if westChanged.IsZero() && memberImage(t, "west", ns, "web") == "registry.example/web:2" {
				westChanged = now
			}
			mu.Unlock()
		}
	}()

	setImage(t, g, web, "registry.example/web:2")
	rel := "web-deployment-r2"
	deadline := time.Now().Add(3 * time.Minute)
	samples, bakingSamples := 0, 0
	for releasePhase(ns, rel) != rolloutv1alpha1.ReleaseSucceeded {
		if time.Now().After(deadline) {
			t.Fatalf("release %s did not succeed: %s", rel, releaseState(ns)())
		}
		done, msg, err := rolloutStatus(t, ns, "web")
		health, healthMsg := argoCDHealth(t, ns, "deployment/web")
		tmpl := &appsv1.Deployment{}
		g.Expect(cp.Get(ctx, client.ObjectKeyFromObject(web), tmpl)).To(gomega.Succeed())
		allNew := true
		for _, m := range members {
			allNew = allNew && memberRunsHealthy(t, m, ns, "web", "registry.example/web:2")
		}
		samples++
		if wavePhase(ns, rel, 0) == rolloutv1alpha1.WaveBaking {
			bakingSamples++
			g.Expect(done).To(gomega.BeFalse(), "kubectl rollout status must not be done while wave 1 bakes: %s", msg)
			g.Expect(tmpl.Status.UpdatedReplicas).To(gomega.BeNumerically("<", 12), "only east's 6 replicas run revision 2 while wave 1 bakes")
		}
		if !allNew {
			g.Expect(done).To(gomega.BeFalse(), "kubectl rollout status says done (%s, err %v) while a member still runs the old image", msg, err)
			g.Expect(health).NotTo(gomega.Equal("Healthy"), "Argo CD reads Healthy (%s) while a member still runs the old image", healthMsg)
			g.Expect(tmpl.Status.ObservedGeneration == tmpl.Generation && tmpl.Status.UpdatedReplicas == 12).To(gomega.BeFalse(),
				"the template reads every replica updated while a member still runs the old image: %+v", tmpl.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d samples, %d while wave 1 baked", samples, bakingSamples)
	g.Expect(bakingSamples).To(gomega.BeNumerically(">", 5), "the bake was sampled")
	g.Eventually(func() bool { done, _, _ := rolloutStatus(t, ns, "web"); return done }).Should(gomega.BeTrue(), "done once the release succeeded")
	g.Eventually(func() string { h, _ := argoCDHealth(t, ns, "deployment/web"); return h }).Should(gomega.Equal("Healthy"))
	close(stopSampler)
	<-samplerDone
	mu.Lock()
	g.Expect(eastHealthy.IsZero() || westChanged.IsZero()).To(gomega.BeFalse(), "sampled east healthy and west changed")
	measured := westChanged.Sub(eastHealthy)
	mu.Unlock()
	t.Logf("bake measured from the members: %s (configured %s)", measured, bake)
	g.Expect(measured).To(gomega.BeNumerically(">=", bake), "the bake never ends before its configured time")

	// A change whose analysis fails is rolled back: kubectl and Argo CD read failed, and
	// `release status` run at once follows this change's release, not the finished one.
	failing.Store(true)
	setImage(t, g, web, "registry.example/web:3")
	out, err := flotilla("release", "status", "deployment/web", "-n", ns, "--timeout", "3m")
	g.Expect(exitCode(err)).To(gomega.Equal(cli.ExitReleaseFailed), "release status exits 3 on a rollback: %v\n%s", err, out)
	g.Expect(out).To(gomega.ContainSubstring("web-deployment-r3"), out)
	g.Expect(out).NotTo(gomega.ContainSubstring("web-deployment-r2"), "it must not report the previous release: %s", out)
	g.Expect(releasePhase(ns, "web-deployment-r3")).To(gomega.Equal(rolloutv1alpha1.ReleaseRolledBack))
	g.Eventually(func() string { _, _, err := rolloutStatus(t, ns, "web"); return errString(err) }).Should(
		gomega.ContainSubstring("exceeded its progress deadline"), "kubectl rollout status fails once the release rolled back")
	g.Eventually(func() string { h, _ := argoCDHealth(t, ns, "deployment/web"); return h }).Should(gomega.Equal("Degraded"))
	g.Expect(progressing(t, ns, "web").Message).To(gomega.ContainSubstring("web-deployment-r3"), "the template's Progressing condition names the release")
	out, err = flotilla("release", "watch", "deployment/web", "-n", ns)
	g.Expect(exitCode(err)).To(gomega.Equal(cli.ExitReleaseFailed), "release watch exits 3 on a rolled-back release: %v\n%s", err, out)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A Deployment stuck in every member (its pods never scheduled: no node matches) reads
// Degraded to Argo CD and failed to kubectl on the control plane: the members'
// Progressing=False ProgressDeadlineExceeded reaches the template, naming the clusters.
func TestStuckDeploymentReadsDegradedOnTheControlPlane(t *testing.T) {
	g := newG(t)
	ns := "stuck"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}}},
		},
	}
	web := webDeployment(ns, 2)
	web.Spec.ProgressDeadlineSeconds = ptr.To[int32](3)
	web.Spec.Template.Spec.NodeSelector = map[string]string{"flotilla.dev/no-such-node": "true"}
	createAll(t, g, policy, web)
	g.Eventually(func() string { h, _ := argoCDHealth(t, ns, "deployment/web"); return h }).WithTimeout(2 * time.Minute).Should(gomega.Equal("Degraded"))
	_, _, err := rolloutStatus(t, ns, "web")
	g.Expect(errString(err)).To(gomega.ContainSubstring("exceeded its progress deadline"))
	c := progressing(t, ns, "web")
	g.Expect(string(c.Status) + "/" + c.Reason).To(gomega.Equal("False/ProgressDeadlineExceeded"))
	g.Expect(c.Message).To(gomega.And(gomega.ContainSubstring("cluster east"), gomega.ContainSubstring("cluster west")), "the condition names the clusters")
}

// A Deployment no cluster can run (its policy asks for more spread groups than the fleet has)
// says so on the control plane: its generation observed, Propagated=False with the
// scheduler's reason, and kubectl rollout status fails at once instead of waiting for ever.
func TestUnschedulableDeploymentSaysSoOnTheControlPlane(t *testing.T) {
	g := newG(t)
	ns := "unschedulable"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement: policyv1alpha1.Placement{SpreadConstraints: []policyv1alpha1.SpreadConstraint{
				{SpreadByField: "cluster", MinGroups: 9, MaxGroups: 9}}},
		},
	}
	createAll(t, g, policy, webDeployment(ns, 2))
	g.Eventually(func() string {
		tmpl := &appsv1.Deployment{}
		if cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, tmpl) != nil || tmpl.Status.ObservedGeneration != tmpl.Generation {
			return ""
		}
		for _, c := range tmpl.Status.Conditions {
			if string(c.Type) == names.ConditionPropagated {
				return string(c.Status) + "/" + c.Reason + ": " + c.Message
			}
		}
		return ""
	}).Should(gomega.HavePrefix("False/Unschedulable: no cluster can run it: "))
	_, _, err := rolloutStatus(t, ns, "web")
	g.Expect(errString(err)).To(gomega.ContainSubstring("exceeded its progress deadline"))
}

// progressing is the template's Progressing condition.
func progressing(t *testing.T, ns, name string) appsv1.DeploymentCondition {
	t.Helper()
	tmpl := &appsv1.Deployment{}
	if err := cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, tmpl); err != nil {
		t.Fatal(err)
	}
	for _, c := range tmpl.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			return c
		}
	}
	t.Fatalf("the template has no Progressing condition: %+v", tmpl.Status.Conditions)
	return appsv1.DeploymentCondition{}
}

// What Flotilla writes on a template it propagates does not make Argo CD's diff of the
// template (its gitops-engine diff against the manifest a user applied) report a change:
// Flotilla writes status only.
func TestArgoCDSeesNoDiffOnPropagatedTemplates(t *testing.T) {
	g := newG(t)
	ns := "argocd-diff"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}}},
			Rollout:           &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "all", Percentage: ptr.To[int32](100)}}},
		},
	}
	web := webDeployment(ns, 2)
	web.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	manifest, err := json.Marshal(web)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	createAll(t, g, policy, web)
	waitFirstRevision(g, ns)
	g.Eventually(func() string { h, _ := argoCDHealth(t, ns, "deployment/web"); return h }).Should(gomega.Equal("Healthy"))
	file := filepath.Join(t.TempDir(), "web.json")
	g.Expect(os.WriteFile(file, manifest, 0o600)).To(gomega.Succeed())
	out, err := exec.Command(filepath.Join(binDir, "argocd-check"), "diff", "--kubeconfig", fleet.Kubeconfig(""), "-f", file).CombinedOutput()
	g.Expect(err).NotTo(gomega.HaveOccurred(), string(out))
	var d struct {
		Modified bool
		Paths    []string
	}
	g.Expect(json.Unmarshal(out, &d)).To(gomega.Succeed(), string(out))
	var outsideStatus []string
	for _, p := range d.Paths {
		if !strings.HasPrefix(p, ".status") {
			outsideStatus = append(outsideStatus, p)
		}
	}
	g.Expect(outsideStatus).To(gomega.BeEmpty(), "Argo CD would see Flotilla's writes outside status as a diff: %s", out)
	g.Expect(d.Modified).To(gomega.BeFalse(), "Argo CD's diff reports the template modified: %s", out)
}
