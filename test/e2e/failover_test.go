package e2e

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/historian"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
)

func memberAvailable(t *testing.T, cluster, ns, name string) int32 {
	d := &appsv1.Deployment{}
	if err := memberClient(t, cluster).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return -1
	}
	return d.Status.AvailableReplicas
}

// Stopping a member's API server moves its Divided replicas to the other clusters within the
// grace period + 15 s, the old placement goes once the replacements are available, a
// Duplicated workload (namespaced or cluster-scoped) stays and is reported lost, a policy that
// tolerates the taint keeps its division, and after the member returns nothing runs twice.
func TestClusterFailoverMovesDividedReplicas(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "failover"
	ensureNamespace(t, cp, ns)
	t.Cleanup(func() { _ = fleet.StartMember(context.Background(), "europe") })
	divided := dividedEvenly(ns, "divided", "web")
	duplicated := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "duplicated", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "agent"}},
		},
	}
	// The same division, tolerating the unreachable taint: it stays where it is.
	tolerant := divided.DeepCopy()
	tolerant.Name = "tolerant"
	tolerant.Spec.ResourceSelectors[0].Name = "cache"
	tolerant.Spec.Placement.ClusterTolerations = []policyv1alpha1.Toleration{{Key: names.UnreachableTaintKey, Operator: "Exists"}}
	web := webDeployment(ns, 9)
	agent := webDeployment(ns, 1)
	agent.Name = "agent"
	cache := webDeployment(ns, 9)
	cache.Name = "cache"
	// A cluster-scoped template, Duplicated through a ClusterResourceBinding, stays too.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "failover-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}
	roles := &policyv1alpha1.ClusterPropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "failover-roles"},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{
			{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "failover-reader"}}},
	}
	createAll(t, g, divided, duplicated, tolerant, roles, web, agent, cache, role)
	crbEurope := func() *workv1alpha1.ClusterStatus {
		b := &workv1alpha1.ClusterResourceBinding{}
		if cp.Get(ctx, client.ObjectKey{Name: "failover-reader-clusterrole"}, b) != nil {
			return nil
		}
		for i := range b.Status.Clusters {
			if b.Status.Clusters[i].Cluster == "europe" {
				return &b.Status.Clusters[i]
			}
		}
		return nil
	}
	g.Eventually(func() error {
		return memberClient(t, "europe").Get(ctx, client.ObjectKey{Name: "failover-reader"}, &rbacv1.ClusterRole{})
	}).Should(gomega.Succeed())
	replicas := func() []int32 {
		return []int32{memberReplicas(t, "east", ns, "web"), memberReplicas(t, "west", ns, "web"), memberReplicas(t, "europe", ns, "web")}
	}
	g.Eventually(replicas).Should(gomega.Equal([]int32{3, 3, 3}))
	// Every member runs its share first: a member an earlier test restarted can take a while
	// to have its pods available again, which is not what this test measures.
	for _, cluster := range []string{"east", "west", "europe"} {
		g.Eventually(func() int32 { return memberAvailable(t, cluster, ns, "web") }).Should(gomega.Equal(int32(3)), cluster)
	}
	g.Eventually(func() int32 { return memberReplicas(t, "europe", ns, "agent") }).Should(gomega.Equal(int32(1)))

	g.Expect(fleet.StopComponent("europe-apiserver")).To(gomega.Succeed())
	// Detection (probe window) + grace period + 15 s for re-placement and available replicas.
	g.Eventually(func() int32 { return memberAvailable(t, "east", ns, "web") + memberAvailable(t, "west", ns, "web") }).
		WithTimeout(probePeriod*failureThreshold + probeTimeout + failoverGrace + 15*time.Second).Should(gomega.Equal(int32(9)))
	cl := &clusterv1alpha1.Cluster{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Name: "europe"}, cl)).To(gomega.Succeed())
	g.Expect(kube.Unreachable(cl)).To(gomega.BeTrue(), "europe is tainted unreachable")
	// The eviction task ends once the replacements are available.
	g.Eventually(func() []workv1alpha1.GracefulEvictionTask {
		return bindingNow(ctx, ns, "web-deployment").Spec.GracefulEvictionTasks
	}).Should(gomega.BeEmpty())
	// History says web left europe by failover, and that no user did it.
	admin := inventoryAs(t, "")
	g.Eventually(func() []string {
		var out []string
		for _, it := range historyOf(t, admin, url.Values{"team": {ns}, "cluster": {"europe"}}) {
			if it.Name == "web" {
				out = append(out, fmt.Sprintf("%s %s by %s", it.Outcome, it.Cause, it.Actor))
			}
		}
		return out
	}).Should(gomega.ContainElement("removed failover by "+historian.ActorFailover), "web's history in europe")
	// The Duplicated agent stays placed on europe and is reported lost.
	g.Eventually(func() bool {
		for _, cs := range bindingNow(ctx, ns, "agent-deployment").Status.Clusters {
			if cs.Cluster == "europe" {
				return cs.Lost
			}
		}
		return false
	}).Should(gomega.BeTrue())
	g.Expect(placedOn(ctx, ns, "agent-deployment")).To(gomega.HaveKey("europe"))
	g.Eventually(func() bool { cs := crbEurope(); return cs != nil && cs.Lost }).Should(gomega.BeTrue(), "the ClusterResourceBinding keeps europe and reports it lost")
	g.Consistently(func() map[string]int32 { return placedOn(ctx, ns, "cache-deployment") }).WithTimeout(3*time.Second).
		Should(gomega.Equal(map[string]int32{"east": 3, "west": 3, "europe": 3}), "a policy tolerating the unreachable taint keeps its division")

	returned := time.Now().Truncate(time.Second)
	g.Expect(fleet.StartMember(ctx, "europe")).To(gomega.Succeed())
	g.Eventually(func() bool {
		g.Expect(cp.Get(ctx, client.ObjectKey{Name: "europe"}, cl)).To(gomega.Succeed())
		return kube.Unreachable(cl)
	}).Should(gomega.BeFalse())
	// Static weights are the desired division: the replicas return to 3/3/3 once europe's
	// stale Deployment (its evicted Work's) is gone and a new one is placed, and from then on
	// they add up to exactly 9.
	g.Eventually(func() bool {
		d := &appsv1.Deployment{}
		return memberClient(t, "europe").Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d) == nil && !d.CreationTimestamp.Time.Before(returned)
	}).WithTimeout(2*time.Minute).Should(gomega.BeTrue(), "europe's stale Deployment is replaced")
	g.Eventually(replicas).WithTimeout(2 * time.Minute).Should(gomega.Equal([]int32{3, 3, 3}))
	// Nothing runs twice in pods either: the stale Deployment's ReplicaSet and pods go with it.
	g.Eventually(func() string { return podsVersusReplicas(t, "europe", ns) }).WithTimeout(30*time.Second).
		Should(gomega.Equal("pods 7, replicas 7"), "europe runs exactly its Deployments' replicas")
	g.Consistently(func() int32 {
		var sum int32
		for _, n := range replicas() {
			sum += max(n, 0)
		}
		return sum
	}).WithTimeout(5 * time.Second).Should(gomega.Equal(int32(9)))
	g.Eventually(func() bool {
		for _, cs := range bindingNow(ctx, ns, "agent-deployment").Status.Clusters {
			if cs.Cluster == "europe" {
				return cs.Lost
			}
		}
		return true
	}).Should(gomega.BeFalse())
	g.Eventually(func() bool { cs := crbEurope(); return cs == nil || cs.Lost }).Should(gomega.BeFalse())
}

