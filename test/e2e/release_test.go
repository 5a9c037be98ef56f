package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

func memberImage(t *testing.T, cluster, ns, name string) string {
	d := &appsv1.Deployment{}
	if err := memberClient(t, cluster).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return ""
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

func memberGeneration(t *testing.T, cluster, ns, name string) int64 {
	d := &appsv1.Deployment{}
	if err := memberClient(t, cluster).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		t.Fatalf("reading %s/%s in %s: %v", ns, name, cluster, err)
	}
	return d.Generation
}

func setImage(t *testing.T, g gomega.Gomega, d *appsv1.Deployment, image string) {
	t.Helper()
	g.Eventually(func() error {
		cur := &appsv1.Deployment{}
		if err := cp.Get(context.Background(), client.ObjectKeyFromObject(d), cur); err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = image
		return cp.Update(context.Background(), cur)
	}).Should(gomega.Succeed())
}

func getRelease(ns, name string) *rolloutv1alpha1.Release {
	rel := &rolloutv1alpha1.Release{}
	if err := cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, rel); err != nil {
		return nil
	}
	return rel
}

func releasePhase(ns, name string) rolloutv1alpha1.ReleasePhase {
	if rel := getRelease(ns, name); rel != nil {
		return rel.Status.Phase
	}
	return ""
}

func wavePhase(ns, name string, wave int) rolloutv1alpha1.WavePhase {
	if rel := getRelease(ns, name); rel != nil && len(rel.Status.Waves) > wave {
		return rel.Status.Waves[wave].Phase
	}
	return ""
}

