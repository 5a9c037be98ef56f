package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis"
)

// A job analysis runs its Job in the wave's clusters only (kwok completes its pod), and its
// success passes the gate.
func TestJobAnalysisRunsInTheWavesClusters(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "job-analysis"
	ensureNamespace(t, cp, ns)
	jobPods := podSpec("smoke")
	jobPods.Spec.RestartPolicy = "Never"
	// A namespace's analysis Jobs must meet Pod Security restricted.
	jobPods.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	jobPods.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&batchv1.JobSpec{Template: jobPods, BackoffLimit: ptr.To[int32](0)})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	spec, err := json.Marshal(raw)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	tmpl := &rolloutv1alpha1.AnalysisTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: ns},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{Metrics: []rolloutv1alpha1.Metric{{
			Name: "smoke", Provider: rolloutv1alpha1.MetricProvider{Job: &rolloutv1alpha1.JobMetric{Spec: runtime.RawExtension{Raw: spec}}},
		}}},
	}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "smoke-tested", ClusterNames: []string{"west"}, Gates: policyv1alpha1.Gates{Analysis: &policyv1alpha1.AnalysisGate{
					Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: "smoke"}},
				}}},
			}},
		},
	}
	web := webDeployment(ns, 1)
	createAll(t, g, tmpl, policy, web)
	g.Eventually(func() string { return memberImage(t, "europe", ns, "web") }).Should(gomega.Equal("registry.example/web:1"))
	g.Eventually(func() bool { return bindingOf(ctx, ns, "web-deployment").Spec.Revisions != nil }).Should(gomega.BeTrue())

	setImage(t, g, web, "registry.example/web:2")
	rel := "web-deployment-r2"
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	jobsIn := func(cluster string) int {
		list := &batchv1.JobList{}
		if err := memberClient(t, cluster).List(ctx, list, client.InNamespace(ns), client.MatchingLabels{analysis.AnalysisRunLabel: rel + "-smoke-tested"}); err != nil {
			return -1
		}
		return len(list.Items)
	}
	g.Expect(jobsIn("west")).To(gomega.Equal(1), "the analysis Job ran in the wave's cluster")
	g.Expect(jobsIn("east")).To(gomega.Equal(0))
	g.Expect(jobsIn("europe")).To(gomega.Equal(0))
	run := &rolloutv1alpha1.AnalysisRun{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: rel + "-smoke-tested"}, run)).To(gomega.Succeed())
	g.Expect(run.Status.Phase).To(gomega.Equal(rolloutv1alpha1.AnalysisSuccessful))
}

// A cluster that becomes a placement target mid-release takes the revision its wave implies:
// the new one in the wave in progress, the stable one in a wave not reached yet.
func TestClusterJoiningMidReleaseGetsItsWavesRevision(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "joining"
	ensureNamespace(t, cp, ns)
	setTier := func(cluster, tier string) {
		g.Eventually(func() error {
			cl := &clusterv1alpha1.Cluster{}
			if err := cp.Get(ctx, client.ObjectKey{Name: cluster}, cl); err != nil {
				return err
			}
			if tier == "" {
				delete(cl.Labels, "e2e-tier")
			} else {
				cl.Labels["e2e-tier"] = tier
			}
			return cp.Update(ctx, cl)
		}).Should(gomega.Succeed())
	}
	setTier("east", "web")
	t.Cleanup(func() {
		for _, c := range []string{"east", "west", "europe"} {
			setTier(c, "")
		}
	})
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{
				LabelSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"e2e-tier": "web"}},
			}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{"east", "west"}, Gates: policyv1alpha1.Gates{ManualApproval: true}},
			}},
		},
	}
	web := webDeployment(ns, 1)
	createAll(t, g, policy, web)
	g.Eventually(func() string { return memberImage(t, "east", ns, "web") }).Should(gomega.Equal("registry.example/web:1"))
	g.Eventually(func() bool { return bindingOf(ctx, ns, "web-deployment").Spec.Revisions != nil }).Should(gomega.BeTrue())

	setImage(t, g, web, "registry.example/web:2")
	rel := "web-deployment-r2"
	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase(ns, rel, 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))

	// west joins the wave in progress, europe the rest wave that has not started.
	setTier("west", "web")
	setTier("europe", "web")
	g.Eventually(func() string { return memberImage(t, "west", ns, "web") }).Should(gomega.Equal("registry.example/web:2"), "west is in the wave in progress")
	g.Eventually(func() string { return memberImage(t, "europe", ns, "web") }).Should(gomega.Equal("registry.example/web:1"), "europe's wave has not started: stable")

	out, err := flotilla("release", "promote", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	g.Eventually(func() string { return memberImage(t, "europe", ns, "web") }).Should(gomega.Equal("registry.example/web:2"))
}

