package e2e

import (
	"context"
	"sort"
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// A ClusterPropagationPolicy places cluster-scoped templates (a ClusterRole, a Namespace)
// through ClusterResourceBindings; a PropagationPolicy selecting the same kind places nothing;
// deleting the template removes it from the members.
func TestClusterScopedTemplatesArePlaced(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ensureNamespace(t, cp, "scoped")
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}},
	}
	team := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	clusterPolicy := &policyv1alpha1.ClusterPropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-cluster-scoped"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{
				{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "e2e-reader"},
				{APIVersion: "v1", Kind: "Namespace", Name: "team-a"},
			},
			Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}}},
		},
	}
	// A namespaced policy cannot place cluster-scoped objects, whatever it selects.
	namespacedPolicy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "roles-to-europe", Namespace: "scoped"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"europe"}}},
			Priority:          ptr.To[int32](100),
		},
	}
	createAll(t, g, namespacedPolicy, clusterPolicy, role, team)

	g.Eventually(func() []string {
		b := &workv1alpha1.ClusterResourceBinding{}
		if err := cp.Get(ctx, client.ObjectKey{Name: "e2e-reader-clusterrole"}, b); err != nil {
			return nil
		}
		var names []string
		for _, c := range b.Spec.Clusters {
			names = append(names, c.Name)
		}
		sort.Strings(names)
		return names
	}).Should(gomega.Equal([]string{"east", "west"}))
	for _, cluster := range []string{"east", "west"} {
		g.Eventually(func() []rbacv1.PolicyRule {
			got := &rbacv1.ClusterRole{}
			if memberClient(t, cluster).Get(ctx, client.ObjectKey{Name: "e2e-reader"}, got) != nil {
				return nil
			}
			return got.Rules
		}).Should(gomega.Equal(role.Rules), "the ClusterRole in %s", cluster)
		g.Eventually(func() bool { return existsIn(t, cluster, team) }).Should(gomega.BeTrue(), "namespace team-a in %s", cluster)
	}
	g.Expect(existsIn(t, "europe", role)).To(gomega.BeFalse(), "the PropagationPolicy must not place a cluster-scoped template")

	out, err := flotilla("describe", "namespace/team-a")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("ClusterResourceBinding team-a-namespace"))

	g.Expect(cp.Delete(ctx, role)).To(gomega.Succeed())
	g.Eventually(func() bool { return existsIn(t, "east", role) || existsIn(t, "west", role) }).Should(gomega.BeFalse())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(cp.Get(ctx, client.ObjectKey{Name: "e2e-reader-clusterrole"}, &workv1alpha1.ClusterResourceBinding{}))
	}).Should(gomega.BeTrue())
}

func placedOn(ctx context.Context, ns, binding string) map[string]int32 {
	b := bindingOf(ctx, ns, binding)
	if b == nil {
		return nil
	}
	out := map[string]int32{}
	for _, c := range b.Spec.Clusters {
		out[c.Name] = c.Replicas
	}
	return out
}

func keysOf(m map[string]int32) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// With groupBy, an app's Service and ConfigMap go only where its Deployment (the group's lead,
// the most replicas) runs, not to every cluster as they would alone; a second Deployment is
// divided over the lead's clusters; scaling the lead moves the whole group.
func TestGroupByKeepsAnAppTogether(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "grouped"
	ensureNamespace(t, cp, ns)
	app := map[string]string{"app.kubernetes.io/part-of": "shop"}
	web := webDeployment(ns, 2)
	web.Labels = map[string]string{"app": "web", "app.kubernetes.io/part-of": "shop"}
	worker := webDeployment(ns, 1)
	worker.Name = "worker"
	worker.Labels = app
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: app},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	cfg := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns, Labels: app}}
	alone := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ungrouped", Namespace: ns}}
	one := func(cluster string) policyv1alpha1.StaticClusterWeight {
		return policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{cluster}}, Weight: 1}
	}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{
				{APIVersion: "apps/v1", Kind: "Deployment"}, {APIVersion: "v1", Kind: "Service"}, {APIVersion: "v1", Kind: "ConfigMap"},
			},
			GroupBy: "app.kubernetes.io/part-of",
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{
				Type: policyv1alpha1.ReplicaSchedulingDivided, DivisionPreference: policyv1alpha1.DivisionWeighted,
				WeightPreference: &policyv1alpha1.WeightPreference{StaticWeightList: []policyv1alpha1.StaticClusterWeight{one("east"), one("west"), one("europe")}},
			}},
		},
	}
	createAll(t, g, policy, web, worker, svc, cfg, alone)

	// Alone, a ConfigMap goes to every cluster; the web Deployment's 2 replicas take two.
	g.Eventually(func() []string { return keysOf(placedOn(ctx, ns, "ungrouped-configmap")) }).Should(gomega.HaveLen(3))
	var lead []string
	g.Eventually(func() []string { lead = keysOf(placedOn(ctx, ns, "web-deployment")); return lead }).Should(gomega.HaveLen(2))
	g.Eventually(func() []string { return keysOf(placedOn(ctx, ns, "web-service")) }).Should(gomega.Equal(lead))
	g.Eventually(func() []string { return keysOf(placedOn(ctx, ns, "settings-configmap")) }).Should(gomega.Equal(lead))
	g.Eventually(func() []string { return keysOf(placedOn(ctx, ns, "worker-deployment")) }).Should(gomega.And(
		gomega.HaveLen(1), gomega.Or(gomega.Equal(lead[:1]), gomega.Equal(lead[1:])), // one replica, on one of the lead's clusters
	))
	b := bindingOf(ctx, ns, "web-service")
	g.Expect(b.Spec.Group).To(gomega.Equal("app.kubernetes.io/part-of=shop"))
	for _, cluster := range []string{"east", "west", "europe"} {
		inLead := cluster == lead[0] || cluster == lead[1]
		g.Eventually(func() bool { return existsIn(t, cluster, svc) }).Should(gomega.Equal(inLead), "the Service in %s", cluster)
	}

	// Three replicas of the lead take all three clusters: the group follows.
	g.Eventually(func() error {
		cur := web.DeepCopy()
		if err := cp.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
			return err
		}
		cur.Spec.Replicas = ptr.To[int32](3)
		return cp.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() []string { return keysOf(placedOn(ctx, ns, "web-service")) }).Should(gomega.HaveLen(3))
	g.Eventually(func() []string { return keysOf(placedOn(ctx, ns, "settings-configmap")) }).Should(gomega.HaveLen(3))
}
