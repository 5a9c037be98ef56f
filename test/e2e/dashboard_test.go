package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
)

// xssDescription is an Application description a hostile contributor might write.
const xssDescription = `<img src=x onerror="document.title='pwned'"><b>bold</b>`

// serviceAccountToken makes a service account in namespace and returns a token for it: its
// user is system:serviceaccount:NAMESPACE:NAME, in group system:serviceaccounts:NAMESPACE.
func serviceAccountToken(t *testing.T, g gomega.Gomega, namespace, name string) string {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, cp, namespace)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	g.Expect(client.IgnoreAlreadyExists(cp.Create(ctx, sa))).To(gomega.Succeed())
	cfg, err := fleet.RESTConfig("")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	kc := kubernetes.NewForConfigOrDie(cfg)
	tr, err := kc.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return tr.Status.Token
}

// artifactsDir is where browser tests save screenshots: $FLOTILLA_E2E_ARTIFACTS, else
// _artifacts at the top of the repository (ignored by git, kept by CI).
func artifactsDir(t *testing.T) string {
	dir := os.Getenv("FLOTILLA_E2E_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "_artifacts")
	}
	dir = filepath.Join(dir, "dashboard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts Debian's headless Chromium for one test, with the flags this machine's closed
// network needs and a profile of its own.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("browser tests need Debian's chromium (.ci/run installs it: apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("ignore-certificate-errors", true), // the fleet's own CA signs the inventory API's certificate
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1500, 1000))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

func inBrowser(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	timed, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(timed, steps...); err != nil {
		html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
		t.Fatalf("%s: %v\npage: %s", what, err, html)
	}
}

// logOut clicks Log out from the page's own script: the header is re-rendered by the live
// refresh, so a node the driver found may be gone by the time it clicks.
func logOut(t *testing.T, ctx context.Context) {
	t.Helper()
	evaluate[bool](t, ctx, `(document.getElementById("logout").click(), true)`)
	inBrowser(t, ctx, "log out", chromedp.WaitVisible(chromedp.ID("token")))
}

// evaluate runs JavaScript in the page and returns its value.
func evaluate[T any](t *testing.T, ctx context.Context, js string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, opts...))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	inBrowser(t, ctx, "settle", chromedp.Sleep(300*time.Millisecond))
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(artifactsDir(t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

func login(t *testing.T, ctx context.Context, token string) {
	t.Helper()
	inBrowser(t, ctx, "log in",
		chromedp.Navigate(fleet.DashboardURL()),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SetValue(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("logout")))
}

// goTo opens a page of the dashboard already loaded (a same-document navigation).
func goTo(t *testing.T, ctx context.Context, hash string) {
	t.Helper()
	evaluate[string](t, ctx, fmt.Sprintf(`location.hash = %q`, hash))
}

// goToPage opens a page and waits until it shows selector, opening it again if the dashboard
// moved elsewhere meanwhile (right after a login it opens the fleet page on its own).
func goToPage(t *testing.T, g gomega.Gomega, ctx context.Context, hash, selector string) {
	t.Helper()
	g.Eventually(func() bool {
		js := fmt.Sprintf(`(() => { if (location.hash !== %q) location.hash = %[1]q; return !!document.querySelector(%q); })()`, hash, selector)
		ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		return ok
	}).WithTimeout(time.Minute).Should(gomega.BeTrue(), "page %s showing %s", hash, selector)
}

// textOf reads an element's text, "" when it is not there.
func textOf(ctx context.Context, selector string) string {
	out, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, selector)))
	return out
}

