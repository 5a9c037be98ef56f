package e2e

import (
	"time"

	"context"
	"testing"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func webDeployment(ns string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}},
			},
		},
	}
}

// Only NotFound is an absent object (-1): a read that fails otherwise (a timeout on a busy
// machine) is asked again for up to 2 s, then reads as unknown (-2), never as absent, so
// that a check of what left a member first cannot take a failed read for a deletion.
func memberReplicas(t *testing.T, cluster, ns, name string) int32 {
	d := &appsv1.Deployment{}
	for try := 0; ; try++ {
		err := memberClient(t, cluster).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d)
		switch {
		case err == nil:
			return ptr.Deref(d.Spec.Replicas, 1)
		case apierrors.IsNotFound(err):
			return -1
		case try == 10:
			t.Logf("reading Deployment %s/%s in %s: %v", ns, name, cluster, err)
			return -2
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Given a policy dividing Deployments 1:1 over east and west, when a 10-replica Deployment is
// applied to the control plane, then east and west run 5 each, europe none, and the template
// reports 10 available; scaling to 12 gives 6 and 6; deleting it cleans the members.
func TestDividedDeploymentIsPlacedAggregatedAndCleanedUp(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "shop"
	ensureNamespace(t, cp, ns)
	weight := func(cluster string) policyv1alpha1.StaticClusterWeight {
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
					WeightPreference: &policyv1alpha1.WeightPreference{StaticWeightList: []policyv1alpha1.StaticClusterWeight{weight("east"), weight("west")}},
				},
			},
		},
	}
	g.Expect(cp.Create(ctx, policy)).To(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), policy) })
	dep := webDeployment(ns, 10)
	g.Expect(cp.Create(ctx, dep)).To(gomega.Succeed())

	g.Eventually(func() []int32 {
		return []int32{memberReplicas(t, "east", ns, "web"), memberReplicas(t, "west", ns, "web"), memberReplicas(t, "europe", ns, "web")}
	}).Should(gomega.Equal([]int32{5, 5, -1}))
	g.Eventually(func(g gomega.Gomega) {
		got := &appsv1.Deployment{}
		g.Expect(cp.Get(ctx, client.ObjectKeyFromObject(dep), got)).To(gomega.Succeed())
		g.Expect(got.Status.AvailableReplicas).To(gomega.Equal(int32(10)))
		g.Expect(got.Status.UpdatedReplicas).To(gomega.Equal(int32(10)))
		g.Expect(got.Status.ObservedGeneration).To(gomega.Equal(got.Generation))
	}).Should(gomega.Succeed())
	binding := &workv1alpha1.ResourceBinding{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-deployment"}, binding)).To(gomega.Succeed())
	g.Expect(binding.Spec.PolicyRef.Name).To(gomega.Equal("web"))
	g.Eventually(func() workv1alpha1.Health {
		_ = cp.Get(ctx, client.ObjectKeyFromObject(binding), binding)
		return binding.Status.Health
	}).Should(gomega.Equal(workv1alpha1.HealthHealthy))

	// Scaling 10 -> 12 adds one replica per cluster.
	g.Eventually(func() error {
		cur := &appsv1.Deployment{}
		if err := cp.Get(ctx, client.ObjectKeyFromObject(dep), cur); err != nil {
			return err
		}
		cur.Spec.Replicas = ptr.To[int32](12)
		return cp.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() []int32 {
		return []int32{memberReplicas(t, "east", ns, "web"), memberReplicas(t, "west", ns, "web")}
	}).Should(gomega.Equal([]int32{6, 6}))
	g.Eventually(func() int32 {
		got := &appsv1.Deployment{}
		_ = cp.Get(ctx, client.ObjectKeyFromObject(dep), got)
		return got.Status.AvailableReplicas
	}).Should(gomega.Equal(int32(12)))

	// Deleting the template removes it from the members, then the binding and its Works.
	g.Expect(cp.Delete(ctx, dep)).To(gomega.Succeed())
	g.Eventually(func() []int32 {
		return []int32{memberReplicas(t, "east", ns, "web"), memberReplicas(t, "west", ns, "web")}
	}).Should(gomega.Equal([]int32{-1, -1}))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(cp.Get(ctx, client.ObjectKeyFromObject(binding), &workv1alpha1.ResourceBinding{}))
	}).Should(gomega.BeTrue())
}

