package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// docsFleetYAML is the fleet the docs' screenshots show (FLOTILLA_DOCS_SCREENSHOTS): three
// regions, two production clusters and a staging one.
const docsFleetYAML = `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
members:
- name: eu-west-1
  labels: {region: eu-west, zone: eu-west-1a, tier: prod}
  shortName: euw1
  environment: prod
  description: production, EU West (Dublin)
- name: us-east-1
  labels: {region: us-east, zone: us-east-1a, tier: prod}
  shortName: use1
  environment: prod
  description: production, US East (Virginia)
- name: ap-south-1
  labels: {region: ap-south, zone: ap-south-1a, tier: staging}
  shortName: aps1
  environment: staging
  description: staging, Asia Pacific (Mumbai)
`

// docsScreenshotsDir is $FLOTILLA_DOCS_SCREENSHOTS: the directory the docs' screenshots are
// written to (docs/ of the repository); empty for an ordinary run.
func docsScreenshotsDir() string { return os.Getenv("FLOTILLA_DOCS_SCREENSHOTS") }

// docsDeployment is an Application's inline manifest of a Deployment.
func docsDeployment(name, image string, replicas int) appsv1alpha1.Manifest {
	return appsv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: fmt.Appendf(nil,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%[1]q},"spec":{"replicas":%[2]d,"selector":{"matchLabels":{"app":%[1]q}},`+
			`"template":{"metadata":{"labels":{"app":%[1]q}},"spec":{"containers":[{"name":%[1]q,"image":%[3]q}]}}}}`, name, replicas, image)}}
}

// Regenerates docs/dashboard-fleet.png and docs/dashboard-release.png on a realistic fleet:
//
//	cd test/e2e && FLOTILLA_DOCS_SCREENSHOTS=$PWD/../../docs FLOTILLA_BIN_DIR=... go test -run TestDocsScreenshots .
//
// Given the fleet eu-west-1, us-east-1 and ap-south-1 and the teams shop and payments with
// their applications shop/checkout, shop/cart and payments/ledger, when checkout's new image
// is released (a canary in ap-south-1 with analysis, then production), then the fleet matrix
// and the release page are captured while the release waits for approval. Skipped unless
// FLOTILLA_DOCS_SCREENSHOTS is set (TestMain then starts this fleet instead of the tests').
func TestDocsScreenshots(t *testing.T) {
	dir := docsScreenshotsDir()
	if dir == "" {
		t.Skip("set FLOTILLA_DOCS_SCREENSHOTS=DIR to write the docs' dashboard screenshots into DIR")
	}
	g := newG(t)
	bg := context.Background()
	for _, args := range [][]string{
		{"team", "create", "shop", "--contributor", "shop-devs", "--reader", "shop-viewers", "--description", "the web shop"},
		{"team", "create", "payments", "--contributor", "payments-devs", "--description", "payments and ledger"},
	} {
		// Another test may still be deleting a namespace of the same name.
		g.Eventually(func() error {
			_, err := flotilla(append(args, "--kubeconfig", fleet.Kubeconfig(""))...)
			return err
		}).WithTimeout(2*time.Minute).Should(gomega.Succeed(), "flotilla %v", args)
	}
	// The platform's viewer: reads every team and the clusters.
	ensureNamespace(t, cp, "platform")
	g.Expect(client.IgnoreAlreadyExists(cp.Create(bg, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "platform-ops"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "platform", Name: "ops"}}}))).To(gomega.Succeed())
	token := serviceAccountToken(t, g, "platform", "ops")

	// The analysis reads an error rate that drifts a little with each call.
	var calls atomic.Int64
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := calls.Add(1)
		_, _ = fmt.Fprintf(w, `{"data": {"errorRate": %.4f}}`, 0.004+0.0015*float64(n%5))
	}))
	t.Cleanup(metrics.Close)
	errors := &rolloutv1alpha1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: "checkout-errors", Namespace: "shop"},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{Metrics: []rolloutv1alpha1.Metric{{
			Name: "error-rate", Interval: "2s", Count: ptr.To[int32](6), SuccessCondition: "result < 0.02",
			Provider: rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: metrics.URL, JSONPath: "{$.data.errorRate}"}},
		}}}}
	checkout := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout", Labels: map[string]string{"tier": "web", "release": "waves"}},
		Spec: appsv1alpha1.ApplicationSpec{Description: "Checkout and payment capture for the web shop", Source: appsv1alpha1.ApplicationSource{Inline: &appsv1alpha1.InlineSource{
			Manifests: []appsv1alpha1.Manifest{docsDeployment("checkout", "registry.example/shop/checkout:2.3.1", 4)}}}}}
	cart := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart", Labels: map[string]string{"tier": "web"}},
		Spec: appsv1alpha1.ApplicationSpec{Description: "Shopping cart service", Source: appsv1alpha1.ApplicationSource{Inline: &appsv1alpha1.InlineSource{
			Manifests: []appsv1alpha1.Manifest{docsDeployment("cart", "registry.example/shop/cart:1.4.0", 2),
				{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cart-config"},"data":{"CURRENCY":"EUR"}}`)}}}}}}}
	ledger := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "ledger", Labels: map[string]string{"tier": "backend"}},
		Spec: appsv1alpha1.ApplicationSpec{Description: "Double-entry ledger behind every payment", Source: appsv1alpha1.ApplicationSource{Inline: &appsv1alpha1.InlineSource{
			Manifests: []appsv1alpha1.Manifest{docsDeployment("ledger", "registry.example/payments/ledger:5.2.0", 3)}}}}}
	checkoutTarget := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout-waves"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:     policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"release": "waves"}},
		ClusterSelector: policyv1alpha1.LabelSelector{MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "region", Operator: "Exists"}}},
		Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
			{Name: "staging", ClusterNames: []string{"ap-south-1"}, Steps: []policyv1alpha1.CanaryStep{
				{SetWeight: ptr.To[int32](25)},
				{Analysis: &policyv1alpha1.AnalysisGate{Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: errors.Name}}}},
				{Pause: &policyv1alpha1.PauseStep{}},
			}},
			{Name: "production", ClusterSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"tier": "prod"}},
				Gates: policyv1alpha1.Gates{ManualApproval: true}},
		}},
	}}
	cartTarget := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart-everywhere"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:     policyv1alpha1.LabelSelector{MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "release", Operator: "DoesNotExist"}}},
		ClusterSelector: policyv1alpha1.LabelSelector{MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "region", Operator: "Exists"}}}}}
	ledgerTarget := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "production"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:     policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"tier": "backend"}},
		ClusterSelector: policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"tier": "prod"}}}}
	createAll(t, g, errors, checkout, cart, ledger, checkoutTarget, cartTarget, ledgerTarget)
	for _, m := range []string{"eu-west-1", "us-east-1", "ap-south-1"} {
		g.Eventually(func() string { return memberImage(t, m, "shop", "checkout") }).WithTimeout(3*time.Minute).Should(gomega.Equal("registry.example/shop/checkout:2.3.1"), m)
		g.Eventually(func() string { return memberImage(t, m, "shop", "cart") }).Should(gomega.Equal("registry.example/shop/cart:1.4.0"), m)
	}
	for _, m := range []string{"eu-west-1", "us-east-1"} {
		g.Eventually(func() string { return memberImage(t, m, "payments", "ledger") }).Should(gomega.Equal("registry.example/payments/ledger:5.2.0"), m)
	}

	// When: checkout's new image is released.
	g.Eventually(func() error {
		cur := &appsv1alpha1.Application{}
		if err := cp.Get(bg, client.ObjectKeyFromObject(checkout), cur); err != nil {
			return err
		}
		cur.Spec.Source.Inline.Manifests[0] = docsDeployment("checkout", "registry.example/shop/checkout:2.4.0", 4)
		return cp.Update(bg, cur)
	}).Should(gomega.Succeed())
	const rel = "checkout-deployment-r2"
	g.Eventually(func() *rolloutv1alpha1.Release { return getRelease("shop", rel) }).ShouldNot(gomega.BeNil())

	// Then: the release page, once the analysis has measured and the canary waits for approval.
	ctx := browser(t)
	login(t, ctx, token)
	goToPage(t, g, ctx, "#/release/shop/"+rel, "#release-phase")
	g.Eventually(func() int {
		n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`Math.max(0, ...[...document.querySelectorAll('svg[data-testid=analysis-chart]')].map(s => +s.dataset.points))`))
		return n
	}).WithTimeout(3 * time.Minute).Should(gomega.BeNumerically(">=", 6))
	g.Eventually(func() string { return textOf(ctx, `[data-wave="staging"]`) }).WithTimeout(time.Minute).Should(gomega.ContainSubstring("WaitingForApproval"))
	docsScreenshot(t, ctx, filepath.Join(dir, "dashboard-release.png"))

	// And the fleet matrix: checkout's canary in staging, the rest on the stable revision.
	goToPage(t, g, ctx, "#/fleet", `[data-cell="payments/ledger/us-east-1"]`)
	g.Eventually(func() string { return textOf(ctx, `[data-cell="payments/ledger/eu-west-1"]`) }).Should(gomega.ContainSubstring("Healthy"))
	g.Eventually(func() string { return textOf(ctx, `[data-cell="shop/cart/ap-south-1"]`) }).Should(gomega.ContainSubstring("Healthy"))
	docsScreenshot(t, ctx, filepath.Join(dir, "dashboard-fleet.png"))
}

func docsScreenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	inBrowser(t, ctx, "settle", chromedp.Sleep(time.Second))
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
