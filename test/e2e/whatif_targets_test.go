package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/inventory"
)

// whatIfWith runs `flotilla what-if -f FILE -o json` with a kubeconfig, returning the answer
// or the command's output and error.
func whatIfWith(t *testing.T, kubeconfig, obj string) (inventory.WhatIf, string, error) {
	t.Helper()
	out, err := flotilla("what-if", "-f", writeTemp(t, obj), "-o", "json", "--kubeconfig", kubeconfig)
	var w inventory.WhatIf
	if err == nil {
		if jerr := json.Unmarshal([]byte(out), &w); jerr != nil {
			t.Fatalf("what-if answered %q: %v", out, jerr)
		}
	}
	return w, out, err
}

// Given team whatif-t's Application web (an inline Deployment) placed by its TargetPolicy web
// on the clusters of region us-east (east), when the team's contributor asks what the same
// policy widened to region in (us-east, us-west) would do, then what-if says west is added to
// deployment web and writes nothing; when the contributor applies the change, the binding's
// clusters become what what-if said. A ClusterTargetPolicy that disagrees with the team's
// policy would leave the placement unchanged, and what-if says why, naming both. Another
// team's contributor may not ask about this team's policy (403), and a TargetPolicy without a
// namespace is refused naming metadata.namespace (400).
func TestWhatIfOfATargetPolicy(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns, otherTeam := "whatif-t", "whatif-o"
	for _, args := range [][]string{
		{"team", "create", ns, "--contributor", "whatif-t-devs", "--reader", "whatif-t-viewers"},
		{"team", "create", otherTeam, "--contributor", "whatif-o-devs"},
	} {
		out, err := flotilla(append(args, "--kubeconfig", fleet.Kubeconfig(""))...)
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	}
	t.Cleanup(func() {
		for _, n := range []string{ns, otherTeam} {
			_ = cp.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
	})
	wendy := userClient(t, "", "wendy", "whatif-t-devs")
	wendyConfig, err := fleet.UserKubeconfig("", "wendy", "whatif-t-devs")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	oscarConfig, err := fleet.UserKubeconfig("", "oscar", "whatif-o-devs")
	g.Expect(err).NotTo(gomega.HaveOccurred())

	// Given: web runs on east, placed by the team's TargetPolicy.
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"whatif": "web"}},
		Spec: appsv1alpha1.ApplicationSpec{Source: appsv1alpha1.ApplicationSource{Inline: &appsv1alpha1.InlineSource{Manifests: []appsv1alpha1.Manifest{
			{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":1,` +
				`"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"registry.example/web:1"}]}}}}`)}}}}}}}
	policy := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:     policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"whatif": "web"}},
		ClusterSelector: policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "us-east"}},
		DeletionPolicy:  policyv1alpha1.DeletionDelete,
	}}
	g.Eventually(func() error { return wendy.Create(ctx, app.DeepCopy()) }).Should(gomega.Succeed())
	g.Expect(wendy.Create(ctx, policy.DeepCopy())).To(gomega.Succeed())
	g.Eventually(func() map[string]int32 { return placedOn(ctx, ns, "web-deployment") }).Should(gomega.Equal(map[string]int32{"east": 1}))
	g.Eventually(func() int32 { return memberReplicas(t, "east", ns, "web") }).Should(gomega.Equal(int32(1)))

	// When: the contributor asks about the policy widened to us-west.
	widened := fmt.Sprintf(`apiVersion: apps.flotilla.dev/v1alpha1
kind: TargetPolicy
metadata: {name: web, namespace: %s}
spec:
  appSelector: {matchLabels: {whatif: web}}
  clusterSelector:
    matchExpressions: [{key: region, operator: In, values: [us-east, us-west]}]
  deletionPolicy: Delete
`, ns)
	w, out, err := whatIfWith(t, wendyConfig, widened)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)

	// Then: west is added to deployment web, nothing else moves, nothing is written.
	g.Expect(w.Object).To(gomega.Equal("TargetPolicy " + ns + "/web"))
	g.Expect(w.Changes).To(gomega.HaveLen(1), "%+v", w)
	ch := w.Changes[0]
	g.Expect(ch.Error).To(gomega.BeEmpty(), "%+v", ch)
	g.Expect([]string{ch.Namespace, ch.Kind, ch.Name}).To(gomega.Equal([]string{ns, "Deployment", "web"}))
	g.Expect(ch.Added).To(gomega.Equal([]string{"west"}), "%+v", ch)
	g.Expect(ch.Removed).To(gomega.BeEmpty(), "%+v", ch)
	said := map[string]int32{}
	for _, c := range ch.After {
		said[c.Name] = c.Replicas
	}
	g.Expect(said).To(gomega.Equal(map[string]int32{"east": 1, "west": 1}))
	g.Expect(memberReplicas(t, "west", ns, "web")).To(gomega.Equal(int32(-1)), "what-if writes nothing")
	g.Expect(placedOn(ctx, ns, "web-deployment")).To(gomega.Equal(map[string]int32{"east": 1}))
	table, err := flotilla("what-if", "-f", writeTemp(t, widened), "--kubeconfig", wendyConfig)
	g.Expect(err).NotTo(gomega.HaveOccurred(), table)
	g.Expect(table).To(gomega.And(gomega.ContainSubstring("TargetPolicy "+ns+"/web would change 1 placements"),
		gomega.MatchRegexp(ns+`/deployment/web\s+west\s+-`)))

	// A platform policy that disagrees on deletionPolicy: nothing would move, and why.
	conflicting, out, err := whatIfWith(t, fleet.Kubeconfig(""), `apiVersion: apps.flotilla.dev/v1alpha1
kind: ClusterTargetPolicy
metadata: {name: whatif-orphan}
spec:
  appSelector: {matchLabels: {whatif: web}}
  clusterSelector: {matchLabels: {region: eu-central}}
  deletionPolicy: Orphan
`)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	var mine []inventory.Change
	for _, c := range conflicting.Changes {
		if c.Namespace == ns {
			mine = append(mine, c)
		}
	}
	g.Expect(mine).To(gomega.HaveLen(1), "%+v", conflicting)
	g.Expect(mine[0].Name).To(gomega.Equal("web"))
	g.Expect(mine[0].Error).To(gomega.And(gomega.ContainSubstring("TargetPolicy "+ns+"/web"), gomega.ContainSubstring("ClusterTargetPolicy whatif-orphan"),
		gomega.ContainSubstring("spec.deletionPolicy")))

	// Another team's contributor may not ask; a TargetPolicy needs its namespace.
	_, out, err = whatIfWith(t, oscarConfig, widened)
	g.Expect(err).To(gomega.HaveOccurred(), out)
	g.Expect(err.Error()).To(gomega.And(gomega.ContainSubstring("403"), gomega.ContainSubstring("may not update targetpolicies.apps.flotilla.dev in namespace "+ns)))
	_, out, err = whatIfWith(t, wendyConfig, "apiVersion: apps.flotilla.dev/v1alpha1\nkind: TargetPolicy\nmetadata: {name: web}\nspec: {appSelector: {}, clusterSelector: {}}\n")
	g.Expect(err).To(gomega.HaveOccurred(), out)
	g.Expect(err.Error()).To(gomega.And(gomega.ContainSubstring("400"), gomega.ContainSubstring("set metadata.namespace")))

	// When the contributor applies the change, then the binding is placed where what-if said.
	g.Eventually(func() error {
		cur := &appsv1alpha1.TargetPolicy{}
		if err := wendy.Get(ctx, client.ObjectKeyFromObject(policy), cur); err != nil {
			return err
		}
		cur.Spec.ClusterSelector = policyv1alpha1.LabelSelector{MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{
			{Key: "region", Operator: "In", Values: []string{"us-east", "us-west"}}}}
		return wendy.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() map[string]int32 { return placedOn(ctx, ns, "web-deployment") }).Should(gomega.Equal(said), "what happened is what what-if said")
	g.Eventually(func() int32 { return memberReplicas(t, "west", ns, "web") }).Should(gomega.Equal(int32(1)))
}

func writeTemp(t *testing.T, s string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "obj.yaml")
	if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