// A workload that stays Degraded in its cluster past the toleration moves to the next
// eligible cluster, with the reason on the binding and an event; the old placement goes once
// the replacement is available.
func TestApplicationFailoverMovesDegradedWorkload(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "appfail"
	ensureNamespace(t, cp, ns)
	noPodsIn(t, g, "west", ns)
	createAll(t, g, westThenEast(ns, 3, policyv1alpha1.PurgeGraceful), degradableWeb(ns))
	g.Eventually(func() workv1alpha1.Health {
		for _, cs := range bindingNow(ctx, ns, "web-deployment").Status.Clusters {
			if cs.Cluster == "west" {
				return cs.Health
			}
		}
		return ""
	}).Should(gomega.Equal(workv1alpha1.HealthDegraded))

	g.Eventually(func() []string {
		var out []string
		for _, f := range bindingNow(ctx, ns, "web-deployment").Spec.FailedClusters {
			out = append(out, f.Cluster)
		}
		return out
	}).Should(gomega.Equal([]string{"west"}))
	g.Expect(bindingNow(ctx, ns, "web-deployment").Spec.FailedClusters[0].Message).To(gomega.ContainSubstring("Degraded in west"))
	g.Eventually(func() int32 { return memberAvailable(t, "east", ns, "web") }).Should(gomega.Equal(int32(2)))
	g.Eventually(func() int32 { return memberReplicas(t, "west", ns, "web") }).Should(gomega.Equal(int32(-1)))
	g.Expect(placedOn(ctx, ns, "web-deployment")).To(gomega.Equal(map[string]int32{"east": 2}))
	g.Eventually(func() bool {
		events := &corev1.EventList{}
		_ = cp.List(ctx, events, client.InNamespace(ns))
		for _, e := range events.Items {
			if e.Reason == "ApplicationFailover" && e.InvolvedObject.Name == "web-deployment" {
				return true
			}
		}
		return false
	}).Should(gomega.BeTrue())
}

