package e2e

import (
	"context"
	"net/url"
	"sort"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/revision"
)

var members = []string{"east", "west", "europe"}

// podUIDs lists the UIDs of a Deployment's pods in every member.
func podUIDs(t *testing.T, ns, app string) map[string][]string {
	out := map[string][]string{}
	for _, m := range members {
		pods := &corev1.PodList{}
		if err := memberClient(t, m).List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
			return nil
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp.IsZero() {
				out[m] = append(out[m], string(p.UID))
			}
		}
		sort.Strings(out[m])
	}
	return out
}

// legacyDeployment is the workload that runs unmanaged in the members before adoption.
func legacyDeployment(ns string, replicas int32) *appsv1.Deployment {
	d := webDeployment(ns, replicas)
	d.Name, d.Labels = "legacy", map[string]string{"app": "legacy"}
	d.Spec.Selector.MatchLabels = map[string]string{"app": "legacy"}
	d.Spec.Template.Labels = map[string]string{"app": "legacy"}
	return d
}

// runUnmanaged creates the legacy Deployment directly in every member, as a pipeline before
// Flotilla would have, waits until it is available and returns its pods' UIDs.
func runUnmanaged(t *testing.T, g gomega.Gomega, ns string, replicas int32) map[string][]string {
	t.Helper()
	for _, m := range members {
		c := memberClient(t, m)
		ensureNamespace(t, c, ns)
		g.Expect(c.Create(context.Background(), legacyDeployment(ns, replicas))).To(gomega.Succeed())
		t.Cleanup(func() { _ = c.Delete(context.Background(), legacyDeployment(ns, replicas)) })
	}
	g.Eventually(func() []int32 {
		return []int32{memberAvailable(t, "east", ns, "legacy"), memberAvailable(t, "west", ns, "legacy"), memberAvailable(t, "europe", ns, "legacy")}
	}).WithTimeout(2 * time.Minute).Should(gomega.Equal([]int32{replicas, replicas, replicas}))
	return podUIDs(t, ns, "legacy")
}

// managedIn lists the members where the Deployment carries Flotilla's mark or field manager.
func managedIn(t *testing.T, ns, name string) []string {
	var out []string
	for _, m := range members {
		d := &appsv1.Deployment{}
		if err := memberClient(t, m).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			continue
		}
		owned := d.Labels[workv1alpha1.ManagedByLabel] != ""
		for _, mf := range d.ManagedFields {
			owned = owned || mf.Manager == kube.FieldManager
		}
		if owned {
			out = append(out, m)
		}
	}
	return out
}

