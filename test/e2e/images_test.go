package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/inventory"
)

// A workload with an init container and two containers: history, the inventory API, the
// dashboard and the CLI (history -o wide, where, the release tree) all name the same images,
// in the same order (init containers first), each once.
func TestEveryViewNamesTheSameImages(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "images-a"
	createTeam(t, g, ns, "--contributor", "images-a-devs", "--reader", "system:serviceaccounts:images-a-readers")
	manifest := func(app string) []byte {
		return []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"multi"},"spec":{"replicas":1,` +
			`"selector":{"matchLabels":{"app":"multi"}},"template":{"metadata":{"labels":{"app":"multi"}},"spec":{` +
			`"initContainers":[{"name":"migrate","image":"registry.example/migrate:3"}],` +
			`"containers":[{"name":"app","image":"` + app + `"},{"name":"proxy","image":"registry.example/proxy:1.9"},` +
			`{"name":"proxy-debug","image":"registry.example/proxy:1.9"}]}}}}`)
	}
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "multi", Labels: map[string]string{"images": "multi"}},
		Spec: appsv1alpha1.ApplicationSpec{Source: appsv1alpha1.ApplicationSource{Inline: &appsv1alpha1.InlineSource{
			Manifests: []appsv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: manifest("registry.example/app:2")}}}}}}}
	target := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "multi"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:     policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"images": "multi"}},
		ClusterSelector: policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "us-east"}},
		DeletionPolicy:  policyv1alpha1.DeletionDelete,
		Rollout:         &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "all", ClusterNames: []string{"east"}}}},
	}}
	createAll(t, g, app, target)
	t.Cleanup(func() {
		_ = cp.Delete(context.Background(), app)
		_ = cp.Delete(context.Background(), target)
	})
	g.Eventually(func() string { return memberImage(t, "east", ns, "multi") }).Should(gomega.Equal("registry.example/app:2"), func() string { return statusOfAll(ns) })
	want := []string{"registry.example/migrate:3", "registry.example/app:2", "registry.example/proxy:1.9"}

	// History, through the inventory API.
	admin := inventoryAs(t, "")
	g.Eventually(func() [][]string {
		var images [][]string
		for _, it := range historyOf(t, admin, url.Values{"team": {ns}}) {
			images = append(images, it.Images)
		}
		return images
	}).Should(gomega.ContainElement(want), "history records the images")

	// The inventory API: the workload, and the cluster it runs in.
	var wl inventory.Workload
	g.Eventually(func() []string {
		code, body := admin("/api/v1/applications?namespace=" + ns)
		g.Expect(code).To(gomega.Equal(http.StatusOK), string(body))
		var page struct{ Items []inventory.Workload }
		g.Expect(json.Unmarshal(body, &page)).To(gomega.Succeed())
		for _, w := range page.Items {
			if w.Kind == "Deployment" && w.Name == "multi" && len(w.Clusters) == 1 {
				wl = w
				return w.Clusters[0].Images
			}
		}
		return nil
	}).Should(gomega.Equal(want), "the inventory gives the cluster's images")
	g.Expect(wl.Images).To(gomega.Equal(want), "the inventory gives the workload's images")

	// The CLI: flotilla history and flotilla where print them comma-separated, in order.
	joined := strings.Join(want, ",")
	g.Eventually(func() string {
		out, _ := flotilla("history", "-n", ns, "-o", "wide", "--kubeconfig", fleet.Kubeconfig(""))
		return out
	}).Should(gomega.ContainSubstring(joined), "flotilla history -o wide")
	out, err := flotilla("where", "app/multi", "-n", ns, "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring(joined), "flotilla where")

	// A release of a new app image: the release tree names both revisions' images.
	app2 := &appsv1alpha1.Application{}
	g.Eventually(func() error {
		if err := cp.Get(ctx, client.ObjectKeyFromObject(app), app2); err != nil {
			return err
		}
		app2.Spec.Source.Inline.Manifests[0].Raw = manifest("registry.example/app:3")
		return cp.Update(ctx, app2)
	}).Should(gomega.Succeed())
	g.Eventually(func() string { return memberImage(t, "east", ns, "multi") }).Should(gomega.Equal("registry.example/app:3"))
	// The release tree names the images of the revision each cluster runs, in the same order.
	g.Eventually(func() string {
		out, _ := flotilla("release", "get", "deployment/multi", "-n", ns, "--kubeconfig", fleet.Kubeconfig(""))
		return out
	}).Should(gomega.ContainSubstring("rev 2 registry.example/migrate:3,registry.example/app:3,registry.example/proxy:1.9"), "flotilla release get")

	// The dashboard's cell detail, as the team's reader sees it.
	want[1] = "registry.example/app:3"
	token := serviceAccountToken(t, g, "images-a-readers", "iris")
	bctx := browser(t)
	login(t, bctx, token)
	cell := `[data-cell="` + ns + `/multi/east"]`
	inBrowser(t, bctx, "fleet matrix", chromedp.WaitVisible(chromedp.CSS(cell)))
	g.Eventually(func() string { return textOf(bctx, cell) }).Should(gomega.ContainSubstring("app:3"))
	inBrowser(t, bctx, "cell detail", chromedp.Click(chromedp.CSS(cell)), chromedp.WaitVisible(chromedp.ID("cell-detail")))
	g.Eventually(func() string { return textOf(bctx, "#cell-detail") }).Should(gomega.ContainSubstring(strings.Join(want, ", ")), "the dashboard names the images in order")
}

// createTeam runs flotilla team create as the admin and waits until the Team controller has
// set the namespace up.
func createTeam(t *testing.T, g gomega.Gomega, ns string, args ...string) {
	t.Helper()
	out, err := flotilla(append([]string{"team", "create", ns, "--kubeconfig", fleet.Kubeconfig("")}, args...)...)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() int64 {
		team := &tenancyv1alpha1.Team{}
		_ = cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: tenancyv1alpha1.TeamName}, team)
		return team.Status.ObservedGeneration
	}).ShouldNot(gomega.BeZero())
}

// statusOfAll is the status of a namespace's Applications, target policies and bindings, for
// a failure message.
func statusOfAll(ns string) string {
	ctx := context.Background()
	var out []string
	for _, list := range []client.ObjectList{&appsv1alpha1.ApplicationList{}, &appsv1alpha1.TargetPolicyList{}, &workv1alpha1.ResourceBindingList{}} {
		if err := cp.List(ctx, list, client.InNamespace(ns)); err != nil {
			out = append(out, err.Error())
			continue
		}
		data, _ := json.MarshalIndent(list, "", "  ")
		out = append(out, string(data))
	}
	return strings.Join(out, "\n")
}
