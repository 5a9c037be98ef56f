package customization

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/luavm"
)

var gizmo = schema.GroupVersionKind{Group: "example.flotilla.dev", Version: "v1", Kind: "Gizmo"}

func healthSpec(script string) configv1alpha1.ResourceInterpreterCustomizationSpec {
	return configv1alpha1.ResourceInterpreterCustomizationSpec{
		Target:         configv1alpha1.CustomizationTarget{APIVersion: gizmo.GroupVersion().String(), Kind: gizmo.Kind},
		Customizations: configv1alpha1.CustomizationRules{HealthInterpretation: &configv1alpha1.LuaScript{LuaScript: script}},
	}
}

const (
	degradedScript = "function InterpretHealth(obj)\n  return 'Degraded'\nend"
	brokenScript   = "function InterpretHealth(obj)\n  return true\nend end"
)

// gizmoHealth is what the registry in force says of any Gizmo.
func gizmoHealth(t *testing.T, reg *interpret.Registry) (workv1alpha1.Health, error) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gizmo)
	obj.SetName("g1")
	return reg.For(gizmo).Health(obj)
}

// A customization whose current generation does not compile, with a recorded version in
// force: a restarted controller puts that version back instead of failing every Gizmo.
func TestLoadPutsTheRecordedVersionBackInForce(t *testing.T) {
	ric := &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "gizmo", Generation: 3}, Spec: healthSpec(brokenScript)}
	prev := healthSpec(degradedScript)
	ric.Status.ActiveGeneration, ric.Status.ActiveSpec = 2, &prev
	reg := interpret.NewRegistry(luavm.DefaultLimits())
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(ric).WithStatusSubresource(ric).Build()
	if err := Load(context.Background(), c, reg); err != nil {
		t.Fatal(err)
	}
	active, ok := reg.Active("gizmo")
	if !ok || active.IsBroken() || active.Generation != 2 {
		t.Fatalf("want generation 2 in force, got %+v (ok %v)", active, ok)
	}
	if h, err := gizmoHealth(t, reg); err != nil || h != workv1alpha1.HealthDegraded {
		t.Fatalf("the recorded script must interpret health: got %q, %v", h, err)
	}
}

// Without a recorded version there is nothing safe to fall back to: the kind's calls fail,
// rather than the built-in reading a CRD it does not understand.
func TestLoadWithoutARecordedVersionFailsTheKind(t *testing.T) {
	ric := &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "gizmo", Generation: 1}, Spec: healthSpec(brokenScript)}
	reg := interpret.NewRegistry(luavm.DefaultLimits())
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(ric).WithStatusSubresource(ric).Build()
	if err := Load(context.Background(), c, reg); err != nil {
		t.Fatal(err)
	}
	if active, ok := reg.Active("gizmo"); !ok || !active.IsBroken() {
		t.Fatalf("want a broken customization in force, got %+v (ok %v)", active, ok)
	}
	if _, err := gizmoHealth(t, reg); err == nil {
		t.Fatal("a Gizmo's health must fail while no version compiles")
	}
}

