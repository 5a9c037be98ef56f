package release

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
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
		{workv1alpha1.PolicyReference{Kind: "ClusterPropagationPolicy", Name: "platform"}, StrategyTrustPlatform},
		{workv1alpha1.PolicyReference{Kind: "ClusterPropagationPolicy", Name: "app-shop.web"}, StrategyTrustNamespace},
		{workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "web"}, StrategyTrustNamespace},
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
		{"the platform's rollout", map[string]string{PolicyKindLabel: "ClusterPropagationPolicy", StrategyTrustLabel: StrategyTrustPlatform}, true},
		{"a team's rollout in a platform policy", map[string]string{PolicyKindLabel: "ClusterPropagationPolicy", StrategyTrustLabel: StrategyTrustNamespace}, false},
		{"a team's own policy", map[string]string{PolicyKindLabel: "PropagationPolicy", StrategyTrustLabel: StrategyTrustNamespace}, false},
		{"recorded before the trust label", map[string]string{PolicyKindLabel: "ClusterPropagationPolicy"}, true},
		{"an unknown trust value", map[string]string{PolicyKindLabel: "ClusterPropagationPolicy", StrategyTrustLabel: "Platform"}, false},
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
	old := &rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{PolicyKindLabel: "ClusterPropagationPolicy"}}}
	if c.platformStrategy(context.Background(), old, binding("app-shop.web")) {
		t.Error("a label-less release of a team's rollout keeps the platform's trust")
	}
	if !c.platformStrategy(context.Background(), old, binding("platform")) {
		t.Error("a label-less release of the platform's rollout lost its trust")
	}
	tenant := &rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{PolicyKindLabel: "ClusterPropagationPolicy", StrategyTrustLabel: StrategyTrustNamespace}}}
	if c.platformStrategy(context.Background(), tenant, binding("platform")) {
		t.Error("a team's release gained the platform's trust from its binding's policy")
	}
}