// A change travels east (manual approval), then west (bake 3s), then the rest (europe); each
// wave starts only after the previous one is healthy and its gates passed. Pause holds it,
// a controller-manager restart mid-release loses nothing and updates nothing twice, promote
// passes the approval, and at the end the revision is stable everywhere.
func TestReleaseTravelsInWaves(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "waves"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{ManualApproval: true}},
				{Name: "second", ClusterNames: []string{"west"}, Gates: policyv1alpha1.Gates{BakeTime: policyv1alpha1.DurationOf(3 * time.Second)}},
			}},
		},
	}
	web := webDeployment(ns, 2)
	createAll(t, g, policy, web)
	for _, cluster := range []string{"east", "west", "europe"} {
		g.Eventually(func() string { return memberImage(t, cluster, ns, "web") }).Should(gomega.Equal("registry.example/web:1"), "first revision in %s at once", cluster)
	}
	g.Eventually(func() *workv1alpha1.Revisions {
		if b := bindingOf(ctx, ns, "web-deployment"); b != nil {
			return b.Spec.Revisions
		}
		return nil
	}).Should(gomega.Equal(&workv1alpha1.Revisions{Latest: 1, Stable: 1}))

	// A scale is not a release.
	g.Eventually(func() error {
		cur := &appsv1.Deployment{}
		if err := cp.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
			return err
		}
		cur.Spec.Replicas = ptr.To[int32](3)
		return cp.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() int32 { return memberReplicas(t, "europe", ns, "web") }).Should(gomega.Equal(int32(3)))
	g.Expect(bindingOf(ctx, ns, "web-deployment").Spec.Revisions.Latest).To(gomega.Equal(int64(1)))

	setImage(t, g, web, "registry.example/web:2")
	rel := "web-deployment-r2"
	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase(ns, rel, 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))
	g.Expect(memberImage(t, "east", ns, "web")).To(gomega.Equal("registry.example/web:2"))
	g.Expect(memberImage(t, "west", ns, "web")).To(gomega.Equal("registry.example/web:1"), "wave two waits for wave one's approval")
	g.Expect(memberImage(t, "europe", ns, "web")).To(gomega.Equal("registry.example/web:1"))

	out, err := flotilla("release", "pause", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).Should(gomega.Equal(rolloutv1alpha1.ReleasePaused))

	// A restart mid-release resumes exactly there: no wave lost, nothing updated twice.
	eastGeneration := func() int64 {
		d := &appsv1.Deployment{}
		_ = memberClient(t, "east").Get(ctx, client.ObjectKeyFromObject(web), d)
		return d.Generation
	}
	before := eastGeneration()
	g.Expect(fleet.StopManager()).To(gomega.Succeed())
	g.Expect(fleet.StartManager(ctx)).To(gomega.Succeed())
	out, err = flotilla("release", "resume", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).Should(gomega.Equal(rolloutv1alpha1.ReleaseProgressing))
	g.Consistently(func() string { return memberImage(t, "west", ns, "web") }).WithTimeout(3 * time.Second).Should(gomega.Equal("registry.example/web:1"))
	g.Expect(wavePhase(ns, rel, 0)).To(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))
	g.Expect(eastGeneration()).To(gomega.Equal(before), "the restart must not re-apply east")

	out, err = flotilla("release", "get", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(gomega.ContainSubstring("wave first"), gomega.ContainSubstring("WaitingForApproval"), gomega.ContainSubstring("wave rest")))

	out, err = flotilla("release", "promote", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).WithTimeout(2 * time.Minute).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	for _, cluster := range []string{"east", "west", "europe"} {
		g.Expect(memberImage(t, cluster, ns, "web")).To(gomega.Equal("registry.example/web:2"), cluster)
	}
	r := getRelease(ns, rel)
	g.Expect(r.Status.Waves).To(gomega.HaveLen(3))
	first, second, rest := r.Status.Waves[0], r.Status.Waves[1], r.Status.Waves[2]
	g.Expect(second.StartedAt.Before(first.CompletedAt)).To(gomega.BeFalse(), "wave two started after wave one passed")
	g.Expect(second.CompletedAt.Sub(second.HealthyAt.Time)).To(gomega.BeNumerically(">=", 3*time.Second), "wave two baked")
	g.Expect(rest.StartedAt.Before(second.CompletedAt)).To(gomega.BeFalse(), "the rest started after wave two passed")
	g.Expect(bindingOf(ctx, ns, "web-deployment").Spec.Revisions).To(gomega.Equal(&workv1alpha1.Revisions{Latest: 2, Stable: 2}))

	g.Eventually(func() string {
		body, _ := get(t, "http://"+fleet.ManagerMetricsAddress()+"/metrics")
		return body
	}).Should(gomega.And(
		gomega.MatchRegexp(`flotilla_releases\{phase="Succeeded"\} [1-9]`),
		gomega.ContainSubstring(`flotilla_release_wave_duration_seconds_count`),
		gomega.ContainSubstring(`flotilla_release_phase_transitions_total{phase="Succeeded"}`),
	))
}

