package release

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/revision"
)

// A release's strategy has the platform's trust only when the platform wrote it: a team's
// rollout carried by a generated ClusterPropagationPolicy keeps the team's limits, and what a
// release was created with is what counts, whatever its binding's policy says later.
func TestStrategyTrustFollowsWhoWroteTheRollout(t *testing.T) {
	rollout := &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "all"}}}
	r := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(
		&policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "platform"}, Spec: policyv1alpha1.PropagationSpec{Rollout: rollout}},
		&policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "app-shop.web",
			Annotations: map[string]string{policyv1alpha1.RolloutWrittenByAnnotation: "TargetPolicy shop/web"}}, Spec: policyv1alpha1.PropagationSpec{Rollout: rollout}},
		&policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: policyv1alpha1.PropagationSpec{Rollout: rollout}},
	).Build()
	for _, c := range []struct {
		ref  workv1alpha1.PolicyReference
		want string
	}{
		{workv1alpha1.PolicyReference{Kind: "ClusterPropagationPolicy", Name: "platform"}, revision.StrategyTrustPlatform},
		{workv1alpha1.PolicyReference{Kind: "ClusterPropagationPolicy", Name: "app-shop.web"}, revision.StrategyTrustNamespace},
		{workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "web"}, revision.StrategyTrustNamespace},
	} {
		p, err := policyOf(context.Background(), r, c.ref)
		if err != nil {
			t.Fatal(err)
		}
		if p.trust != c.want || p.spec.Rollout == nil {
			t.Errorf("%s %s: trust %q, want %q", c.ref.Kind, c.ref.Name, p.trust, c.want)
		}
	}
	if _, err := policyOf(context.Background(), r, workv1alpha1.PolicyReference{Kind: "ClusterPropagationPolicy", Name: "gone"}); client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("a missing policy: %v, want NotFound", err)
	}

	rel := func(labels map[string]string) *rolloutv1alpha1.Release {
		return &rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"the platform's rollout", map[string]string{revision.PolicyKindLabel: "ClusterPropagationPolicy", revision.StrategyTrustLabel: revision.StrategyTrustPlatform}, true},
		{"a team's rollout in a platform policy", map[string]string{revision.PolicyKindLabel: "ClusterPropagationPolicy", revision.StrategyTrustLabel: revision.StrategyTrustNamespace}, false},
		{"a team's own policy", map[string]string{revision.PolicyKindLabel: "PropagationPolicy", revision.StrategyTrustLabel: revision.StrategyTrustNamespace}, false},
		{"recorded before the trust label", map[string]string{revision.PolicyKindLabel: "ClusterPropagationPolicy"}, true},
		{"an unknown trust value", map[string]string{revision.PolicyKindLabel: "ClusterPropagationPolicy", revision.StrategyTrustLabel: "Platform"}, false},
		{"no labels", nil, false},
	} {
		if got := PlatformStrategy(rel(c.labels)); got != c.want {
			t.Errorf("%s: platform %v, want %v", c.name, got, c.want)
		}
	}
}

// A release recorded before the trust label, of a policy now marked as carrying a team's
// rollout, loses the platform's trust at its next gate; it never gains any.
func TestAReleaseLosesPlatformTrustWhenItsPolicyNowSaysATeamWroteIt(t *testing.T) {
	rollout := &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "all"}}}
	marked := &policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "app-shop.web",
		Annotations: map[string]string{policyv1alpha1.RolloutWrittenByAnnotation: "TargetPolicy shop/web"}}, Spec: policyv1alpha1.PropagationSpec{Rollout: rollout}}
	platform := &policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "platform"}, Spec: policyv1alpha1.PropagationSpec{Rollout: rollout}}
	c := &Controller{Client: fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(marked, platform).Build()}
	binding := func(policy string) *workv1alpha1.ResourceBinding {
		return &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment"},
			Spec: workv1alpha1.ResourceBindingSpec{PolicyRef: workv1alpha1.PolicyReference{Kind: "ClusterPropagationPolicy", Name: policy}}}
	}
	old := &rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{revision.PolicyKindLabel: "ClusterPropagationPolicy"}}}
	if c.platformStrategy(context.Background(), old, binding("app-shop.web")) {
		t.Error("a label-less release of a team's rollout keeps the platform's trust")
	}
	if !c.platformStrategy(context.Background(), old, binding("platform")) {
		t.Error("a label-less release of the platform's rollout lost its trust")
	}
	tenant := &rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{revision.PolicyKindLabel: "ClusterPropagationPolicy", revision.StrategyTrustLabel: revision.StrategyTrustNamespace}}}
	if c.platformStrategy(context.Background(), tenant, binding("platform")) {
		t.Error("a team's release gained the platform's trust from its binding's policy")
	}
}

// A gate names an AnalysisTemplate of the release's own namespace: one of the same name in
// another team's namespace is never read, and the release is held saying where it looked.
func TestAnalysisTemplateIsReadFromTheReleasesNamespaceOnly(t *testing.T) {
	other := &rolloutv1alpha1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "checks"},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{Metrics: []rolloutv1alpha1.Metric{{Name: "m"}}}}
	c := &Controller{Client: fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(other).Build()}
	rel := &rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-deployment-r2"}, Spec: rolloutv1alpha1.ReleaseSpec{
		Strategy: policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "first", Gates: policyv1alpha1.Gates{Analysis: &policyv1alpha1.AnalysisGate{
			Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: "checks"}}}}}}}}}
	problems := c.validate(context.Background(), rel, []Wave{{Name: "first", Clusters: []string{"east"}}}, false)
	if len(problems) != 1 || !strings.Contains(problems[0], `AnalysisTemplate "checks" not found in namespace team-a`) || !strings.HasPrefix(problems[0], "blocking:") {
		t.Errorf("problems %q, want the release held on a template missing from team-a", problems)
	}
}

// A tenant looping abort and retry makes a fresh AnalysisRun per attempt; as each retry starts,
// the runs of all but the last attempts go, so the loop leaves a bounded number behind. Runs of
// other releases are never touched.
func TestAbortRetryLoopKeepsAnalysisRunsBounded(t *testing.T) {
	rel := &rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment-r2", UID: "rel-uid"}}
	run := func(name string, owner types.UID) client.Object {
		return &rolloutv1alpha1.AnalysisRun{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: rolloutv1alpha1.GroupVersion.String(), Kind: "Release", Name: "r", UID: owner, Controller: ptr.To(true)}}}}
	}
	objs := []client.Object{run("web-deployment-r2-first", "rel-uid"), run("other-first-retry1", "other-uid")}
	for _, a := range []int{1, 2, 7, 40, 41} {
		objs = append(objs, run(fmt.Sprintf("web-deployment-r2-first-retry%d", a), "rel-uid"), run(fmt.Sprintf("web-deployment-r2-canary-retry%d", a), "rel-uid"))
	}
	c := &Controller{Client: fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(objs...).Build()}
	if err := c.pruneAttempts(context.Background(), rel); err != nil {
		t.Fatal(err)
	}
	var left rolloutv1alpha1.AnalysisRunList
	if err := c.Client.List(context.Background(), &left); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range left.Items {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	want := []string{"other-first-retry1", "web-deployment-r2-canary-retry40", "web-deployment-r2-canary-retry41", "web-deployment-r2-first-retry40", "web-deployment-r2-first-retry41"}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("runs left (-want +got):\n%s", d)
	}
}
