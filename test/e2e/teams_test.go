package e2e

import (
	"context"
	"testing"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
)

// Two teams made with `flotilla team create` (squad-a and squad-b), with users authenticated by
// client certificates in groups: team A's contributor writes templates and policies in team A's
// namespace; team B's contributor gets 403 on team A's objects and cannot list them; team A's
// reader lists but gets 403 on create. A RoleBinding removed by hand is put back; a second Team in a namespace is
// refused naming the rule.
func TestTeamsKeepTeamsApart(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	for _, args := range [][]string{
		{"team", "create", "squad-a", "--contributor", "squad-a-devs", "--reader", "squad-a-viewers", "--description", "team A", "--clusters", "region=us-east"},
		{"team", "create", "squad-b", "--contributor", "squad-b-devs"},
	} {
		out, err := flotilla(append(args, "--kubeconfig", fleet.Kubeconfig(""))...)
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	}
	ready := func(ns string) bool {
		team := &tenancyv1alpha1.Team{}
		return cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: tenancyv1alpha1.TeamName}, team) == nil &&
			meta.IsStatusConditionTrue(team.Status.Conditions, tenancyv1alpha1.ConditionReady)
	}
	g.Eventually(func() bool { return ready("squad-a") && ready("squad-b") }).Should(gomega.BeTrue())

	alice := userClient(t, "", "alice", "squad-a-devs")
	bob := userClient(t, "", "bob", "squad-b-devs")
	carol := userClient(t, "", "carol", "squad-a-viewers")
	web := webDeployment("squad-a", 1)
	// The contributor role aggregates edit, which the control plane's aggregation fills in.
	g.Eventually(func() error { return alice.Create(ctx, web.DeepCopy()) }).Should(gomega.Succeed())
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "squad-a"},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}}}}}
	g.Expect(alice.Create(ctx, policy)).To(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), web); _ = cp.Delete(context.Background(), policy) })
	g.Eventually(func() int32 { return memberReplicas(t, "east", "squad-a", "web") }).Should(gomega.Equal(int32(1)), "team A's app runs")
	// The Team allows region=us-east only: west, which the policy names, never gets it.
	g.Eventually(func() string {
		if b := bindingOf(ctx, "squad-a", "web-deployment"); b != nil {
			if c := meta.FindStatusCondition(b.Status.Conditions, "Scheduled"); c != nil {
				return c.Message
			}
		}
		return ""
	}).Should(gomega.ContainSubstring("team squad-a allows only clusters matching region=us-east, so never europe, west"))
	g.Expect(memberReplicas(t, "west", "squad-a", "web")).To(gomega.Equal(int32(-1)), "west is outside the team's clusters")

	forbidden(g, bob.Get(ctx, client.ObjectKeyFromObject(web), &appsv1.Deployment{}), "")
	forbidden(g, bob.List(ctx, &appsv1.DeploymentList{}, client.InNamespace("squad-a")), "")
	forbidden(g, bob.Delete(ctx, policy.DeepCopy()), "")
	g.Expect(bob.Create(ctx, webDeployment("squad-b", 1))).To(gomega.Succeed(), "team B writes in its own namespace")

	g.Eventually(func() error { return carol.List(ctx, &appsv1.DeploymentList{}, client.InNamespace("squad-a")) }).Should(gomega.Succeed())
	g.Expect(carol.List(ctx, &policyv1alpha1.PropagationPolicyList{}, client.InNamespace("squad-a"))).To(gomega.Succeed())
	other := webDeployment("squad-a", 1)
	other.Name = "carols"
	forbidden(g, carol.Create(ctx, other), "")
	forbidden(g, carol.List(ctx, &appsv1.DeploymentList{}, client.InNamespace("squad-b")), "")
	// Nobody in a team may make a Team (it grants roles): that is the platform's.
	forbidden(g, alice.Create(ctx, &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: "squad-b", Name: tenancyv1alpha1.TeamName},
		Spec: tenancyv1alpha1.TeamSpec{Contributors: []string{"squad-a-devs"}}}), "")

	// A RoleBinding removed by hand comes back.
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "squad-a", Name: tenancyv1alpha1.ContributorRoleBinding}}
	g.Expect(cp.Delete(ctx, rb)).To(gomega.Succeed())
	g.Eventually(func() []rbacv1.Subject {
		got := &rbacv1.RoleBinding{}
		if cp.Get(ctx, client.ObjectKeyFromObject(rb), got) != nil {
			return nil
		}
		return got.Subjects
	}).Should(gomega.Equal([]rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "squad-a-devs"}}))

	err := cp.Create(ctx, &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: "squad-a", Name: "second"}})
	g.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "%v", err)
	g.Expect(err.Error()).To(gomega.ContainSubstring("a namespace holds one Team, named team"))
	err = cp.Create(ctx, &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: "squad-a", Name: tenancyv1alpha1.TeamName},
		Spec: tenancyv1alpha1.TeamSpec{Repositories: []string{"file:///srv/git/*"}}})
	g.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "%v", err)
	g.Expect(err.Error()).To(gomega.ContainSubstring("file:// is not one"))

	out, err := flotilla("team", "list", "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.MatchRegexp(`squad-a\s+team\s+\["squad-a-devs"\]\s+\["squad-a-viewers"\]\s+True`))
}
