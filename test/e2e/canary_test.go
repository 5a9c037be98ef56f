package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

type split struct {
	canary, primary int32
	canaryImage     string
}

func splitIn(t *testing.T, cluster, ns string) split {
	var out split
	c := memberClient(t, cluster)
	d := &appsv1.Deployment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, d); err == nil {
		out.primary = ptr.Deref(d.Spec.Replicas, 1)
	}
	canary := &appsv1.Deployment{}
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web-canary"}, canary)
	if err == nil && canary.DeletionTimestamp.IsZero() {
		out.canary, out.canaryImage = ptr.Deref(canary.Spec.Replicas, 1), canary.Spec.Template.Spec.Containers[0].Image
	} else if err != nil && !apierrors.IsNotFound(err) {
		out.canary = -1
	}
	return out
}

// 10 replicas divided 5/5 over east and west; a canary at 20% runs 1 new + 4 stable per
// cluster and passes an analysis step, at 60% 3 + 2; after the last pause the primaries take the new revision at 5 each and
// the canaries go once the primaries are available.
func TestCanaryStepsInsideAWave(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "canary"
	ensureNamespace(t, cp, ns)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"ok": true}`)) }))
	t.Cleanup(srv.Close)
	check := &rolloutv1alpha1.AnalysisTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "canary-ok", Namespace: ns},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{Metrics: []rolloutv1alpha1.Metric{{
			Name: "ok", SuccessCondition: "result == true",
			Provider: rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: srv.URL, JSONPath: "{$.ok}"}},
		}}},
	}
	one := func(cluster string) policyv1alpha1.StaticClusterWeight {
		return policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{cluster}}, Weight: 1}
	}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{
					Type: policyv1alpha1.ReplicaSchedulingDivided, DivisionPreference: policyv1alpha1.DivisionWeighted,
					WeightPreference: &policyv1alpha1.WeightPreference{StaticWeightList: []policyv1alpha1.StaticClusterWeight{one("east"), one("west")}},
				},
			},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{
				Name: "both", ClusterNames: []string{"east", "west"},
				Steps: []policyv1alpha1.CanaryStep{
					{SetWeight: ptr.To[int32](20)},
					{Analysis: &policyv1alpha1.AnalysisGate{Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: "canary-ok"}}}},
					{Pause: &policyv1alpha1.PauseStep{}},
					{SetWeight: ptr.To[int32](60)}, {Pause: &policyv1alpha1.PauseStep{}},
				},
			}}},
		},
	}
	web := webDeployment(ns, 10)
	createAll(t, g, check, policy, web)
	for _, cluster := range []string{"east", "west"} {
		g.Eventually(func() split { return splitIn(t, cluster, ns) }).Should(gomega.Equal(split{primary: 5}), cluster)
	}
	g.Eventually(func() bool { return bindingOf(ctx, ns, "web-deployment").Spec.Revisions != nil }).Should(gomega.BeTrue())

	setImage(t, g, web, "registry.example/web:2")
	rel := "web-deployment-r2"
	atPause := func(step int32) func() string {
		return func() string {
			if r := getRelease(ns, rel); r != nil && len(r.Status.Waves) > 0 && r.Status.Waves[0].CurrentStep == step {
				return string(r.Status.Waves[0].Phase)
			}
			return ""
		}
	}
	g.Eventually(atPause(2)).Should(gomega.Equal(string(rolloutv1alpha1.WaveWaitingForApproval)))
	run := &rolloutv1alpha1.AnalysisRun{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: rel + "-both-step1"}, run)).To(gomega.Succeed())
	g.Expect(run.Status.Phase).To(gomega.Equal(rolloutv1alpha1.AnalysisSuccessful), "the analysis step passed before the pause")
	for _, cluster := range []string{"east", "west"} {
		g.Eventually(func() split { return splitIn(t, cluster, ns) }).Should(gomega.Equal(split{canary: 1, primary: 4, canaryImage: "registry.example/web:2"}), "20%% in %s", cluster)
		g.Expect(memberImage(t, cluster, ns, "web")).To(gomega.Equal("registry.example/web:1"), "the primary stays stable")
	}

	out, err := flotilla("release", "promote", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(atPause(4)).Should(gomega.Equal(string(rolloutv1alpha1.WaveWaitingForApproval)))
	for _, cluster := range []string{"east", "west"} {
		g.Eventually(func() split { return splitIn(t, cluster, ns) }).Should(gomega.Equal(split{canary: 3, primary: 2, canaryImage: "registry.example/web:2"}), "60%% in %s", cluster)
	}

	out, err = flotilla("release", "promote", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	for _, cluster := range []string{"east", "west"} {
		g.Eventually(func() split { return splitIn(t, cluster, ns) }).Should(gomega.Equal(split{primary: 5}), "canary gone in %s", cluster)
		g.Expect(memberImage(t, cluster, ns, "web")).To(gomega.Equal("registry.example/web:2"))
	}
	// Nobody touched the members: the canary's own applies are never taken for drift.
	for _, cs := range bindingOf(ctx, ns, "web-deployment").Status.Clusters {
		if cs.Drift != nil {
			t.Errorf("cluster %s reports drift after a release nobody interfered with: %+v", cs.Cluster, *cs.Drift)
		}
	}
}

// A canary step for a kind that cannot run one is refused, naming the fix.
func TestCanaryStepsForOtherKindsAreRejected(t *testing.T) {
	g := newG(t)
	ensureNamespace(t, cp, "canary-bad")
	p := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "canary-bad"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap"}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{
				Name: "a", Percentage: ptr.To[int32](100), Steps: []policyv1alpha1.CanaryStep{{SetWeight: ptr.To[int32](10)}},
			}}},
		},
	}
	err := cp.Create(context.Background(), p)
	g.Expect(err).To(gomega.HaveOccurred())
	g.Expect(err.Error()).To(gomega.ContainSubstring("setWeight canary steps work for apps/v1 Deployments only"))
	p.Spec.ResourceSelectors = []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}}
	p.Spec.Rollout.Waves[0].Steps = []policyv1alpha1.CanaryStep{{SetWeight: ptr.To[int32](50)}, {SetWeight: ptr.To[int32](20)}}
	err = cp.Create(context.Background(), p)
	g.Expect(err).To(gomega.HaveOccurred())
	g.Expect(err.Error()).To(gomega.ContainSubstring("setWeight must not decrease"))
}