// A Deployment already running unmanaged in three members is adopted in three waves (the
// 1:2:7 pattern over three clusters) with Overwrite, each wave gated, without a pod restart;
// suspending one cluster stops writes there only; unmanaging hands every object back with its
// pods untouched, and deleting the template afterwards leaves them running.
func TestStagedAdoptionAndHandBack(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "adopt"
	legacy := func() *appsv1.Deployment { return legacyDeployment(ns, 2) }
	before := runUnmanaged(t, g, ns, 2)
	for _, m := range members {
		g.Expect(before[m]).To(gomega.HaveLen(2), m)
	}

	ensureNamespace(t, cp, ns)
	approval := policyv1alpha1.Gates{ManualApproval: true}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "adopt", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors:  []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "legacy"}},
			ConflictResolution: policyv1alpha1.ConflictOverwrite,
			Rollout: &policyv1alpha1.RolloutStrategy{StageFirstRevision: true, Waves: []policyv1alpha1.Wave{
				{Name: "ten", Percentage: ptr.To(int32(10)), Gates: approval},
				{Name: "twenty", Percentage: ptr.To(int32(20)), Gates: approval},
				{Name: "seventy", Percentage: ptr.To(int32(70))},
			}},
		},
	}
	createAll(t, g, policy, legacy())
	t.Cleanup(func() {
		if t.Failed() {
			dumpYAML(t, bindingOf(ctx, ns, "legacy-deployment"))
			dumpYAML(t, getRelease(ns, "legacy-deployment-r1"))
		}
	})
	var rel string
	g.Eventually(func() string {
		b := bindingOf(ctx, ns, "legacy-deployment")
		if b == nil {
			return ""
		}
		rel = revision.ReleaseName(b, 1)
		return rel
	}).ShouldNot(gomega.BeEmpty())

	for wave, adopted := range []int{1, 2} {
		g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase(ns, rel, wave) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))
		g.Expect(managedIn(t, ns, "legacy")).To(gomega.HaveLen(adopted), "wave %d adopted exactly its clusters", wave)
		g.Consistently(func() []string { return managedIn(t, ns, "legacy") }).WithTimeout(2 * time.Second).Should(gomega.HaveLen(adopted))
		out, err := flotilla("release", "promote", "deployment/legacy", "-n", ns)
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	}
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	g.Expect(managedIn(t, ns, "legacy")).To(gomega.ConsistOf(members))
	g.Expect(podUIDs(t, ns, "legacy")).To(gomega.Equal(before), "adoption restarted no pod")

	// Suspend west, then scale: east and europe follow, west keeps its 2 and shows suspended.
	// The switch is the template's annotation: no new revision, nothing of it in a member.
	latest := bindingNow(ctx, ns, "legacy-deployment").Spec.Revisions.Latest
	out, err := flotilla("suspend", "deployment/legacy", "-n", ns, "--cluster", "west")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() bool {
		for _, cs := range bindingNow(ctx, ns, "legacy-deployment").Status.Clusters {
			if cs.Cluster == "west" {
				return cs.Suspended
			}
		}
		return false
	}).Should(gomega.BeTrue())
	tmpl := &appsv1.Deployment{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, tmpl)).To(gomega.Succeed())
	g.Expect(tmpl.Annotations).To(gomega.HaveKeyWithValue(workv1alpha1.SuspendAnnotation, "west"))
	g.Expect(bindingNow(ctx, ns, "legacy-deployment").Spec.Revisions.Latest).To(gomega.Equal(latest), "a switch is no revision")
	east := &appsv1.Deployment{}
	g.Expect(memberClient(t, "east").Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, east)).To(gomega.Succeed())
	g.Expect(east.Annotations).NotTo(gomega.HaveKey(workv1alpha1.SuspendAnnotation))
	g.Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, d); err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To(int32(3))
		return cp.Update(ctx, d)
	}).Should(gomega.Succeed())
	g.Eventually(func() []int32 {
		return []int32{memberReplicas(t, "east", ns, "legacy"), memberReplicas(t, "europe", ns, "legacy")}
	}).Should(gomega.Equal([]int32{3, 3}))
	g.Consistently(func() int32 { return memberReplicas(t, "west", ns, "legacy") }).WithTimeout(3 * time.Second).Should(gomega.Equal(int32(2)))
	out, err = flotilla("describe", "deployment/legacy", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.MatchRegexp(`west\s+3\s+true\s+\S+\s+suspended`))
	out, err = flotilla("unsuspend", "deployment/legacy", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() int32 { return memberAvailable(t, "west", ns, "legacy") }).Should(gomega.Equal(int32(3)))

	// Hand everything back: no mark, no field manager, same pods.
	g.Eventually(func() []int32 {
		return []int32{memberAvailable(t, "east", ns, "legacy"), memberAvailable(t, "west", ns, "legacy"), memberAvailable(t, "europe", ns, "legacy")}
	}).Should(gomega.Equal([]int32{3, 3, 3}))
	running := podUIDs(t, ns, "legacy")
	out, err = flotilla("unmanage", "deployment/legacy", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() []string { return managedIn(t, ns, "legacy") }).Should(gomega.BeEmpty())
	out, err = flotilla("describe", "deployment/legacy", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("unmanaged"))
	// manage takes east back in place (Overwrite), the pods untouched; unmanage lets it go again.
	out, err = flotilla("manage", "deployment/legacy", "-n", ns, "--cluster", "east")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("managed again in east"))
	g.Eventually(func() []string { return managedIn(t, ns, "legacy") }).Should(gomega.Equal([]string{"east"}))
	g.Consistently(func() map[string][]string { return podUIDs(t, ns, "legacy") }).WithTimeout(2 * time.Second).Should(gomega.Equal(running))
	out, err = flotilla("unmanage", "deployment/legacy", "-n", ns, "--cluster", "east")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() []string { return managedIn(t, ns, "legacy") }).Should(gomega.BeEmpty())
	// History tells the adoption, the hand-back and the take-back, per cluster.
	admin := inventoryAs(t, "")
	g.Eventually(func() []string {
		var causes []string
		for _, it := range historyOf(t, admin, url.Values{"team": {ns}, "cluster": {"east"}}) {
			causes = append([]string{it.Cause + " " + it.Outcome}, causes...) // oldest first
		}
		return causes
	}).Should(gomega.ContainElements("adoption healthy", "unmanage removed", "manage healthy"))
	g.Expect(cp.Delete(ctx, legacy())).To(gomega.Succeed())
	g.Consistently(func() map[string][]string { return podUIDs(t, ns, "legacy") }).WithTimeout(5 * time.Second).Should(gomega.Equal(running))
	for _, m := range members {
		g.Expect(memberReplicas(t, m, ns, "legacy")).To(gomega.Equal(int32(3)), m)
	}
}

// dumpYAML logs an object for the record of a failed test.
func dumpYAML(t *testing.T, obj any) {
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Log(err)
		return
	}
	t.Logf("\n%s", data)
}

// Aborting a staged adoption hands the clusters it adopted back: Flotilla's marks go, the
// objects and their pods stay exactly as they were, and clusters not reached were never touched.
func TestStagedAdoptionAbortHandsBack(t *testing.T) {
	g := newG(t)
	ns := "adopt-abort"
	live := func() *appsv1.Deployment { return legacyDeployment(ns, 1) }
	before := runUnmanaged(t, g, ns, 1)

	ensureNamespace(t, cp, ns)
	createAll(t, g, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "adopt", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors:  []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "legacy"}},
			ConflictResolution: policyv1alpha1.ConflictOverwrite,
			Rollout: &policyv1alpha1.RolloutStrategy{StageFirstRevision: true, Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{ManualApproval: true}},
			}},
		},
	}, live())
	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase(ns, "legacy-deployment-r1", 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))
	g.Expect(managedIn(t, ns, "legacy")).To(gomega.Equal([]string{"east"}))

	out, err := flotilla("release", "abort", "deployment/legacy", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() []string { return managedIn(t, ns, "legacy") }).Should(gomega.BeEmpty())
	g.Consistently(func() map[string][]string { return podUIDs(t, ns, "legacy") }).WithTimeout(3 * time.Second).Should(gomega.Equal(before))
	for _, m := range members {
		g.Expect(memberReplicas(t, m, ns, "legacy")).To(gomega.Equal(int32(1)), m)
	}
}