// Reconcile records the spec it puts in force; a fresh controller (a restart, a new leader)
// reconciling a broken edit restores that version and reports it Ready with the reason.
func TestReconcileRecordsTheVersionInForceForTheNextController(t *testing.T) {
	ctx := context.Background()
	ric := &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "gizmo", Generation: 1}, Spec: healthSpec(degradedScript)}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(ric).WithStatusSubresource(ric).Build()
	reconcile := func(reg *interpret.Registry) *configv1alpha1.ResourceInterpreterCustomization {
		t.Helper()
		r := &Controller{Client: c, Registry: reg, Recorder: events.NewFakeRecorder(10)}
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "gizmo"}}); err != nil {
			t.Fatal(err)
		}
		got := &configv1alpha1.ResourceInterpreterCustomization{}
		if err := c.Get(ctx, client.ObjectKey{Name: "gizmo"}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := reconcile(interpret.NewRegistry(luavm.DefaultLimits()))
	if got.Status.ActiveGeneration != 1 || got.Status.ActiveSpec == nil || got.Status.ActiveSpec.Customizations.HealthInterpretation.LuaScript != degradedScript {
		t.Fatalf("status must record generation 1's spec, got generation %d, spec %+v", got.Status.ActiveGeneration, got.Status.ActiveSpec)
	}

	// The broken edit, as the API server would store it: a new generation, status kept.
	got.Spec, got.Generation = healthSpec(brokenScript), 2
	if err := c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	restarted := interpret.NewRegistry(luavm.DefaultLimits())
	got = reconcile(restarted)
	ready := meta.FindStatusCondition(got.Status.Conditions, configv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != "PreviousGenerationInForce" {
		t.Fatalf("want Ready=True PreviousGenerationInForce, got %+v", ready)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, configv1alpha1.ConditionStalled) {
		t.Fatal("the broken generation must be Stalled")
	}
	if got.Status.ActiveGeneration != 1 || got.Status.ActiveSpec.Customizations.HealthInterpretation.LuaScript != degradedScript {
		t.Fatalf("the recorded version must stay generation 1's, got %d", got.Status.ActiveGeneration)
	}
	if h, err := gizmoHealth(t, restarted); err != nil || h != workv1alpha1.HealthDegraded {
		t.Fatalf("the restored script must interpret health: got %q, %v", h, err)
	}
}

// Two customizations of one kind: the loser still records what it would put in force, and it
// takes the kind over as soon as the winner is gone, even before the winner's own reconcile
// removed it from the registry.
func TestLoserRecordsItsVersionAndTakesOverWhenTheWinnerGoes(t *testing.T) {
	ctx := context.Background()
	winner := &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "a-gizmo", Generation: 1},
		Spec: healthSpec("function InterpretHealth(obj)\n  return 'Healthy'\nend")}
	loser := &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "b-gizmo", Generation: 4}, Spec: healthSpec(degradedScript)}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(winner, loser).WithStatusSubresource(winner, loser).Build()
	reg := interpret.NewRegistry(luavm.DefaultLimits())
	r := &Controller{Client: c, Registry: reg, Recorder: events.NewFakeRecorder(10)}
	reconcileAndGet := func(name string) *configv1alpha1.ResourceInterpreterCustomization {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatal(err)
		}
		got := &configv1alpha1.ResourceInterpreterCustomization{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	reconcileAndGet("a-gizmo")
	got := reconcileAndGet("b-gizmo")
	if ready := meta.FindStatusCondition(got.Status.Conditions, configv1alpha1.ConditionReady); ready == nil || ready.Reason != configv1alpha1.ReasonConflict {
		t.Fatalf("b-gizmo must lose the kind, got %+v", ready)
	}
	if got.Status.ActiveGeneration != 4 || got.Status.ActiveSpec == nil {
		t.Fatalf("the loser must record generation 4, got %d (spec %v)", got.Status.ActiveGeneration, got.Status.ActiveSpec)
	}
	if h, _ := gizmoHealth(t, reg); h != workv1alpha1.HealthHealthy {
		t.Fatalf("the winner interprets the kind while it exists, got %q", h)
	}

	if err := c.Delete(ctx, winner); err != nil {
		t.Fatal(err)
	}
	got = reconcileAndGet("b-gizmo")
	if ready := meta.FindStatusCondition(got.Status.Conditions, configv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Fatalf("b-gizmo must win the kind once a-gizmo is gone, got %+v", ready)
	}
	if h, _ := gizmoHealth(t, reg); h != workv1alpha1.HealthDegraded {
		t.Fatalf("b-gizmo's script must interpret the kind now, got %q", h)
	}
}

// The recorded copy doubles the object: scripts too large for that are not recorded, and the
// condition says what that means.
func TestOversizedScriptsAreNotRecorded(t *testing.T) {
	big := "function InterpretHealth(obj)\n  return 'Healthy'\nend\n-- " + strings.Repeat("x", maxRecordedSpecBytes) + "\n"
	ric := &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "gizmo", Generation: 1}, Spec: healthSpec(big)}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(ric).WithStatusSubresource(ric).Build()
	r := &Controller{Client: c, Registry: interpret.NewRegistry(luavm.DefaultLimits()), Recorder: events.NewFakeRecorder(10)}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "gizmo"}}); err != nil {
		t.Fatal(err)
	}
	got := &configv1alpha1.ResourceInterpreterCustomization{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "gizmo"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ActiveSpec != nil {
		t.Fatal("an oversized spec must not be copied into status")
	}
	if ready := meta.FindStatusCondition(got.Status.Conditions, configv1alpha1.ConditionReady); ready == nil || !strings.Contains(ready.Message, "too large to record") {
		t.Fatalf("the Ready message must say the version is not recorded, got %+v", ready)
	}
}