// Nonsense in a rollout is refused at admission with a message naming what to fix.
func TestInvalidRolloutsAreRejected(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ensureNamespace(t, cp, "bad-rollouts")
	for _, tc := range []struct {
		name  string
		waves []policyv1alpha1.Wave
		want  string
	}{
		{"over-100", []policyv1alpha1.Wave{{Name: "a", Percentage: ptr.To[int32](60)}, {Name: "b", Percentage: ptr.To[int32](50)}}, "percentages add up to more than 100"},
		{"two-ways", []policyv1alpha1.Wave{{Name: "a", Percentage: ptr.To[int32](10), ClusterNames: []string{"east"}}}, "exactly one way"},
		{"no-way", []policyv1alpha1.Wave{{Name: "a"}}, "exactly one way"},
		{"same-name", []policyv1alpha1.Wave{{Name: "a", ClusterNames: []string{"east"}}, {Name: "a", ClusterNames: []string{"west"}}}, "wave names must be unique"},
		{"percent-zero", []policyv1alpha1.Wave{{Name: "a", Percentage: ptr.To[int32](0)}}, "percentage"},
		{"bad-name", []policyv1alpha1.Wave{{Name: "Wave One", ClusterNames: []string{"east"}}}, "name"},
		{"no-waves", nil, "waves"},
	} {
		p := &policyv1alpha1.PropagationPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: "bad-rollouts"},
			Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
				Rollout:           &policyv1alpha1.RolloutStrategy{Waves: tc.waves},
			},
		}
		err := cp.Create(ctx, p)
		g.Expect(err).To(gomega.HaveOccurred(), tc.name)
		g.Expect(err.Error()).To(gomega.ContainSubstring(tc.want), tc.name)
	}
}

// An unknown analysis template holds a release, naming the field, before any cluster changes;
// a newer change supersedes it; undo puts the stable workload back into the template.
func TestHeldReleaseSupersedeAndUndo(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "undo"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{
				Name: "first", ClusterNames: []string{"east"},
				Gates: policyv1alpha1.Gates{Analysis: &policyv1alpha1.AnalysisGate{Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: "missing"}}}},
			}}},
		},
	}
	web := webDeployment(ns, 1)
	createAll(t, g, policy, web)
	g.Eventually(func() string { return memberImage(t, "east", ns, "web") }).Should(gomega.Equal("registry.example/web:1"))
	g.Eventually(func() bool { return bindingOf(ctx, ns, "web-deployment").Spec.Revisions != nil }).Should(gomega.BeTrue())

	setImage(t, g, web, "registry.example/web:2")
	valid := func(name string) string {
		if r := getRelease(ns, name); r != nil {
			if c := meta.FindStatusCondition(r.Status.Conditions, "Valid"); c != nil && c.Status == metav1.ConditionFalse {
				return c.Message
			}
		}
		return ""
	}
	g.Eventually(func() string { return valid("web-deployment-r2") }).Should(gomega.ContainSubstring(
		`spec.strategy.waves[0].gates.analysis.templates[0].templateName: AnalysisTemplate "missing" not found`))
	g.Consistently(func() string { return memberImage(t, "east", ns, "web") }).WithTimeout(2*time.Second).Should(gomega.Equal("registry.example/web:1"), "a held release changes no cluster")

	setImage(t, g, web, "registry.example/web:3")
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, "web-deployment-r2") }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSuperseded))
	g.Eventually(func() string { return valid("web-deployment-r3") }).ShouldNot(gomega.BeEmpty())

	out, err := flotilla("release", "undo", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("workload of revision 1 put back"))
	cur := &appsv1.Deployment{}
	g.Expect(cp.Get(ctx, client.ObjectKeyFromObject(web), cur)).To(gomega.Succeed())
	g.Expect(cur.Spec.Template.Spec.Containers[0].Image).To(gomega.Equal("registry.example/web:1"))
	g.Eventually(func() int64 { return bindingOf(ctx, ns, "web-deployment").Spec.Revisions.Latest }).Should(gomega.Equal(int64(4)), "undo is a change like any other")
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, "web-deployment-r3") }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSuperseded))

	out, err = flotilla("release", "undo", "deployment/web", "-n", ns, "--to-revision", "9")
	g.Expect(err).To(gomega.HaveOccurred())
	g.Expect(out + err.Error()).To(gomega.ContainSubstring("--to-revision 9: revisions run from 1 to 4"))
}
