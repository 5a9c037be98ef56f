package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

func createAll(t *testing.T, g gomega.Gomega, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		g.Expect(cp.Create(context.Background(), o)).To(gomega.Succeed(), "creating %T %s", o, o.GetName())
		t.Cleanup(func() { _ = cp.Delete(context.Background(), o) })
	}
}

func existsIn(t *testing.T, cluster string, obj client.Object) bool {
	err := memberClient(t, cluster).Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
	return err == nil
}

// A ConfigMap the Deployment's pods read follows it to its cluster and is removed with it.
func TestDependencyFollowsItsWorkload(t *testing.T) {
	g := newG(t)
	ns := "deps"
	ensureNamespace(t, cp, ns)
	cfg := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "api-config", Namespace: ns}, Data: map[string]string{"MODE": "fast"}}
	dep := webDeployment(ns, 1)
	dep.Name = "api"
	dep.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "api-config"}}}}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "api"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
			PropagateDeps:     true,
		},
	}
	createAll(t, g, cfg, policy)
	g.Expect(cp.Create(context.Background(), dep)).To(gomega.Succeed())

	g.Eventually(func() bool { return existsIn(t, "east", cfg) }).Should(gomega.BeTrue())
	g.Eventually(func() bool { return existsIn(t, "east", dep) }).Should(gomega.BeTrue())
	g.Expect(existsIn(t, "west", cfg)).To(gomega.BeFalse(), "the dependency goes only where its workload goes")

	// The workload stops referencing it: it leaves the member, the workload stays.
	g.Eventually(func() error {
		cur := &appsv1.Deployment{}
		if err := cp.Get(context.Background(), client.ObjectKeyFromObject(dep), cur); err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].EnvFrom = nil
		return cp.Update(context.Background(), cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() bool { return existsIn(t, "east", cfg) }).Should(gomega.BeFalse(), "a dependency no longer referenced is pruned")
	g.Expect(existsIn(t, "east", dep)).To(gomega.BeTrue())

	g.Expect(cp.Delete(context.Background(), dep)).To(gomega.Succeed())
	g.Eventually(func() bool { return existsIn(t, "east", dep) }).Should(gomega.BeFalse(), "the workload is cleaned up")
}

// A member-side scaler (an HPA writes through the scale subresource) keeps its replicas when
// Flotilla re-applies a changed template.
func TestMemberScalerIsNotFought(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "scaled"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"west"}}},
		},
	}
	dep := webDeployment(ns, 2)
	createAll(t, g, policy, dep)
	g.Eventually(func() int32 { return memberReplicas(t, "west", ns, "web") }).Should(gomega.Equal(int32(2)))

	west := memberClient(t, "west")
	member := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	// The member's controllers write the Deployment too: a conflict is read again, as a real
	// scaler does.
	g.Eventually(func() error {
		scale := &autoscalingv1.Scale{}
		if err := west.SubResource("scale").Get(ctx, member, scale); err != nil {
			return err
		}
		scale.Spec.Replicas = 7
		return west.SubResource("scale").Update(ctx, member, client.WithSubResourceBody(scale), client.FieldOwner("hpa-simulator"))
	}).Should(gomega.Succeed())

	g.Eventually(func() error {
		cur := &appsv1.Deployment{}
		if err := cp.Get(ctx, client.ObjectKeyFromObject(dep), cur); err != nil {
			return err
		}
		cur.Labels["release"] = "2"
		return cp.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() string {
		if d := memberDeployment(t, "west", ns, "web"); d != nil {
			return d.Labels["release"]
		}
		return ""
	}).Should(gomega.Equal("2"), "the template change is applied")
	g.Expect(memberReplicas(t, "west", ns, "web")).To(gomega.Equal(int32(7)), "the member scaler's replicas stay")
}

// With deletionPolicy Orphan, deleting the template leaves the member object running.
func TestOrphanKeepsMemberObjects(t *testing.T) {
	g := newG(t)
	ns := "orphans"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "keep", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
			DeletionPolicy:    policyv1alpha1.DeletionOrphan,
		},
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: ns}, Data: map[string]string{"a": "b"}}
	createAll(t, g, policy)
	g.Expect(cp.Create(context.Background(), cm)).To(gomega.Succeed())
	g.Eventually(func() bool { return existsIn(t, "east", cm) }).Should(gomega.BeTrue())
	g.Expect(cp.Delete(context.Background(), cm)).To(gomega.Succeed())
	g.Eventually(func() bool {
		return cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "kept-configmap"}, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "work.flotilla.dev/v1alpha1", "kind": "ResourceBinding"}}) != nil
	}).Should(gomega.BeTrue(), "the binding goes")
	g.Consistently(func() bool { return existsIn(t, "east", cm) }).WithTimeout(3*time.Second).Should(gomega.BeTrue(), "the member object stays")
}

