package targeting

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

func TestConflictNamesBothPoliciesAndTheField(t *testing.T) {
	divided := &policyv1alpha1.ReplicaScheduling{Type: "Divided"}
	duplicated := &policyv1alpha1.ReplicaScheduling{Type: "Duplicated"}
	cases := []struct {
		name    string
		targets []target
		field   string
	}{
		{"one sets it", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: divided}}, {ref: "b", spec: &appsv1alpha1.TargetSpec{}}}, ""},
		{"both agree", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: divided}}, {ref: "b", spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: divided.DeepCopy()}}}, ""},
		{"replicas differ", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: divided}}, {ref: "b", spec: &appsv1alpha1.TargetSpec{}}, {ref: "c", cluster: true, spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: duplicated}}}, "spec.replicaScheduling"},
		{"rollouts differ", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "x"}}}}},
			{ref: "b", spec: &appsv1alpha1.TargetSpec{Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "y"}}}}}}, "spec.rollout"},
		{"deletion differs", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{DeletionPolicy: policyv1alpha1.DeletionOrphan}}, {ref: "b", spec: &appsv1alpha1.TargetSpec{DeletionPolicy: policyv1alpha1.DeletionDelete}}}, "spec.deletionPolicy"},
	}
	for _, c := range cases {
		field, a, b := conflict(c.targets)
		if field != c.field {
			t.Errorf("%s: conflict field %q, want %q", c.name, field, c.field)
		}
		if field != "" && (a.ref == "" || b.ref == "" || a.ref == b.ref) {
			t.Errorf("%s: conflict names %q and %q, want two policies", c.name, a.ref, b.ref)
		}
	}
	_, a, b := conflict(cases[2].targets)
	if a.describe() != "TargetPolicy a" || !strings.HasPrefix(b.describe(), "ClusterTargetPolicy c") {
		t.Errorf("conflict describes %q and %q", a.describe(), b.describe())
	}
}

func TestFirstTakesTheFirstSetValue(t *testing.T) {
	ts := []target{{spec: &appsv1alpha1.TargetSpec{}}, {spec: &appsv1alpha1.TargetSpec{DeletionPolicy: policyv1alpha1.DeletionOrphan}}}
	if got := first(ts, func(s *appsv1alpha1.TargetSpec) policyv1alpha1.DeletionPolicy { return s.DeletionPolicy }); got != policyv1alpha1.DeletionOrphan {
		t.Errorf("first deletion policy %q", got)
	}
	if got := first(ts, func(s *appsv1alpha1.TargetSpec) *policyv1alpha1.RolloutStrategy { return s.Rollout }); got != nil {
		t.Errorf("no rollout set, got %v", got)
	}
}

func TestSelectorsOnePerKindByApplicationLabel(t *testing.T) {
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Status: appsv1alpha1.ApplicationStatus{Objects: []appsv1alpha1.ApplicationObject{
		{APIVersion: "v1", Kind: "ConfigMap", Name: "a"}, {APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, {APIVersion: "v1", Kind: "ConfigMap", Name: "b"},
	}}}
	for _, platform := range []bool{false, true} {
		sels := selectors(app, platform)
		if len(sels) != 2 || sels[0].Kind != "Deployment" || sels[1].Kind != "ConfigMap" {
			t.Fatalf("selectors %+v", sels)
		}
		for _, s := range sels {
			if s.LabelSelector.MatchLabels[appsv1alpha1.ApplicationLabel] != "web" {
				t.Errorf("selector %+v does not select by the application label", s)
			}
			if platform != (s.Namespace == "shop") {
				t.Errorf("platform=%v: selector namespace %q", platform, s.Namespace)
			}
		}
	}
}

// A policy of the generated placement's name that Flotilla did not generate for the
// Application (a user's, or another Application's) is never taken over: the Application
// says so, and the policy keeps its spec.
func TestAPolicyNameTakenIsReportedNotTakenOver(t *testing.T) {
	ctx := context.Background()
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"tier": "web"}},
		Status: appsv1alpha1.ApplicationStatus{Objects: []appsv1alpha1.ApplicationObject{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}}
	theirs := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app-web"},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: "mine"}}}}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithStatusSubresource(&appsv1alpha1.Application{}).WithObjects(
		&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "east", Labels: map[string]string{"region": "us-east"}}},
		targetPolicy("shop", "web", appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: regionIn("us-east")}),
		app, theirs).Build()
	ctrlr := &Controller{Client: c, Recorder: events.NewFakeRecorder(10)}
	if _, err := ctrlr.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	got := &appsv1alpha1.Application{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(app), got); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, ConditionPlaced)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != appsv1alpha1.ReasonPolicyNameTaken || !strings.Contains(cond.Message, "PropagationPolicy app-web exists and was not generated for Application shop/web") {
		t.Fatalf("Placed condition %+v", cond)
	}
	kept := &policyv1alpha1.PropagationPolicy{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(theirs), kept); err != nil || kept.Spec.ResourceSelectors[0].Kind != "ConfigMap" {
		t.Fatalf("the user's policy was changed: %+v, %v", kept.Spec, err)
	}
}