// A failing web analysis in the first wave rolls the updated cluster back by itself; later
// waves never see the new revision. The same release retried with a passing analysis goes on.
func TestFailingAnalysisRollsBack(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "analysis"
	ensureNamespace(t, cp, ns)
	const failing, passing, slow = 0, 1, 2
	var mode atomic.Int32 // what the metrics endpoint answers
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case passing:
			_, _ = w.Write([]byte(`{"errorRate": 0.01}`))
		case slow: // keeps the analysis running, so the wave waits
			select {
			case <-time.After(30 * time.Second):
			case <-r.Context().Done():
			case <-stop:
			}
		default:
			_, _ = w.Write([]byte(`{"errorRate": 0.40}`))
		}
	}))
	t.Cleanup(func() { close(stop); srv.Close() })
	tmpl := &rolloutv1alpha1.AnalysisTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "error-rate", Namespace: ns},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{Args: []rolloutv1alpha1.Argument{{Name: "revision"}}, Metrics: []rolloutv1alpha1.Metric{{
			Name: "error-rate", Interval: "1s", Count: ptr.To[int32](2),
			SuccessCondition: "result <= 0.05",
			Provider:         rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: srv.URL + "/?revision={{args.revision}}", JSONPath: "{$.errorRate}"}},
		}}},
	}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "canary", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{Analysis: &policyv1alpha1.AnalysisGate{
					Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: "error-rate"}},
				}}},
				{Name: "everyone", Percentage: ptr.To[int32](100)},
			}},
		},
	}
	web := webDeployment(ns, 1)
	createAll(t, g, tmpl, policy, web)
	for _, cluster := range []string{"east", "west", "europe"} {
		g.Eventually(func() string { return memberImage(t, cluster, ns, "web") }).Should(gomega.Equal("registry.example/web:1"))
	}
	g.Eventually(func() *workv1alpha1.Revisions { return bindingOf(ctx, ns, "web-deployment").Spec.Revisions }).ShouldNot(gomega.BeNil())

	setImage(t, g, web, "registry.example/web:2")
	rel := "web-deployment-r2"
	sawNew := map[string]bool{}
	g.Eventually(func() rolloutv1alpha1.ReleasePhase {
		for _, cluster := range []string{"east", "west", "europe"} {
			if memberImage(t, cluster, ns, "web") == "registry.example/web:2" {
				sawNew[cluster] = true
			}
		}
		return releasePhase(ns, rel)
	}).WithPolling(200 * time.Millisecond).WithTimeout(2 * time.Minute).Should(gomega.Equal(rolloutv1alpha1.ReleaseRolledBack))
	// The analysis can fail within a second, faster than polling sees east's new image, so
	// east's update is read from its Deployment's generation: to the new revision and back.
	g.Expect(sawNew).NotTo(gomega.HaveKey("west"), "only the canary wave was updated")
	g.Expect(sawNew).NotTo(gomega.HaveKey("europe"), "only the canary wave was updated")
	g.Eventually(func() string { return memberImage(t, "east", ns, "web") }).Should(gomega.Equal("registry.example/web:1"), "east is back on stable")
	g.Expect(memberGeneration(t, "east", ns, "web")).To(gomega.BeNumerically(">=", memberGeneration(t, "west", ns, "web")+2),
		"east changed to the new revision and back; west never changed")
	g.Expect(memberGeneration(t, "europe", ns, "web")).To(gomega.Equal(memberGeneration(t, "west", ns, "web")), "europe never changed either")
	r := getRelease(ns, rel)
	g.Expect(r.Status.Message).To(gomega.ContainSubstring("analysis"))
	g.Expect(r.Status.UpdatedClusters).To(gomega.Equal([]string{"east"}))
	run := &rolloutv1alpha1.AnalysisRun{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.Status.Waves[0].AnalysisRun}, run)).To(gomega.Succeed())
	g.Expect(run.Status.Phase).To(gomega.Equal(rolloutv1alpha1.AnalysisFailed))
	g.Expect(run.Status.MetricResults[0].Measurements).NotTo(gomega.BeEmpty())

	// Fixed metrics and a retry: the release goes through, with a fresh analysis run.
	mode.Store(passing)
	out, err := flotilla("release", "retry", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).WithTimeout(2 * time.Minute).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	for _, cluster := range []string{"east", "west", "europe"} {
		g.Expect(memberImage(t, cluster, ns, "web")).To(gomega.Equal("registry.example/web:2"), cluster)
	}

	// Abort of a next change, while its first wave is analysing, returns exactly what it updated.
	mode.Store(slow)
	setImage(t, g, web, "registry.example/web:3")
	g.Eventually(func() string { return memberImage(t, "east", ns, "web") }).Should(gomega.Equal("registry.example/web:3"))
	out, err = flotilla("release", "abort", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, "web-deployment-r3") }).Should(gomega.Equal(rolloutv1alpha1.ReleaseAborted))
	g.Eventually(func() string { return memberImage(t, "east", ns, "web") }).Should(gomega.Equal("registry.example/web:2"))
	g.Expect(memberImage(t, "west", ns, "web")).To(gomega.Equal("registry.example/web:2"))
	g.Expect(strings.Contains(getRelease(ns, "web-deployment-r3").Status.Message, "aborted")).To(gomega.BeTrue())
}