// Relabelling a cluster so the policy no longer selects it moves the workload off it; a
// selector with DoesNotExist leaves out what carries the label.
func TestRelabelMovesOffAndDoesNotExistExcludes(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "labels"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", LabelSelector: &policyv1alpha1.LabelSelector{
				MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "flotilla.dev/local-only", Operator: "DoesNotExist"}},
			}}},
			Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{LabelSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"env": "prod"}}}},
		},
	}
	shared := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns}}
	local := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: ns, Labels: map[string]string{"flotilla.dev/local-only": "true"}}}
	createAll(t, g, policy, shared, local)
	g.Eventually(func() []bool {
		return []bool{existsIn(t, "east", shared), existsIn(t, "west", shared), existsIn(t, "europe", shared)}
	}).
		Should(gomega.Equal([]bool{true, true, false}), "env=prod selects east and west")
	g.Expect(existsIn(t, "east", local)).To(gomega.BeFalse(), "DoesNotExist leaves the labelled ConfigMap out")

	relabel := func(env string) {
		g.Eventually(func() error {
			cl := &clusterv1alpha1.Cluster{}
			if err := cp.Get(ctx, client.ObjectKey{Name: "west"}, cl); err != nil {
				return err
			}
			cl.Labels["env"] = env
			return cp.Update(ctx, cl)
		}).Should(gomega.Succeed())
	}
	relabel("retired")
	t.Cleanup(func() { relabel("prod") })
	g.Eventually(func() bool { return existsIn(t, "west", shared) }).Should(gomega.BeFalse(), "west no longer matches env=prod")
	g.Expect(existsIn(t, "east", shared)).To(gomega.BeTrue())
}

// A ReplicaSet created directly in the control plane, as a rollout controller does, is
// divided 5/5 and its status aggregated on the template.
func TestReplicaSetDividedAndAggregated(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "rollouts"
	ensureNamespace(t, cp, ns)
	w := func(c string) policyv1alpha1.StaticClusterWeight {
		return policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{c}}, Weight: 1}
	}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "ReplicaSet"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{Type: "Divided", DivisionPreference: "Weighted",
					WeightPreference: &policyv1alpha1.WeightPreference{StaticWeightList: []policyv1alpha1.StaticClusterWeight{w("east"), w("west")}}},
			},
		},
	}
	labels := map[string]string{"app": "canary", "rollouts-pod-template-hash": "abc123"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc123", Namespace: ns, Labels: labels},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](10),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:2"}}}},
		},
	}
	createAll(t, g, policy, rs)
	memberRS := func(c string) int32 {
		got := &appsv1.ReplicaSet{}
		if err := memberClient(t, c).Get(ctx, client.ObjectKeyFromObject(rs), got); err != nil {
			return -1
		}
		return ptr.Deref(got.Spec.Replicas, 1)
	}
	g.Eventually(func() []int32 { return []int32{memberRS("east"), memberRS("west")} }).Should(gomega.Equal([]int32{5, 5}))
	g.Eventually(func() int32 {
		got := &appsv1.ReplicaSet{}
		_ = cp.Get(ctx, client.ObjectKeyFromObject(rs), got)
		return got.Status.AvailableReplicas
	}).Should(gomega.Equal(int32(10)))
}

// A CRD installed in the control plane and the members after Flotilla started: its instances
// propagate once a policy selects them.
func TestCRDInstalledLaterPropagates(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	installCRD(t, g, "example.flotilla.dev", "Gadget", "gadgets")
	ns := "gadgets"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "example.flotilla.dev/v1alpha1", Kind: "Gadget"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"europe"}}},
		},
	}
	createAll(t, g, policy)
	gadget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.flotilla.dev/v1alpha1", "kind": "Gadget",
		"metadata": map[string]any{"name": "sprocket", "namespace": ns}, "spec": map[string]any{"teeth": int64(12)},
	}}
	g.Eventually(func() error { return cp.Create(ctx, gadget.DeepCopy()) }).Should(gomega.Succeed())
	// Seconds normally; right after europe's apiserver restarted (an earlier failover test), its
	// CRD watch resumes only after client-go's watch backoff, up to about 45 s.
	g.Eventually(func() any {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(gadget.GroupVersionKind())
		if err := memberClient(t, "europe").Get(ctx, client.ObjectKeyFromObject(gadget), got); err != nil {
			return nil
		}
		return got.Object["spec"]
	}).WithTimeout(2*time.Minute).Should(gomega.Equal(map[string]any{"teeth": int64(12)}), "the CRD became usable through europe's CRD watch, long before --discovery-interval")
}
