package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/cli"
)

// Given two teams, each with an Application, when the platform and a team's developer read
// them with the CLI as they would with kubectl, then every get-like command honours -o jsonpath
// and custom-columns, -l, -A, -w and the namespace of the kubeconfig context, and a developer's
// `app list -A` lists the namespaces it may read instead of failing.
func TestCLIGetReadsLikeKubectl(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	admin := fleet.Kubeconfig("")
	teamA, teamB := "cliget-a", "cliget-b"
	for _, ns := range []string{teamA, teamB} {
		out, err := flotilla("team", "create", ns, "--contributor", ns+"-devs", "--kubeconfig", admin)
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	}
	t.Cleanup(func() {
		for _, ns := range []string{teamA, teamB} {
			_ = cp.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	})
	g.Eventually(func() bool {
		for _, ns := range []string{teamA, teamB} {
			team := &tenancyv1alpha1.Team{}
			if cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: tenancyv1alpha1.TeamName}, team) != nil ||
				!meta.IsStatusConditionTrue(team.Status.Conditions, tenancyv1alpha1.ConditionReady) {
				return false
			}
		}
		return true
	}).Should(gomega.BeTrue())
	application := func(ns, name, tier string) *appsv1alpha1.Application {
		return &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"tier": tier}},
			Spec: appsv1alpha1.ApplicationSpec{Source: appsv1alpha1.ApplicationSource{Inline: &appsv1alpha1.InlineSource{Manifests: []appsv1alpha1.Manifest{
				{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"},"data":{"k":"v"}}`)}}}}}}}
	}
	createAll(t, g, application(teamA, "a-web", "web"), application(teamB, "b-db", "db"))

	// -o jsonpath, custom-columns and -A.
	out, err := flotilla("get", "applications", "-A", "-o", "jsonpath={.items[*].metadata.name}", "--kubeconfig", admin)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(strings.Fields(out)).To(gomega.ContainElements("a-web", "b-db"))
	out, err = flotilla("get", "clusters", "east", "-o", "jsonpath={.metadata.labels.region}", "--kubeconfig", admin)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.Equal("us-east"))
	out, err = flotilla("get", "teams", "-o", "custom-columns=TEAM:.metadata.namespace", "--kubeconfig", admin)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(strings.Fields(out)).To(gomega.ContainElements("TEAM", teamA, teamB))
	out, err = flotilla("team", "list", "-o", "jsonpath={.items[*].metadata.namespace}", "--kubeconfig", admin)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(strings.Fields(out)).To(gomega.ContainElements(teamA, teamB))
	g.Expect(out).NotTo(gomega.ContainSubstring("NAME"), "the jsonpath, not the table")

	// -l.
	out, err = flotilla("get", "applications", "-A", "-l", "tier=web", "-o", "name", "--kubeconfig", admin)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(strings.TrimSpace(out)).To(gomega.Equal("application.apps.flotilla.dev/a-web"))
	out, err = flotilla("get", "applications", "-A", "-l", "tier", "--sort-by", "{.metadata.labels.tier}", "--kubeconfig", admin)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(strings.Index(out, "b-db")).To(gomega.BeNumerically("<", strings.Index(out, "a-web")), "--sort-by tier: db before web\n%s", out)
	out, err = flotilla("get", "clusters", "-l", "region=us-east", "-o", "jsonpath={.items[*].metadata.name}", "--kubeconfig", admin)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(strings.Fields(out)).To(gomega.ContainElement("east"))
	g.Expect(strings.Fields(out)).NotTo(gomega.ContainElement("west"))

	// Bindings, works, target policies and history: a TargetPolicy places team A's web
	// applications on us-east.
	out, err = flotilla("target", "create", "web-east", "-n", teamA, "--apps", "tier=web", "--clusters", "region=us-east", "--kubeconfig", admin)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	out, err = flotilla("get", "targetpolicies", "-A", "-o", "jsonpath={.items[*].metadata.name}", "--kubeconfig", admin)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(strings.Fields(out)).To(gomega.ContainElement("web-east"))
	out, err = flotilla("get", "clustertargetpolicies", "-o", "jsonpath={.kind}", "--kubeconfig", admin)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.Equal("ClusterTargetPolicyList"))
	out, err = flotilla("get", "clusterbindings", "-o", "jsonpath={.kind}", "--kubeconfig", admin)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.Equal("ClusterResourceBindingList"))
	g.Eventually(func() []string {
		out, _ := flotilla("get", "bindings", "-n", teamA, "-o", "jsonpath={.items[*].spec.resource.name}", "--kubeconfig", admin)
		return strings.Fields(out)
	}).Should(gomega.ContainElement("a-web"))
	g.Eventually(func() string {
		out, _ := flotilla("get", "works", "-A", "--kubeconfig", admin)
		return out
	}).Should(gomega.MatchRegexp(`flotilla-es-east\s+` + teamA + `\.a-web-configmap\s+east`))
	g.Eventually(func() []string {
		out, _ := flotilla("history", "-n", teamA, "-o", "jsonpath={.items[*].cluster}", "--kubeconfig", admin)
		return strings.Fields(out)
	}).Should(gomega.ContainElement("east"))

	// -n from the kubeconfig context: a context whose namespace is team B lists team B's
	// applications without -n.
	raw, err := clientcmd.LoadFromFile(admin)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	raw.Contexts[raw.CurrentContext].Namespace = teamB
	inB := filepath.Join(t.TempDir(), "in-b.kubeconfig")
	g.Expect(clientcmd.WriteToFile(*raw, inB)).To(gomega.Succeed())
	out, err = flotilla("get", "applications", "--kubeconfig", inB)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("b-db"))
	g.Expect(out).NotTo(gomega.ContainSubstring("a-web"))

	// -w: a change made while watching is printed; --timeout ends the watch with exit 0.
	type result struct {
		out string
		err error
	}
	watched := make(chan result, 1)
	go func() {
		out, err := flotilla("get", "applications", "-n", teamA, "-w", "--timeout", "15s", "--kubeconfig", admin)
		watched <- result{out, err}
	}()
	time.Sleep(3 * time.Second) // the watch is open: it lists before it watches
	createAll(t, g, application(teamA, "a-late", "web"))
	var w result
	g.Eventually(watched, 30*time.Second).Should(gomega.Receive(&w))
	g.Expect(w.err).NotTo(gomega.HaveOccurred(), w.out)
	g.Expect(w.out).To(gomega.ContainSubstring("a-web"), "the list before the watch")
	g.Expect(w.out).To(gomega.ContainSubstring("a-late"), "the application created while watching")
	g.Expect(strings.Count(w.out, "NAME")).To(gomega.Equal(1), "rows go on under one header:\n%s", w.out)

	go func() {
		out, err := flotilla("app", "list", "-n", teamA, "-l", "tier=web", "-w", "--timeout", "15s", "-o", "jsonpath={.metadata.name}{\"\\n\"}", "--kubeconfig", admin)
		watched <- result{out, err}
	}()
	time.Sleep(3 * time.Second)
	late := &appsv1alpha1.Application{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: teamA, Name: "a-late"}, late)).To(gomega.Succeed())
	late.Labels["changed"] = "yes"
	g.Expect(cp.Update(ctx, late)).To(gomega.Succeed())
	g.Eventually(watched, 30*time.Second).Should(gomega.Receive(&w))
	g.Expect(w.err).NotTo(gomega.HaveOccurred(), w.out)
	g.Expect(strings.Fields(w.out)).To(gomega.ContainElement("a-late"), "the change of a-late's labels is printed")

	// A developer of team A, who may not list applications cluster-wide: `app list -A` lists
	// the namespaces it may read and says so, instead of failing.
	dev, err := fleet.UserKubeconfig("", "cliget-dev", teamA+"-devs")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	devRaw, err := clientcmd.LoadFromFile(dev)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	current := devRaw.Contexts[devRaw.CurrentContext]
	current.Namespace = teamA
	other := current.DeepCopy()
	other.Namespace = teamB
	devRaw.Contexts["team-b"] = other
	devConfig := filepath.Join(t.TempDir(), "dev.kubeconfig")
	g.Expect(clientcmd.WriteToFile(*devRaw, devConfig)).To(gomega.Succeed())
	g.Eventually(func() error {
		_, err := flotilla("get", "applications", "--kubeconfig", devConfig)
		return err
	}).Should(gomega.Succeed(), "the developer reads its own namespace")
	out, err = flotilla("app", "list", "-A", "--kubeconfig", devConfig)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("a-web"))
	g.Expect(out).NotTo(gomega.ContainSubstring("b-db"))
	g.Expect(out).To(gomega.ContainSubstring("listed only " + teamA))
	g.Expect(out).To(gomega.MatchRegexp(`skipped, forbidden: .*` + teamB))

	// Usage errors exit 2.
	_, err = flotilla("get", "applications", "--no-such-flag", "--kubeconfig", admin)
	g.Expect(exitCode(err)).To(gomega.Equal(cli.ExitUsage), "an unknown flag: %v", err)
	_, err = flotilla("get", "--kubeconfig", admin)
	g.Expect(exitCode(err)).To(gomega.Equal(cli.ExitUsage), "no kind: %v", err)
}
