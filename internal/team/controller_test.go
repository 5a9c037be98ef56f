package team

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// A Team stored before admission refused them names groups that mean everyone: the controller
// binds the team's own groups, never those (and takes back one bound before), and says which
// field to fix in Ready=False and an event.
func TestTeamNeverBindsGroupsThatMeanEveryone(t *testing.T) {
	ctx := context.Background()
	team := &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: tenancyv1alpha1.TeamName, Generation: 1},
		Spec: tenancyv1alpha1.TeamSpec{
			Contributors: []string{"shop-devs", "system:authenticated", "system:masters"},
			Readers:      []string{"system:unauthenticated", "system:serviceaccounts:shop", "system:bootstrappers:kubeadm:default-node-token", "system:serviceaccounts", "system:nodes"},
		}}
	// Bound by an earlier version of the controller.
	old := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: tenancyv1alpha1.ContributorRoleBinding},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: tenancyv1alpha1.ContributorClusterRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"}}}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(team, old).WithStatusSubresource(team).Build()
	rec := events.NewFakeRecorder(10)
	if _, err := (&Controller{Client: c, Recorder: rec}).Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(team)}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{
		tenancyv1alpha1.ContributorRoleBinding: {"shop-devs"},
		tenancyv1alpha1.ReaderRoleBinding:      {"system:serviceaccounts:shop"},
	} {
		rb := &rbacv1.RoleBinding{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, rb); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range rb.Subjects {
			got = append(got, s.Name)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("RoleBinding %s binds (-want +got):\n%s", name, d)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(team), team); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(team.Status.Conditions, tenancyv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != tenancyv1alpha1.ReasonGroupNeverBound {
		t.Fatalf("Ready %+v, want False %s", ready, tenancyv1alpha1.ReasonGroupNeverBound)
	}
	for _, field := range []string{"spec.contributors[1]: system:authenticated", "spec.contributors[2]: system:masters", "spec.readers[0]: system:unauthenticated",
		"spec.readers[2]: system:bootstrappers:kubeadm:default-node-token", "spec.readers[3]: system:serviceaccounts ", "spec.readers[4]: system:nodes"} {
		if !strings.Contains(ready.Message, field) {
			t.Errorf("Ready message %q does not name %q", ready.Message, field)
		}
	}
	if strings.Contains(ready.Message, "system:serviceaccounts:shop") || strings.Contains(ready.Message, "shop-devs") {
		t.Errorf("Ready message %q names a group that may be bound", ready.Message)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, tenancyv1alpha1.ReasonGroupNeverBound) || !strings.Contains(e, "spec.contributors[1]") {
			t.Errorf("event %q, want %s naming spec.contributors[1]", e, tenancyv1alpha1.ReasonGroupNeverBound)
		}
	default:
		t.Error("no event")
	}
}

// The groups a Team may name stay bound and Ready.
func TestTeamBindsItsOwnGroups(t *testing.T) {
	ctx := context.Background()
	team := &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: tenancyv1alpha1.TeamName},
		Spec: tenancyv1alpha1.TeamSpec{Contributors: []string{"shop-devs"}, Readers: []string{"shop-viewers", "system:serviceaccounts:shop"}}}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(team).WithStatusSubresource(team).Build()
	if _, err := (&Controller{Client: c}).Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(team)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(team), team); err != nil {
		t.Fatal(err)
	}
	if ready := meta.FindStatusCondition(team.Status.Conditions, tenancyv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue ||
		ready.Message != "1 contributor and 2 reader groups bound in namespace shop" {
		t.Errorf("Ready %+v, want True with 1 contributor and 2 reader groups", ready)
	}
}
