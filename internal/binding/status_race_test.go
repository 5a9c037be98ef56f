package binding

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/testenv"
)

// The binding controller applies only the status fields it owns, under its own field manager:
// a condition another manager writes (the scheduler did, before its outcome moved into the
// request that writes the clusters) is never written back from the controller's stale copy,
// and the other writer's stale copy leaves the controller's fields alone. With whole-list
// merge patches of status.conditions, the second writer's stale copy reverted the first's.
func TestStaleStatusCannotRevertTheOtherWritersCondition(t *testing.T) {
	ctx := context.Background()
	c, b := shopBinding(t)
	read := func() *workv1alpha1.ResourceBinding {
		t.Helper()
		got := &workv1alpha1.ResourceBinding{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	cond := func(t, s, reason string) metav1.Condition {
		return metav1.Condition{Type: t, Status: metav1.ConditionStatus(s), Reason: reason, Message: reason, LastTransitionTime: metav1.Now()}
	}
	scheduled := cond(otherCondition, "True", "Other")
	if err := applyAsOther(ctx, c, read(), scheduled); err != nil {
		t.Fatal(err)
	}
	applied := &workv1alpha1.ResourceBindingStatus{Health: workv1alpha1.HealthHealthy,
		Conditions: []metav1.Condition{cond(workv1alpha1.ConditionApplied, "True", "Applied")}}
	if err := writeStatus(ctx, c, read(), applied); err != nil {
		t.Fatal(err)
	}

	// The binding controller's copy goes stale; the scheduler then finds no cluster.
	staleForBinding := read()
	if err := applyAsOther(ctx, c, read(), cond(otherCondition, "False", "OtherFailed")); err != nil {
		t.Fatal(err)
	}
	status := staleForBinding.Status.DeepCopy() // still holds the other condition True
	meta.SetStatusCondition(&status.Conditions, cond(workv1alpha1.ConditionApplied, "False", "ApplyFailed"))
	if err := writeStatus(ctx, c, staleForBinding, status); err != nil {
		t.Fatal(err)
	}
	got := read()
	if s := meta.FindStatusCondition(got.Status.Conditions, otherCondition); s == nil || s.Reason != "OtherFailed" {
		t.Errorf("the binding controller's stale copy wrote back the other condition: %+v", s)
	}
	if a := meta.FindStatusCondition(got.Status.Conditions, workv1alpha1.ConditionApplied); a == nil || a.Reason != "ApplyFailed" {
		t.Errorf("Applied = %+v, want ApplyFailed", a)
	}

	// And the other way round: the scheduler's stale copy leaves the binding controller's
	// Applied and health alone.
	staleForScheduler := read()
	status = read().Status.DeepCopy()
	meta.SetStatusCondition(&status.Conditions, cond(workv1alpha1.ConditionApplied, "True", "Applied"))
	status.Health = workv1alpha1.HealthProgressing
	if err := writeStatus(ctx, c, read(), status); err != nil {
		t.Fatal(err)
	}
	if err := applyAsOther(ctx, c, staleForScheduler, scheduled); err != nil {
		t.Fatal(err)
	}
	got = read()
	if a := meta.FindStatusCondition(got.Status.Conditions, workv1alpha1.ConditionApplied); a == nil || a.Reason != "Applied" || got.Status.Health != workv1alpha1.HealthProgressing {
		t.Errorf("the scheduler's stale copy wrote back the binding controller's fields: Applied %+v, health %s", a, got.Status.Health)
	}
	if s := meta.FindStatusCondition(got.Status.Conditions, otherCondition); s == nil || s.Reason != "Other" {
		t.Errorf("other condition = %+v, want Other", s)
	}
	// A condition the binding controller drops is gone; the scheduler's stays.
	status = read().Status.DeepCopy()
	meta.RemoveStatusCondition(&status.Conditions, workv1alpha1.ConditionApplied)
	if err := writeStatus(ctx, c, read(), status); err != nil {
		t.Fatal(err)
	}
	got = read()
	if meta.FindStatusCondition(got.Status.Conditions, workv1alpha1.ConditionApplied) != nil || meta.FindStatusCondition(got.Status.Conditions, otherCondition) == nil {
		t.Errorf("after dropping Applied: %+v", got.Status.Conditions)
	}
}

// otherCondition is a condition of binding status the binding controller does not own.
const otherCondition = "ExampleOther"

// applyAsOther applies one condition of binding status under a field manager of its own.
func applyAsOther(ctx context.Context, c client.Client, b *workv1alpha1.ResourceBinding, cond metav1.Condition) error {
	conds := slices.Clone(b.Status.Conditions)
	meta.SetStatusCondition(&conds, cond)
	own := meta.FindStatusCondition(conds, cond.Type)
	ac, err := statusApply(b, &workv1alpha1.ResourceBindingStatus{Conditions: []metav1.Condition{*own}})
	if err != nil {
		return err
	}
	return c.Status().Apply(ctx, ac, client.FieldOwner("another-writer"), client.ForceOwnership)
}

// shopBinding starts a real API server with shop/web's binding in it, as the detector creates
// it, for tests of how its status is written.
func shopBinding(t *testing.T) (client.Client, *workv1alpha1.ResourceBinding) {
	t.Helper()
	ctx := context.Background()
	_, c := testenv.Start(t)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
		t.Fatal(err)
	}
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment"},
		Spec: workv1alpha1.ResourceBindingSpec{
			Resource:  workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
			PolicyRef: workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "web"},
		}}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	return c, b
}
