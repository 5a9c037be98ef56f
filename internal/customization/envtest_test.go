package customization

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/luavm"
	"github.com/flotilla-dev/flotilla/internal/testenv"
)

// The customization controller against a real API server: the CRD's CEL rule refuses a
// customization that customizes nothing, naming the operations; a health script goes into
// force with Ready=True; a later edit that does not compile is Stalled, naming the Lua line,
// while the version that compiled stays in force; deleting it hands the kind back to the
// built-in interpreter.
func TestCustomizationOnARealAPIServer(t *testing.T) {
	ctx := context.Background()
	cfg, c := testenv.Start(t)
	reg := interpret.NewRegistry(luavm.DefaultLimits())
	testenv.Manager(t, cfg, func(mgr ctrl.Manager) error {
		return (&Controller{Client: mgr.GetClient(), Registry: reg, Recorder: mgr.GetEventRecorder("customization")}).SetupWithManager(mgr)
	})

	empty := &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "nothing"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{Target: configv1alpha1.CustomizationTarget{APIVersion: gizmo.GroupVersion().String(), Kind: gizmo.Kind}}}
	err := c.Create(ctx, empty)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "customizations must set at least one of") {
		t.Fatalf("a customization of nothing: %v, want the CEL rule's refusal", err)
	}

	ric := &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "gizmo"}, Spec: healthSpec(degradedScript)}
	if err := c.Create(ctx, ric); err != nil {
		t.Fatal(err)
	}
	condition := func(typ string) *metav1.Condition {
		got := &configv1alpha1.ResourceInterpreterCustomization{}
		if c.Get(ctx, client.ObjectKey{Name: "gizmo"}, got) != nil {
			return nil
		}
		return meta.FindStatusCondition(got.Status.Conditions, typ)
	}
	waitFor(t, "Ready=True and the script in force", func() bool {
		r := condition(configv1alpha1.ConditionReady)
		h, err := gizmoHealth(t, reg)
		return r != nil && r.Status == metav1.ConditionTrue && err == nil && h == workv1alpha1.HealthDegraded
	})

	cur := &configv1alpha1.ResourceInterpreterCustomization{}
	if err := c.Get(ctx, client.ObjectKey{Name: "gizmo"}, cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec = healthSpec(brokenScript)
	if err := c.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broken edit Stalled, naming the operation and line", func() bool {
		s := condition(configv1alpha1.ConditionStalled)
		return s != nil && s.Status == metav1.ConditionTrue && strings.Contains(s.Message, configv1alpha1.OperationInterpretHealth) && strings.Contains(s.Message, "line")
	})
	if h, err := gizmoHealth(t, reg); err != nil || h != workv1alpha1.HealthDegraded {
		t.Fatalf("the version that compiled must stay in force: %q, %v", h, err)
	}

	if err := c.Delete(ctx, cur); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the built-in interpreter back", func() bool {
		h, _ := gizmoHealth(t, reg)
		return h != workv1alpha1.HealthDegraded
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
