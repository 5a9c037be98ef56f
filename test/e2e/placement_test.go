package e2e

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

func bindingOf(ctx context.Context, ns, name string) *workv1alpha1.ResourceBinding {
	b := &workv1alpha1.ResourceBinding{}
	if err := cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
		return nil
	}
	return b
}

// Spread by region with minGroups 2 and maxGroups 2 picks two regions; asking for more groups
// than exist is reported as unschedulable.
func TestSpreadByRegion(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "spread"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "two-regions", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap"}},
			Placement:         policyv1alpha1.Placement{SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: "region", MinGroups: 2, MaxGroups: 2}}},
		},
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "spread", Namespace: ns}}
	createAll(t, g, policy, cm)
	g.Eventually(func() []string {
		var names []string
		if b := bindingOf(ctx, ns, "spread-configmap"); b != nil {
			for _, c := range b.Spec.Clusters {
				names = append(names, c.Name)
			}
		}
		sort.Strings(names)
		return names
	}).Should(gomega.HaveLen(2))

	g.Eventually(func() error {
		cur := &policyv1alpha1.PropagationPolicy{}
		if err := cp.Get(ctx, client.ObjectKeyFromObject(policy), cur); err != nil {
			return err
		}
		cur.Spec.Placement.SpreadConstraints[0] = policyv1alpha1.SpreadConstraint{SpreadByField: "region", MinGroups: 4}
		return cp.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() string {
		if b := bindingOf(ctx, ns, "spread-configmap"); b != nil {
			if c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.ConditionScheduled); c != nil && c.Status == metav1.ConditionFalse {
				return c.Message
			}
		}
		return ""
	}).Should(gomega.ContainSubstring("spread by region needs at least 4 groups, the candidate clusters form 3"))
}

// Division by available capacity gives a cluster whose CPU is mostly taken fewer replicas.
func TestCapacityBasedDivisionFollowsFreeCPU(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "capacity"
	ensureNamespace(t, cp, ns)
	// Fill most of west's 16 CPUs (two nodes of 8) with a workload of its own.
	west := memberClient(t, "west")
	ensureNamespace(t, west, "local-load")
	hog := webDeployment("local-load", 2)
	hog.Name = "hog"
	hog.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}
	g.Expect(west.Create(ctx, hog)).To(gomega.Succeed())
	t.Cleanup(func() { _ = west.Delete(context.Background(), hog) })

	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "by-capacity", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{Type: "Divided", DivisionPreference: "Weighted",
				WeightPreference: &policyv1alpha1.WeightPreference{DynamicWeight: policyv1alpha1.DynamicWeightAvailableReplicas}}},
		},
	}
	dep := webDeployment(ns, 9)
	dep.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	// Wait until west's Cluster shows the hog's request, so the division sees it.
	g.Eventually(func() metav1.ConditionStatus {
		return readyStatus(t, "west")
	}).Should(gomega.Equal(metav1.ConditionTrue))
	g.Eventually(func() bool {
		cl := clusterObj(ctx, "west")
		return cl != nil && cl.Status.ResourceSummary != nil && cl.Status.ResourceSummary.Requested.Cpu().Cmp(resource.MustParse("12")) >= 0
	}).Should(gomega.BeTrue())
	createAll(t, g, policy, dep)
	g.Eventually(func(g gomega.Gomega) {
		b := bindingOf(ctx, ns, "web-deployment")
		g.Expect(b).NotTo(gomega.BeNil())
		got := map[string]int32{}
		var total int32
		for _, c := range b.Spec.Clusters {
			got[c.Name] = c.Replicas
			total += c.Replicas
		}
		g.Expect(total).To(gomega.Equal(int32(9)))
		g.Expect(got["west"]).To(gomega.BeNumerically("<", got["east"]))
		g.Expect(got["west"]).To(gomega.BeNumerically("<", got["europe"]))
	}).Should(gomega.Succeed())
}