// Purge modes of application failover. Immediately removes the Degraded copy at once, without
// waiting for a replacement that here can never become available; Never keeps it (for the
// operator to inspect) even once the replacement is available.
func TestApplicationFailoverPurgeModes(t *testing.T) {
	ctx := context.Background()
	start := func(t *testing.T, g gomega.Gomega, ns string, mode policyv1alpha1.PurgeMode) {
		createAll(t, g, westThenEast(ns, 2, mode), degradableWeb(ns))
		g.Eventually(func() []workv1alpha1.FailedCluster { return bindingNow(ctx, ns, "web-deployment").Spec.FailedClusters }).
			Should(gomega.HaveLen(1))
		g.Expect(bindingNow(ctx, ns, "web-deployment").Spec.FailedClusters[0].Cluster).To(gomega.Equal("west"))
		g.Eventually(func() map[string]int32 { return placedOn(ctx, ns, "web-deployment") }).Should(gomega.Equal(map[string]int32{"east": 2}))
	}

	t.Run("Immediately", func(t *testing.T) {
		g := newG(t)
		ns := "purge-immediately"
		ensureNamespace(t, cp, ns)
		noPodsIn(t, g, "west", ns)
		noPodsIn(t, g, "east", ns) // the replacement never becomes available
		start(t, g, ns, policyv1alpha1.PurgeImmediately)
		g.Eventually(func() int32 { return memberReplicas(t, "west", ns, "web") }).Should(gomega.Equal(int32(-1)), "west's copy is removed at once")
		g.Eventually(func() int32 { return memberReplicas(t, "east", ns, "web") }).Should(gomega.Equal(int32(2)))
		g.Expect(memberAvailable(t, "east", ns, "web")).To(gomega.BeZero(), "it did not wait for the replacement")
		g.Expect(bindingNow(ctx, ns, "web-deployment").Spec.GracefulEvictionTasks).To(gomega.BeEmpty())
	})

	t.Run("Never", func(t *testing.T) {
		g := newG(t)
		ns := "purge-never"
		ensureNamespace(t, cp, ns)
		noPodsIn(t, g, "west", ns)
		start(t, g, ns, policyv1alpha1.PurgeNever)
		g.Eventually(func() int32 { return memberAvailable(t, "east", ns, "web") }).Should(gomega.Equal(int32(2)))
		tasks := bindingNow(ctx, ns, "web-deployment").Spec.GracefulEvictionTasks
		g.Expect(tasks).To(gomega.HaveLen(1))
		g.Expect(tasks[0].Cluster).To(gomega.Equal("west"))
		g.Expect(tasks[0].PurgeMode).To(gomega.Equal(workv1alpha1.PurgeNever))
		g.Consistently(func() int32 { return memberReplicas(t, "west", ns, "web") }).WithTimeout(5*time.Second).
			Should(gomega.Equal(int32(2)), "west's copy stays although the replacement is available")
	})
}

// podsVersusReplicas counts a member namespace's live pods against its Deployments' replicas.
func podsVersusReplicas(t *testing.T, cluster, ns string) string {
	pods := &corev1.PodList{}
	deployments := &appsv1.DeploymentList{}
	c := memberClient(t, cluster)
	if c.List(context.Background(), pods, client.InNamespace(ns)) != nil || c.List(context.Background(), deployments, client.InNamespace(ns)) != nil {
		return "unreadable"
	}
	live, replicas := 0, int32(0)
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() {
			live++
		}
	}
	for _, d := range deployments.Items {
		replicas += ptr.Deref(d.Spec.Replicas, 0)
	}
	return fmt.Sprintf("pods %d, replicas %d", live, replicas)
}

