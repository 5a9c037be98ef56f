package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// stackDeployment is a one-replica Deployment named like its image. It is recreated on a
// change: with a surge, the old pod's availability would be read as the new one's (Flotilla's
// Deployment health counts updated and available replicas, not old replicas still running).
func stackDeployment(name string, version int) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%[1]q},"spec":{"replicas":1,"strategy":{"type":"Recreate"},`+
		`"selector":{"matchLabels":{"app":%[1]q}},"template":{"metadata":{"labels":{"app":%[1]q}},`+
		`"spec":{"containers":[{"name":%[1]q,"image":"registry.example/%[1]s:%[2]d"}]}}}}`, name, version)
}

// stackApp is an inline Application of one Deployment named like it, labelled stack=shop.
func stackApp(ns, name string, dependsOn ...string) *appsv1alpha1.Application {
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"stack": "shop"}},
		Spec: appsv1alpha1.ApplicationSpec{Source: appsv1alpha1.ApplicationSource{Inline: &appsv1alpha1.InlineSource{Manifests: []appsv1alpha1.Manifest{
			{RawExtension: runtime.RawExtension{Raw: stackDeployment(name, 1)}}}}}}}
	for _, d := range dependsOn {
		app.Spec.DependsOn = append(app.Spec.DependsOn, appsv1alpha1.ApplicationDependency{Name: d})
	}
	return app
}

// clusterWait is what a binding's status says a cluster waits for.
func clusterWait(ns, binding, cluster string) (string, *metav1.Time) {
	b := &workv1alpha1.ResourceBinding{}
	if cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: binding}, b) != nil {
		return "", nil
	}
	for _, cs := range b.Status.Clusters {
		if cs.Cluster == cluster {
			return cs.WaitingFor, cs.WaitingSince
		}
	}
	return "", nil
}

func dependencyCondition(ns, name, condType string) metav1.Condition {
	app := &appsv1alpha1.Application{}
	if cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, app) != nil {
		return metav1.Condition{}
	}
	if c := meta.FindStatusCondition(app.Status.Conditions, condType); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// Given a database Application and an API Application that depends on it, both placed on east,
// west and europe (released in one wave), and the database unable to become available in
// europe (an override makes its pods select no node there), when both are applied, then the
// API runs in east and west and waits in europe, saying for what and since when (binding,
// Application condition, describe, app list); once the database is healthy in europe, the API
// follows there, and history says what it waited for. A release of the API then takes east and
// west but not europe while the database is not healthy there, and finishes once it is. Bad
// input is refused naming the field, and a cycle is reported naming it.
func TestApplicationWaitsForItsDependencyPerCluster(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "deps"
	ensureNamespace(t, cp, ns)
	createTeam(t, g, ns, "--contributor", "deps-devs")
	admin := fleet.Kubeconfig("")
	everywhere := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-everywhere"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:     policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"stack": "shop"}},
		ClusterSelector: policyv1alpha1.LabelSelector{MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "region", Operator: "Exists"}}},
		Rollout:         &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "fleet", Percentage: ptr.To[int32](100)}}},
	}}
	unavailableInEurope := &policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-unavailable-in-europe"}, Spec: policyv1alpha1.OverrideSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "db"}},
		OverrideRules: []policyv1alpha1.OverrideRule{{TargetCluster: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"europe"}},
			Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: "/spec/template/spec/nodeSelector",
				Operator: policyv1alpha1.OverrideAdd, Value: &policyv1alpha1.JSON{Raw: []byte(`{"flotilla.dev/no-such-node":"true"}`)}}}}}},
	}}
	createAll(t, g, unavailableInEurope, everywhere)
	start := time.Now()
	createAll(t, g, stackApp(ns, "db"), stackApp(ns, "api", "db"))

	// Then the API runs where the database is healthy...
	g.Eventually(func() []int32 {
		return []int32{memberReplicas(t, "east", ns, "api"), memberReplicas(t, "west", ns, "api")}
	}).WithTimeout(3*time.Minute).Should(gomega.Equal([]int32{1, 1}), "the API runs in east and west: %s", statusOfAll(ns))
	t.Logf("the API ran in east and west %.1fs after both were applied", time.Since(start).Seconds())
	// ...and waits in europe, where the database runs but is not available, saying why.
	g.Eventually(func() string { w, _ := clusterWait(ns, "api-deployment", "europe"); return w }).
		Should(gomega.Equal("Application deps/db is Progressing in cluster europe"), statusOfAll(ns))
	_, since := clusterWait(ns, "api-deployment", "europe")
	g.Expect(since).NotTo(gomega.BeNil())
	g.Expect(memberReplicas(t, "europe", ns, "db")).To(gomega.Equal(int32(1)), "the database is applied in europe")
	g.Consistently(func() int32 { return memberReplicas(t, "europe", ns, "api") }).WithTimeout(5*time.Second).Should(gomega.Equal(int32(-1)),
		"nothing of the API reaches europe while the database is not healthy there")
	w, _ := clusterWait(ns, "api-deployment", "east")
	g.Expect(w).To(gomega.BeEmpty(), "east waits for nothing")
	g.Eventually(func() string {
		c := dependencyCondition(ns, "api", appsv1alpha1.ConditionDependenciesReady)
		return string(c.Status) + "/" + c.Reason + ": " + c.Message
	}).Should(gomega.And(gomega.HavePrefix("False/WaitingForDependencies: europe: waits since "),
		gomega.HaveSuffix("for Application deps/db is Progressing in cluster europe")))
	out, err := flotilla("describe", "deployment/api", "-n", ns, "--kubeconfig", admin)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(gomega.ContainSubstring("Depends on: Application deps/db"),
		gomega.ContainSubstring("Waiting in europe since "+since.UTC().Format(time.RFC3339))))
	t.Logf("flotilla describe deployment/api:\n%s", out)
	out, err = flotilla("app", "list", "-n", ns, "-o", "wide", "--kubeconfig", admin)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("europe: waits since"))
	t.Logf("flotilla app list -o wide:\n%s", out)

	// When the database turns healthy in europe, the API follows there.
	healed := time.Now()
	g.Expect(cp.Delete(ctx, unavailableInEurope)).To(gomega.Succeed())
	g.Eventually(func() int32 { return memberReplicas(t, "europe", ns, "api") }).WithTimeout(2*time.Minute).Should(gomega.Equal(int32(1)), statusOfAll(ns))
	t.Logf("the API ran in europe %.1fs after the database's override went (waited %.0fs in all)", time.Since(healed).Seconds(), time.Since(since.Time).Seconds())
	g.Eventually(func() string { w, _ := clusterWait(ns, "api-deployment", "europe"); return w }).Should(gomega.BeEmpty())
	g.Eventually(func() string {
		c := dependencyCondition(ns, "api", appsv1alpha1.ConditionDependenciesReady)
		return string(c.Status) + "/" + c.Reason
	}).Should(gomega.Equal("True/DependenciesReady"))
	g.Eventually(func() string {
		out, _ := flotilla("history", "-n", ns, "-o", `jsonpath={range .items[*]}{.name} {.cluster} {.outcome}: {.causeDetail}{"\n"}{end}`, "--kubeconfig", admin)
		return out
	}).Should(gomega.ContainSubstring("for its dependencies (Application deps/db is Progressing in cluster europe)"))
	out, _ = flotilla("history", "-n", ns, "-o", `jsonpath={range .items[*]}{.name} {.cluster} {.outcome}: {.causeDetail}{"\n"}{end}`, "--kubeconfig", admin)
	g.Expect(out).NotTo(gomega.MatchRegexp(`api europe failed`), "waiting is not failing")
	t.Logf("history:\n%s", out)

	// When the database is unavailable in europe again and the API is released, then the
	// release takes east and west and waits in europe; once the database is healthy, it ends.
	unavailableInEurope.ResourceVersion = ""
	createAll(t, g, unavailableInEurope)
	g.Eventually(func() string {
		b := bindingOf(ctx, ns, "db-deployment")
		for _, cs := range b.Status.Clusters {
			if cs.Cluster == "europe" {
				return string(cs.Health)
			}
		}
		return ""
	}).ShouldNot(gomega.Equal("Healthy"))
	api := &appsv1alpha1.Application{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "api"}, api)).To(gomega.Succeed())
	api.Spec.Source.Inline.Manifests[0].Raw = stackDeployment("api", 2)
	g.Expect(cp.Update(ctx, api)).To(gomega.Succeed())
	released := time.Now()
	image := func(cluster string) string {
		d := &appsv1.Deployment{}
		if memberClient(t, cluster).Get(ctx, client.ObjectKey{Namespace: ns, Name: "api"}, d) != nil {
			return ""
		}
		return d.Spec.Template.Spec.Containers[0].Image
	}
	g.Eventually(func() []string { return []string{image("east"), image("west")} }).WithTimeout(2*time.Minute).
		Should(gomega.Equal([]string{"registry.example/api:2", "registry.example/api:2"}), statusOfAll(ns))
	rel := &rolloutv1alpha1.Release{}
	g.Eventually(func() string {
		if cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "api-deployment-r2"}, rel) != nil || len(rel.Status.Waves) == 0 {
			return ""
		}
		for _, c := range rel.Status.Waves[0].Clusters {
			if c.Name == "europe" {
				return string(c.Phase) + ": " + c.Message
			}
		}
		return ""
	}).Should(gomega.Equal("Pending: waits for dependencies: Application deps/db is Progressing in cluster europe"))
	g.Consistently(func() string { return image("europe") }).WithTimeout(5*time.Second).Should(gomega.Equal("registry.example/api:1"),
		"the release does not reach europe while the database is not healthy there")
	t.Logf("release %s %s: %s", rel.Name, rel.Status.Phase, rel.Status.Message)
	g.Expect(rel.Status.Phase).To(gomega.Equal(rolloutv1alpha1.ReleaseProgressing))
	g.Expect(cp.Delete(ctx, unavailableInEurope)).To(gomega.Succeed())
	healed = time.Now()
	g.Eventually(func() string {
		_ = cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "api-deployment-r2"}, rel)
		return string(rel.Status.Phase)
	}).WithTimeout(2*time.Minute).Should(gomega.Equal(string(rolloutv1alpha1.ReleaseSucceeded)), statusOfAll(ns))
	g.Expect(image("europe")).To(gomega.Equal("registry.example/api:2"))
	t.Logf("release r2 succeeded %.1fs after the database's override went (%.1fs after it started)", time.Since(healed).Seconds(), time.Since(released).Seconds())

	// When both Applications are deleted at once, the database leaves each cluster only after
	// the API has left it.
	g.Eventually(func() []string { return bindingOf(ctx, ns, "api-deployment").Status.Dependencies }).Should(gomega.Equal([]string{ns + "/db-deployment"}))
	deleted := time.Now()
	for _, name := range []string{"db", "api"} {
		g.Expect(cp.Delete(ctx, &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(gomega.Succeed())
	}
	// Each look reads the database first: found gone, and the API still there after, is a
	// database that left before the API, whatever the polling misses.
	dbGone, apiGone := map[string]time.Duration{}, map[string]time.Duration{}
	g.Eventually(func() int {
		for _, cluster := range []string{"east", "west", "europe"} {
			db, api := memberReplicas(t, cluster, ns, "db"), memberReplicas(t, cluster, ns, "api")
			g.Expect(db == -1 && api != -1).To(gomega.BeFalse(), "the database left %s while the API still ran there", cluster)
			if _, seen := dbGone[cluster]; !seen && db == -1 {
				dbGone[cluster] = time.Since(deleted)
			}
			if _, seen := apiGone[cluster]; !seen && api == -1 {
				apiGone[cluster] = time.Since(deleted)
			}
		}
		return len(dbGone)
	}).WithPolling(20 * time.Millisecond).WithTimeout(2 * time.Minute).Should(gomega.Equal(3))
	t.Logf("after both Applications were deleted, the API left %v and the database %v", apiGone, dbGone)

	// Another team's Application reads exactly as one that does not exist.
	other := "deps-payments"
	ensureNamespace(t, cp, other)
	createTeam(t, g, other, "--contributor", "payments-devs")
	vault := stackApp(other, "vault")
	vault.Labels = nil
	api2 := stackApp(ns, "api2")
	api2.Spec.DependsOn = []appsv1alpha1.ApplicationDependency{{Namespace: other, Name: "vault"}, {Namespace: other, Name: "nothing"}}
	createAll(t, g, vault, api2)
	g.Eventually(func() string {
		c := dependencyCondition(ns, "api2", appsv1alpha1.ConditionDependenciesReady)
		return string(c.Status) + "/" + c.Reason + ": " + c.Message
	}).Should(gomega.Equal("False/DependencyNotFound: spec.dependsOn: Application deps-payments/vault, Application deps-payments/nothing not found or not readable by the namespace's Team; the application waits in every cluster"))
	g.Eventually(func() string { w, _ := clusterWait(ns, "api2-deployment", "east"); return w }).Should(gomega.Equal(
		"Application deps-payments/vault is not found or not readable; Application deps-payments/nothing is not found or not readable"))
	g.Expect(memberReplicas(t, "east", ns, "api2")).To(gomega.Equal(int32(-1)))

	// Bad input is refused naming the field; a cycle is reported naming it.
	self := stackApp(ns, "loop", "loop")
	g.Expect(errString(cp.Create(ctx, self))).To(gomega.ContainSubstring("spec.dependsOn: an Application may not depend on itself"))
	tooMany := stackApp(ns, "many")
	for i := range 33 {
		tooMany.Spec.DependsOn = append(tooMany.Spec.DependsOn, appsv1alpha1.ApplicationDependency{Name: fmt.Sprintf("d%d", i)})
	}
	g.Expect(errString(cp.Create(ctx, tooMany))).To(gomega.ContainSubstring("spec.dependsOn: Too many"))
	empty := stackApp(ns, "empty", "")
	g.Expect(errString(cp.Create(ctx, empty))).To(gomega.ContainSubstring("spec.dependsOn[0].name"))
	cycA, cycB := stackApp(ns, "cyc-a", "cyc-b"), stackApp(ns, "cyc-b", "cyc-a")
	cycA.Labels, cycB.Labels = nil, nil // not placed: the cycle is reported all the same
	createAll(t, g, cycA, cycB)
	g.Eventually(func() string {
		c := dependencyCondition(ns, "cyc-a", appsv1alpha1.ConditionDependenciesReady)
		return string(c.Status) + "/" + c.Reason + ": " + c.Message
	}).Should(gomega.HavePrefix("False/DependencyCycle: dependency cycle: deps/cyc-a -> deps/cyc-b -> deps/cyc-a"))
}
