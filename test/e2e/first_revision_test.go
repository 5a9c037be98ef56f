package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

// A template released in waves, changed a moment after it was created, never reaches a
// member as an update that skipped the waves: either the change is revision 1 and the members
// first run it, or revision 1 is what was created and the change travels as release r2. Before,
// the members could get the created template at once, and the change became revision 1 and
// went everywhere with no release.
func TestChangeBeforeTheFirstRevisionIsReleased(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "first-revision"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{ManualApproval: true}},
				{Name: "rest", Percentage: ptr.To[int32](100)},
			}},
		},
	}
	g.Expect(cp.Create(ctx, policy)).To(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), policy) })
	web := webDeployment(ns, 1)
	g.Expect(cp.Create(ctx, web)).To(gomega.Succeed())
	// The change, as fast as a client can make it after the create.
	g.Eventually(func() error {
		cur := &appsv1.Deployment{}
		if err := cp.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = "registry.example/web:2"
		return cp.Update(ctx, cur)
	}).WithPolling(10 * time.Millisecond).Should(gomega.Succeed())

	g.Eventually(func() string { return memberImage(t, "east", ns, "web") }).ShouldNot(gomega.BeEmpty())
	waitFirstRevision(g, ns)
	// The clusters the template is placed on (a member another test left tainted is not).
	var others []string
	for _, tc := range bindingOf(ctx, ns, "web-deployment").Spec.Clusters {
		if tc.Name != "east" {
			others = append(others, tc.Name)
		}
	}
	g.Expect(others).NotTo(gomega.BeEmpty())
	for _, cluster := range others {
		g.Eventually(func() string { return memberImage(t, cluster, ns, "web") }).ShouldNot(gomega.BeEmpty(), cluster)
	}
	time.Sleep(3 * time.Second) // time for any update that would skip the waves
	rev2 := getRelease(ns, "web-deployment-r2")
	for _, cluster := range others {
		img := memberImage(t, cluster, ns, "web")
		if rev2 != nil {
			// The change is release r2, waiting for approval in east: the rest keep revision 1.
			g.Expect(img).To(gomega.Equal("registry.example/web:1"), "%s got the change without its release", cluster)
			continue
		}
		// The change is revision 1: the members first ran it, and never anything else.
		g.Expect(img).To(gomega.Equal("registry.example/web:2"), cluster)
		g.Expect(memberGeneration(t, cluster, ns, "web")).To(gomega.Equal(int64(1)), "%s was updated without a release", cluster)
	}
	if rev2 == nil {
		g.Expect(memberGeneration(t, "east", ns, "web")).To(gomega.Equal(int64(1)), "east was updated without a release")
	}
	t.Logf("the change was %s", map[bool]string{true: "release r2", false: "revision 1"}[rev2 != nil])
}