// dividedEvenly divides the named Deployment by equal static weights over the three members.
func dividedEvenly(ns, name, deployment string) *policyv1alpha1.PropagationPolicy {
	var weights []policyv1alpha1.StaticClusterWeight
	for _, c := range []string{"east", "west", "europe"} {
		weights = append(weights, policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{c}}, Weight: 1})
	}
	return &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment}},
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{
				Type: policyv1alpha1.ReplicaSchedulingDivided, DivisionPreference: policyv1alpha1.DivisionWeighted,
				WeightPreference: &policyv1alpha1.WeightPreference{StaticWeightList: weights},
			}},
		},
	}
}

// noPodsIn makes a member refuse every pod of the namespace (a zero pod quota), so a
// Deployment there turns Degraded.
func noPodsIn(t *testing.T, g gomega.Gomega, cluster, ns string) {
	c := memberClient(t, cluster)
	ensureNamespace(t, c, ns)
	createAllIn(t, g, c, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-pods", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}})
}

// westThenEast places the namespace's Deployments in west, with east as the fallback that
// application failover moves them to.
func westThenEast(ns string, toleration int32, mode policyv1alpha1.PurgeMode) *policyv1alpha1.PropagationPolicy {
	return &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
			Placement: policyv1alpha1.Placement{ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{
				{AffinityName: "primary", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"west"}}},
				{AffinityName: "backup", ClusterAffinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
			}},
			Failover: &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{
				TolerationSeconds: toleration, PurgeMode: mode, GracePeriodSeconds: 120}},
		},
	}
}

// degradableWeb is a two-replica web Deployment that turns Degraded 5 s after it cannot
// progress.
func degradableWeb(ns string) *appsv1.Deployment {
	web := webDeployment(ns, 2)
	web.Spec.ProgressDeadlineSeconds = ptr.To(int32(5))
	return web
}

func createAllIn(t *testing.T, g gomega.Gomega, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		g.Expect(c.Create(context.Background(), o)).To(gomega.Succeed())
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
}

// bindingNow is the binding as it is, or an empty one while it does not exist yet, so polls
// can read its fields.
func bindingNow(ctx context.Context, ns, name string) *workv1alpha1.ResourceBinding {
	if b := bindingOf(ctx, ns, name); b != nil {
		return b
	}
	return &workv1alpha1.ResourceBinding{}
}

// A member lost in the middle of a release: its replicas move to the other clusters, and each
// runs them at the revision its wave implies (east, released, the new image; west, not yet
// reached, the stable one).
func TestFailoverDuringReleaseKeepsEachClustersRevision(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "failover-release"
	ensureNamespace(t, cp, ns)
	t.Cleanup(func() { _ = fleet.StartMember(context.Background(), "europe") })
	policy := dividedEvenly(ns, "web", "web")
	policy.Spec.Rollout = &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
		{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{ManualApproval: true}},
	}}
	web := webDeployment(ns, 9)
	createAll(t, g, policy, web)
	g.Eventually(func() int32 {
		return memberAvailable(t, "east", ns, "web") + memberAvailable(t, "west", ns, "web") + memberAvailable(t, "europe", ns, "web")
	}).Should(gomega.Equal(int32(9)))
	setImage(t, g, web, "registry.example/web:2")
	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase(ns, "web-deployment-r2", 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))

	g.Expect(fleet.StopComponent("europe-apiserver")).To(gomega.Succeed())
	g.Eventually(func() int32 { return memberAvailable(t, "east", ns, "web") + memberAvailable(t, "west", ns, "web") }).
		WithTimeout(probePeriod*failureThreshold + probeTimeout + failoverGrace + 15*time.Second).Should(gomega.Equal(int32(9)))
	g.Expect(memberReplicas(t, "east", ns, "web")).To(gomega.BeNumerically(">", 3))
	g.Expect(memberReplicas(t, "west", ns, "web")).To(gomega.BeNumerically(">", 3))
	g.Expect(memberImage(t, "east", ns, "web")).To(gomega.Equal("registry.example/web:2"))
	g.Expect(memberImage(t, "west", ns, "web")).To(gomega.Equal("registry.example/web:1"))
	// East scaled up for the moved replicas; once they are available at the new revision the
	// wave waits for its approval again, neither rolled back nor passed.
	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase(ns, "web-deployment-r2", 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))
	g.Expect(releasePhase(ns, "web-deployment-r2")).To(gomega.Equal(rolloutv1alpha1.ReleaseProgressing))
	g.Expect(fleet.StartMember(ctx, "europe")).To(gomega.Succeed())
}