// An unmanaged Deployment already running in a member is adopted under Overwrite without a
// single pod restarting.
func TestOverwriteAdoptsWithoutRestartingPods(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "legacy"
	east := memberClient(t, "east")
	ensureNamespace(t, east, ns)
	ensureNamespace(t, cp, ns)
	live := webDeployment(ns, 2)
	live.Name = "legacy"
	g.Expect(east.Create(ctx, live)).To(gomega.Succeed())
	podUIDs := func() []types.UID {
		pods := &corev1.PodList{}
		_ = east.List(ctx, pods, client.InNamespace(ns))
		var uids []types.UID
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				uids = append(uids, p.UID)
			}
		}
		sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
		return uids
	}
	g.Eventually(podUIDs).Should(gomega.HaveLen(2))
	before := podUIDs()

	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "adopt", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors:  []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "legacy"}},
			Placement:          policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
			ConflictResolution: policyv1alpha1.ConflictOverwrite,
			DeletionPolicy:     policyv1alpha1.DeletionOrphan,
		},
	}
	tmpl := webDeployment(ns, 2)
	tmpl.Name = "legacy"
	createAll(t, g, policy, tmpl)
	g.Eventually(func() string {
		d := &appsv1.Deployment{}
		_ = east.Get(ctx, client.ObjectKeyFromObject(live), d)
		return d.Labels[workv1alpha1.ManagedByLabel]
	}).Should(gomega.Equal(workv1alpha1.ManagedByValue), "the member Deployment is adopted")
	g.Eventually(func() workv1alpha1.Health {
		if b := bindingOf(ctx, ns, "legacy-deployment"); b != nil {
			return b.Status.Health
		}
		return ""
	}).Should(gomega.Equal(workv1alpha1.HealthHealthy))
	g.Consistently(podUIDs).WithTimeout(3*time.Second).Should(gomega.Equal(before), "no pod restarted")
	rs := &appsv1.ReplicaSetList{}
	g.Expect(east.List(ctx, rs, client.InNamespace(ns))).To(gomega.Succeed())
	g.Expect(rs.Items).To(gomega.HaveLen(1), "no new ReplicaSet: the pod template did not change")
}

// Deleting a policy unplaces what it placed: with the default deletionPolicy Delete the member
// objects are removed.
func TestDeletingThePolicyFollowsItsDeletionPolicy(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "policy-gone"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "temporary", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: "placed"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
		},
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "placed", Namespace: ns}}
	createAll(t, g, cm)
	g.Expect(cp.Create(ctx, policy)).To(gomega.Succeed())
	g.Eventually(func() bool { return existsIn(t, "east", cm) }).Should(gomega.BeTrue())
	g.Expect(cp.Delete(ctx, policy)).To(gomega.Succeed())
	g.Eventually(func() bool { return existsIn(t, "east", cm) }).Should(gomega.BeFalse())
	g.Eventually(func() bool { return bindingOf(ctx, ns, "placed-configmap") == nil }).Should(gomega.BeTrue())
}

func clusterObj(ctx context.Context, name string) *clusterv1alpha1.Cluster {
	cl := &clusterv1alpha1.Cluster{}
	if err := cp.Get(ctx, client.ObjectKey{Name: name}, cl); err != nil {
		return nil
	}
	return cl
}

// A policy's placement change re-places the templates it placed (the scheduler finds them by
// the policy index), and nothing else.
func TestPolicyChangeMovesItsBindings(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "policy-change"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
		},
	}
	createAll(t, g, policy, webDeployment(ns, 1))
	g.Eventually(func() int32 { return memberReplicas(t, "east", ns, "web") }).Should(gomega.Equal(int32(1)))
	g.Eventually(func() error {
		cur := &policyv1alpha1.PropagationPolicy{}
		if err := cp.Get(ctx, client.ObjectKeyFromObject(policy), cur); err != nil {
			return err
		}
		cur.Spec.Placement.ClusterAffinity.ClusterNames = []string{"west"}
		return cp.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() int32 { return memberReplicas(t, "west", ns, "web") }).Should(gomega.Equal(int32(1)))
	g.Eventually(func() int32 { return memberReplicas(t, "east", ns, "web") }).Should(gomega.Equal(int32(-1)), "gone from east")
}
