package application

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// A deny window over region=west holds a new commit of an Application targeted there, keeps
// re-applying the commit in force, and lets the override annotation through.
func TestAChangeWindowHoldsANewCommitNotTheOneInForce(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 12, 30, 0, 0, time.UTC)
	freeze := &rolloutv1alpha1.ClusterChangeWindow{ObjectMeta: metav1.ObjectMeta{Name: "sale"}, Spec: rolloutv1alpha1.ChangeWindowSpec{
		Kind: rolloutv1alpha1.WindowDeny, Schedule: "0 12 * * *", Duration: "2h",
		ClusterSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "west"}}}}
	west := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "west-1", Labels: map[string]string{"region": "west"}}}
	east := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "east-1", Labels: map[string]string{"region": "east"}}}
	c := &Controller{Client: fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(freeze, west, east).Build(), Recorder: events.NewFakeRecorder(10)}
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Generation: 1},
		Status: appsv1alpha1.ApplicationStatus{ObservedGeneration: 1, Commit: "aaaaaaa1111", Clusters: []string{"east-1", "west-1"},
			Conditions: []metav1.Condition{{Type: appsv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Applied"}}}}

	st := statusOf(app)
	held, res, err := c.heldByWindow(ctx, app, st, "bbbbbbb2222", now)
	if err != nil || !held || res.RequeueAfter != 90*time.Minute+time.Second {
		t.Fatalf("held=%v requeue=%s err=%v: want held until 14:00", held, res.RequeueAfter, err)
	}
	cond := meta.FindStatusCondition(st.s.Conditions, appsv1alpha1.ConditionReconciling)
	if cond == nil || cond.Reason != appsv1alpha1.ReasonHeldByWindow ||
		!strings.HasPrefix(cond.Message, "commit bbbbbbb2222 waits: held by change window sale until 2026-11-27 14:00:00 UTC; aaaaaaa1111 stays in force") {
		t.Errorf("Reconciling %+v", cond)
	}
	if held, _, _ := c.heldByWindow(ctx, app, statusOf(app), "aaaaaaa1111", now); held {
		t.Error("the commit in force is held: a window must not stop restores")
	}
	if held, _, _ := c.heldByWindow(ctx, app, statusOf(app), "bbbbbbb2222", now.Add(2*time.Hour)); held {
		t.Error("held after the window closed")
	}
	eastOnly := app.DeepCopy()
	eastOnly.Status.Clusters = []string{"east-1"}
	if held, _, _ := c.heldByWindow(ctx, eastOnly, statusOf(eastOnly), "bbbbbbb2222", now); held {
		t.Error("an Application only in east is held by a window over west")
	}
	overridden := app.DeepCopy()
	overridden.Annotations = map[string]string{rolloutv1alpha1.OverrideWindowAnnotation: "CVE-2026-1234"}
	if held, _, _ := c.heldByWindow(ctx, overridden, statusOf(overridden), "bbbbbbb2222", now); held {
		t.Error("the override annotation did not pass an overridable window")
	}
}
