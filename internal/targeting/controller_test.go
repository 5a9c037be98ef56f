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
func targetPolicy(ns, name string, spec appsv1alpha1.TargetSpec) *appsv1alpha1.TargetPolicy {
	return &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func tier(t policyv1alpha1.LabelValue) policyv1alpha1.LabelSelector {
	return policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"tier": t}}
}

func regionIn(regions ...string) policyv1alpha1.LabelSelector {
	return policyv1alpha1.LabelSelector{MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "region", Operator: "In", Values: regions}}}
}