// In a real headless Chromium against the local fleet's controller-manager (--dashboard):
// a reader of team A logs in with a token and sees only team A's application in the fleet
// matrix, with the version each cluster runs; an HTML description stays text; a release in
// progress updates in the open page (its analysis chart gains points) without a reload; the
// reader sees no promote button and a forged promote (with or without the CSRF token) is
// refused 403; a contributor of team A promotes from the page and the release moves on.
// Screenshots of every page are saved as artifacts.
func TestDashboardInARealBrowser(t *testing.T) {
	g := newG(t)
	bg := context.Background()
	teamA, teamB := "dash-a", "dash-b"
	for _, args := range [][]string{
		{"team", "create", teamA, "--contributor", "system:serviceaccounts:dash-a-devs", "--reader", "system:serviceaccounts:dash-a-readers"},
		{"team", "create", teamB, "--contributor", "system:serviceaccounts:dash-b-devs"},
	} {
		out, err := flotilla(append(args, "--kubeconfig", fleet.Kubeconfig(""))...)
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	}
	g.Eventually(func() bool {
		for _, ns := range []string{teamA, teamB} {
			team := &tenancyv1alpha1.Team{}
			if cp.Get(bg, client.ObjectKey{Namespace: ns, Name: tenancyv1alpha1.TeamName}, team) != nil || team.Status.ObservedGeneration == 0 {
				return false
			}
		}
		return true
	}).Should(gomega.BeTrue())
	readerToken := serviceAccountToken(t, g, "dash-a-readers", "carol")
	devToken := serviceAccountToken(t, g, "dash-a-devs", "alice")

	// The analysis measures a value that grows with each call, so the chart has a shape.
	var calls atomic.Int64
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintf(w, `{"errorRate": %.3f}`, 0.01+0.002*float64(calls.Add(1)))
	}))
	t.Cleanup(metrics.Close)
	check := &rolloutv1alpha1.AnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: "errors", Namespace: teamA},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{Metrics: []rolloutv1alpha1.Metric{{
			Name: "error-rate", Interval: "1s", Count: ptr.To[int32](4), SuccessCondition: "result < 0.5",
			Provider: rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: metrics.URL, JSONPath: "{$.errorRate}"}},
		}}}}
	shopManifest := func(image string) []byte {
		return []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"shop"},"spec":{"replicas":2,` +
			`"selector":{"matchLabels":{"app":"shop"}},"template":{"metadata":{"labels":{"app":"shop"}},"spec":{"containers":[{"name":"shop","image":"` + image + `"}]}}}}`)
	}
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "shop", Labels: map[string]string{"dash": "shop"}},
		Spec: appsv1alpha1.ApplicationSpec{Description: xssDescription, Source: appsv1alpha1.ApplicationSource{Inline: &appsv1alpha1.InlineSource{
			Manifests: []appsv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: shopManifest("registry.example/shop:1.0")}}}}}}}
	target := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "shop"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector: policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"dash": "shop"}},
		ClusterSelector: policyv1alpha1.LabelSelector{MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{
			{Key: "region", Operator: "In", Values: []string{"us-east", "us-west"}}}},
		DeletionPolicy: policyv1alpha1.DeletionDelete,
		Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
			{Name: "canary", ClusterNames: []string{"east"}, Steps: []policyv1alpha1.CanaryStep{
				{SetWeight: ptr.To[int32](50)},
				{Analysis: &policyv1alpha1.AnalysisGate{Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: check.Name}}}},
				{Pause: &policyv1alpha1.PauseStep{}},
			}},
			{Name: "rest", ClusterNames: []string{"west"}},
		}},
	}}
	other := webDeployment(teamB, 1)
	other.Name = "team-b-secret"
	otherPolicy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: other.Name, Namespace: teamB},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: other.Name}},
			Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}}}}
	catalog := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "catalog", Labels: map[string]string{"dash": "catalog"}},
		Spec: appsv1alpha1.ApplicationSpec{Source: appsv1alpha1.ApplicationSource{Inline: &appsv1alpha1.InlineSource{Manifests: []appsv1alpha1.Manifest{
			{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"catalog"},"spec":{"replicas":1,` +
				`"selector":{"matchLabels":{"app":"catalog"}},"template":{"metadata":{"labels":{"app":"catalog"}},"spec":{"containers":[{"name":"catalog","image":"registry.example/catalog:7"}]}}}}`)}},
			{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"catalog-config"},"data":{"mode":"live"}}`)}}}}}}}
	catalogTarget := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "catalog"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:     policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"dash": "catalog"}},
		ClusterSelector: policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "us-east"}},
		DeletionPolicy:  policyv1alpha1.DeletionDelete}}
	createAll(t, g, check, app, target, other, otherPolicy, catalog, catalogTarget)
	t.Cleanup(func() {
		_ = cp.Delete(context.Background(), catalog)
		_ = cp.Delete(context.Background(), catalogTarget)
	})
	t.Cleanup(func() {
		for _, o := range []client.Object{app, target, other, otherPolicy, check} {
			_ = cp.Delete(context.Background(), o)
		}
	})
	for _, m := range []string{"east", "west"} {
		g.Eventually(func() string { return memberImage(t, m, teamA, "shop") }).Should(gomega.Equal("registry.example/shop:1.0"), m)
	}
	g.Eventually(func() int32 { return memberReplicas(t, "east", teamB, other.Name) }).Should(gomega.Equal(int32(1)))
	g.Eventually(func() int32 { return memberReplicas(t, "east", teamB, "catalog") }).Should(gomega.Equal(int32(1)))

	// The reader sees team A's application, at revision 1 with its image, and nothing of team B.
	ctx := browser(t)
	login(t, ctx, readerToken)
	inBrowser(t, ctx, "fleet matrix", chromedp.WaitVisible(chromedp.CSS(`[data-cell="dash-a/shop/east"]`)))
	g.Eventually(func() string { return textOf(ctx, `[data-cell="dash-a/shop/west"]`) }).Should(gomega.And(
		gomega.ContainSubstring("r1"), gomega.ContainSubstring("shop:1.0"), gomega.ContainSubstring("Healthy")))
	matrix := textOf(ctx, "#matrix")
	g.Expect(matrix).To(gomega.ContainSubstring("shop"))
	g.Expect(matrix).NotTo(gomega.ContainSubstring("team-b-secret"), "team B's app is not the reader's to see")
	g.Expect(matrix).NotTo(gomega.ContainSubstring("catalog"))
	g.Expect(matrix).NotTo(gomega.ContainSubstring(teamB))

	// The HTML in the description is shown as text: no element made from it, no script run.
	g.Expect(textOf(ctx, ".app-description")).To(gomega.Equal(xssDescription))
	injected := evaluate[int](t, ctx, `document.querySelectorAll('#matrix img, #matrix b').length`)
	title, err := chromedp.Run(ctx, chromedp.Title())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(injected).To(gomega.BeZero())
	g.Expect(title).To(gomega.Equal("Flotilla"))
	screenshot(t, ctx, "fleet")

	inBrowser(t, ctx, "cell detail", chromedp.Click(chromedp.CSS(`[data-cell="dash-a/shop/east"]`)), chromedp.WaitVisible(chromedp.ID("cell-detail")))
	g.Eventually(func() string { return textOf(ctx, "#cell-detail") }).Should(gomega.And(gomega.ContainSubstring("2 ready of 2"), gomega.ContainSubstring("registry.example/shop:1.0")))
	screenshot(t, ctx, "cell")
	goTo(t, ctx, "#/clusters")
	inBrowser(t, ctx, "clusters", chromedp.WaitVisible(chromedp.ID("clusters-forbidden")))
	g.Expect(textOf(ctx, "#clusters-forbidden")).To(gomega.And(gomega.ContainSubstring("may not list clusters"), gomega.ContainSubstring("The Fleet page shows every cluster your applications run on")),
		"a team reader without list clusters is told why and where to look")

	// A new image starts a release; the reader watches it in one page load.
	app.Spec.Source.Inline.Manifests[0].Raw = shopManifest("registry.example/shop:1.1")
	g.Eventually(func() error {
		cur := &appsv1alpha1.Application{}
		if err := cp.Get(bg, client.ObjectKeyFromObject(app), cur); err != nil {
			return err
		}
		cur.Spec.Source = app.Spec.Source
		return cp.Update(bg, cur)
	}).Should(gomega.Succeed())
	const rel = "shop-deployment-r2"
	g.Eventually(func() *rolloutv1alpha1.Release { return getRelease(teamA, rel) }).ShouldNot(gomega.BeNil())
	goTo(t, ctx, "#/release/"+teamA+"/"+rel)
	inBrowser(t, ctx, "release page", chromedp.WaitVisible(chromedp.ID("release-phase")))
	evaluate[string](t, ctx, `window.__sameLoad = "yes"`)
	points := func() int {
		n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`Math.max(0, ...[...document.querySelectorAll('svg[data-testid=analysis-chart]')].map(s => +s.dataset.points))`))
		return n
	}
	g.Eventually(points).WithTimeout(2*time.Minute).Should(gomega.BeNumerically(">=", 3), "the chart gains the analysis' measurements live")
	g.Eventually(func() string { return textOf(ctx, `[data-wave="canary"]`) }).WithTimeout(time.Minute).Should(gomega.ContainSubstring("WaitingForApproval"))
	g.Expect(evaluate[string](t, ctx, `window.__sameLoad || "reloaded"`)).To(gomega.Equal("yes"), "updates came without a reload")
	screenshot(t, ctx, "release")

	// No promote button for the reader, and the server refuses a forged promote.
	g.Expect(evaluate[int](t, ctx, `document.querySelectorAll('#action-promote, #action-abort').length`)).To(gomega.BeZero(), "a reader is shown no actions")
	forge := func(withCSRF bool) int {
		js := fmt.Sprintf(`(async () => {
			const s = await (await fetch('api/session')).json();
			const headers = %v ? {'X-CSRF-Token': s.csrf} : {};
			return (await fetch('api/releases/%s/%s/promote', {method: 'POST', headers})).status;
		})()`, withCSRF, teamA, rel)
		return evaluate[int](t, ctx, js, chromedp.EvalAwaitPromise)
	}
	g.Expect(forge(false)).To(gomega.Equal(http.StatusForbidden), "no CSRF token")
	g.Expect(forge(true)).To(gomega.Equal(http.StatusForbidden), "a reader may not promote")
	g.Expect(getRelease(teamA, rel).Spec.PromotedStep).To(gomega.BeEmpty())

	goTo(t, ctx, "#/history?application=shop")
	inBrowser(t, ctx, "history", chromedp.WaitVisible(chromedp.ID("history")))
	g.Eventually(func() string { return textOf(ctx, "#history") }).Should(gomega.ContainSubstring("east"))
	g.Expect(textOf(ctx, "#history")).To(gomega.And(gomega.ContainSubstring("— → r1"), gomega.ContainSubstring("placement")), "the first placement reads — → r1")
	screenshot(t, ctx, "history")

	// The contributor promotes from the page, and the release moves past the pause.
	logOut(t, ctx)
	login(t, ctx, devToken)
	goToPage(t, g, ctx, "#/release/"+teamA+"/"+rel, "#action-promote")
	inBrowser(t, ctx, "release page as contributor",
		chromedp.WaitVisible(chromedp.ID("action-promote")), chromedp.Click(chromedp.ID("action-promote")))
	g.Eventually(func() string { return textOf(ctx, "#action-result") }).Should(gomega.ContainSubstring("promoted"))
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(teamA, rel) }).WithTimeout(2 * time.Minute).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	g.Eventually(func() string { return textOf(ctx, "#release-phase") }).Should(gomega.Equal("Succeeded"), "the page follows the release to its end")
	g.Expect(memberImage(t, "west", teamA, "shop")).To(gomega.Equal("registry.example/shop:1.1"))
	screenshot(t, ctx, "release-promoted")
	goTo(t, ctx, "#/fleet")
	inBrowser(t, ctx, "fleet after", chromedp.WaitVisible(chromedp.ID("matrix")))
	g.Eventually(func() string { return textOf(ctx, `[data-cell="dash-a/shop/west"]`) }).Should(gomega.ContainSubstring("shop:1.1"))

	// A platform engineer (who may list clusters and every namespace) sees every team and
	// the clusters' state.
	opsToken := serviceAccountToken(t, g, "dash-platform", "ops")
	ops := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dash-platform-ops"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "ops", Namespace: "dash-platform"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}}
	createAll(t, g, ops)
	t.Cleanup(func() { _ = cp.Delete(context.Background(), ops) })
	logOut(t, ctx)
	login(t, ctx, opsToken)
	inBrowser(t, ctx, "everyone's fleet", chromedp.WaitVisible(chromedp.ID("matrix")))
	g.Eventually(func() string { return textOf(ctx, "#matrix") }).Should(gomega.ContainSubstring("team-b-secret"))
	// One row per application, however many templates it has; its cell lists them all.
	g.Eventually(func() string { return textOf(ctx, `[data-app="dash-b/catalog"]`) }).Should(gomega.And(
		gomega.ContainSubstring("ConfigMap/catalog-config"), gomega.ContainSubstring("Deployment/catalog")))
	g.Expect(evaluate[int](t, ctx, `document.querySelectorAll('[data-app^="dash-b/catalog"]').length`)).To(gomega.Equal(1), "a Deployment and a ConfigMap, one row")
	g.Expect(textOf(ctx, `[data-cell="dash-b/catalog/east"]`)).To(gomega.ContainSubstring("catalog:7"))
	goToPage(t, g, ctx, "#/cell/dash-b/catalog/east", "#cell-detail")
	g.Eventually(func() string { return textOf(ctx, "#cell-detail") }).Should(gomega.And(gomega.ContainSubstring("Deployment dash-b/catalog"),
		gomega.ContainSubstring("ConfigMap dash-b/catalog-config"), gomega.ContainSubstring("1 ready of 1")))
	goTo(t, ctx, "#/fleet")
	inBrowser(t, ctx, "back to the fleet", chromedp.WaitVisible(chromedp.ID("matrix")))
	// A change by hand in a member is put back and marked as drift in its cell.
	g.Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := memberClient(t, "east").Get(bg, client.ObjectKey{Namespace: teamB, Name: other.Name}, d); err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To[int32](5)
		return memberClient(t, "east").Update(bg, d, client.FieldOwner("kubectl-edit"))
	}).Should(gomega.Succeed())
	g.Eventually(func() string { return textOf(ctx, `[data-cell="dash-b/team-b-secret/east"]`) }).Should(gomega.ContainSubstring("drift"), "the page marks drift live")
	screenshot(t, ctx, "fleet-platform")
	// Filters: a team, then a cluster label.
	inBrowser(t, ctx, "team filter", chromedp.SetValue(chromedp.ID("filter-team"), teamA))
	g.Eventually(func() string { return textOf(ctx, "#matrix") }).Should(gomega.And(gomega.ContainSubstring("shop"), gomega.Not(gomega.ContainSubstring("team-b-secret"))))
	inBrowser(t, ctx, "cluster filter", chromedp.SetValue(chromedp.ID("filter-cluster"), "region=us-west"))
	g.Eventually(func() int { return evaluate[int](t, ctx, `document.querySelectorAll('#matrix thead th').length`) }).Should(gomega.Equal(2), "the application column and west")
	g.Expect(evaluate[int](t, ctx, `document.querySelectorAll('[data-cell="dash-a/shop/west"]').length`)).To(gomega.Equal(1))
	g.Expect(evaluate[int](t, ctx, `document.querySelectorAll('[data-cell="dash-a/shop/east"]').length`)).To(gomega.BeZero())
	goTo(t, ctx, "#/clusters")
	inBrowser(t, ctx, "clusters", chromedp.WaitVisible(chromedp.CSS(`[data-cluster="east"]`)))
	g.Expect(textOf(ctx, `[data-cluster="east"]`)).To(gomega.And(gomega.ContainSubstring("Ready"), gomega.ContainSubstring("v1.37"), gomega.ContainSubstring("2/2")))
	screenshot(t, ctx, "clusters")
	inBrowser(t, ctx, "a cluster", chromedp.Click(chromedp.CSS(`[data-cluster="east"]`)), chromedp.WaitVisible(chromedp.CSS("h2")))
	g.Eventually(func() string { return textOf(ctx, "#main") }).Should(gomega.And(gomega.ContainSubstring("What runs here"), gomega.ContainSubstring("team-b-secret")))
	screenshot(t, ctx, "cluster")
}