// A Duplicated Service lands in every cluster; a ConfigMap that already exists unmanaged in a
// member is left untouched under the default Abort, and the binding says why.
func TestDuplicatedServiceAndAbortOnConflict(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "store"
	ensureNamespace(t, cp, ns)
	east := memberClient(t, "east")
	ensureNamespace(t, east, ns)
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"owner": "someone-else"}}
	g.Expect(east.Create(ctx, theirs)).To(gomega.Succeed())

	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "everywhere", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{
			{APIVersion: "v1", Kind: "Service"}, {APIVersion: "v1", Kind: "ConfigMap", Name: "settings"},
		}},
	}
	g.Expect(cp.Create(ctx, policy)).To(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), policy) })
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	g.Expect(cp.Create(ctx, svc)).To(gomega.Succeed())
	ours := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"owner": "flotilla"}}
	g.Expect(cp.Create(ctx, ours)).To(gomega.Succeed())

	for _, cluster := range fleet.Fleet().Names() {
		g.Eventually(func() error {
			return memberClient(t, cluster).Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{})
		}).Should(gomega.Succeed(), "service in %s", cluster)
	}
	g.Eventually(func() string {
		b := &workv1alpha1.ResourceBinding{}
		_ = cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings-configmap"}, b)
		if c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.ConditionApplied); c != nil {
			return c.Message
		}
		return ""
	}).Should(gomega.ContainSubstring("not managed by Flotilla"))
	got := &corev1.ConfigMap{}
	g.Expect(east.Get(ctx, client.ObjectKeyFromObject(theirs), got)).To(gomega.Succeed())
	g.Expect(got.Data).To(gomega.Equal(map[string]string{"owner": "someone-else"}))
	g.Expect(got.Labels).NotTo(gomega.HaveKey(workv1alpha1.ManagedByLabel))
	west := &corev1.ConfigMap{}
	g.Eventually(func() error { return memberClient(t, "west").Get(ctx, client.ObjectKeyFromObject(ours), west) }).Should(gomega.Succeed())
	g.Expect(west.Data).To(gomega.Equal(map[string]string{"owner": "flotilla"}))
}

// `flotilla get bindings|works` and `describe` show placement, replicas, health and policy.
func TestCLIShowsBindingsWorksAndDescribe(t *testing.T) {
	g := newG(t)
	ns := "cli"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "cli", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{Type: "Divided", DivisionPreference: "Weighted",
					WeightPreference: &policyv1alpha1.WeightPreference{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}, Weight: 3},
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"west"}}, Weight: 1},
					}}},
			},
		},
	}
	createAll(t, g, policy, webDeployment(ns, 4))
	kc := fleet.Kubeconfig("")
	g.Eventually(func() string {
		out, _ := flotilla("describe", "deployment/web", "-n", ns, "--kubeconfig", kc)
		return out
	}).Should(gomega.And(
		gomega.ContainSubstring("Policy:     PropagationPolicy cli/cli"),
		gomega.MatchRegexp(`east\s+3\s+true\s+Healthy`),
		gomega.MatchRegexp(`west\s+1\s+true\s+Healthy`),
	))
	out, err := flotilla("get", "bindings", "-n", ns, "--kubeconfig", kc)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(out).To(gomega.MatchRegexp(`web-deployment\s+Deployment\s+True\s+True\s+Healthy`))
	out, err = flotilla("get", "works", "-A", "--kubeconfig", kc)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(out).To(gomega.MatchRegexp(`flotilla-es-east\s+cli\.web-deployment\s+east\s+True\s+Healthy`))
	_, err = flotilla("describe", "deployment/nothing", "-n", ns, "--kubeconfig", kc)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("is a propagation policy selecting it?")))
}
