package customization

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// Controller compiles customizations and keeps the registry in step with them.
type Controller struct {
	Client   client.Client
	Registry *interpret.Registry
	Recorder events.EventRecorder
}

// SetupWithManager registers the controller.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("customization").
		For(&configv1alpha1.ResourceInterpreterCustomization{}).
		// When one customization of a kind changes or goes, the others of that kind may win
		// or lose it: their conditions are recomputed.
		Watches(&configv1alpha1.ResourceInterpreterCustomization{}, handler.EnqueueRequestsFromMapFunc(c.sameTarget)).
		Complete(kube.RequeueConflicts(c))
}

func (c *Controller) sameTarget(ctx context.Context, obj client.Object) []reconcile.Request {
	changed, ok := obj.(*configv1alpha1.ResourceInterpreterCustomization)
	if !ok {
		return nil
	}
	list := &configv1alpha1.ResourceInterpreterCustomizationList{}
	if err := c.Client.List(ctx, list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, ric := range list.Items {
		if ric.Name != changed.Name && ric.Spec.Target == changed.Spec.Target {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ric)})
		}
	}
	return out
}

// Load compiles and puts in force every customization that compiles, before the controllers
// start: a workload of a customized kind must never be interpreted by the built-in fallback
// just because the customization controller has not run yet. A control plane without the
// CRD has no customizations.
func Load(ctx context.Context, r client.Reader, reg *interpret.Registry) error {
	list := &configv1alpha1.ResourceInterpreterCustomizationList{}
	if err := r.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("listing resource interpreter customizations: %w", err)
	}
	for i := range list.Items {
		ric := &list.Items[i]
		compiled, err := reg.Compile(ric)
		if err != nil {
			compiled = compileLastGood(reg, ric)
		}
		if compiled == nil {
			gv, perr := schema.ParseGroupVersion(ric.Spec.Target.APIVersion)
			if perr != nil {
				continue
			}
			compiled = interpret.Broken(ric.Name, ric.Generation, gv.WithKind(ric.Spec.Target.Kind), errors.New(Describe(err)))
		}
		reg.Put(compiled)
	}
	return nil
}

// maxRecordedSpecBytes keeps the object with its recorded copy well under etcd's 1.5 MiB.
const maxRecordedSpecBytes = 512 * 1024

// recordable is a copy of the spec for status.activeSpec, or nil when it is too large.
func recordable(spec *configv1alpha1.ResourceInterpreterCustomizationSpec) *configv1alpha1.ResourceInterpreterCustomizationSpec {
	size := 0
	for _, op := range interpret.Operations {
		if src := op.Script(&spec.Customizations); src != nil {
			size += len(src.LuaScript)
		}
	}
	if size > maxRecordedSpecBytes {
		return nil
	}
	return spec.DeepCopy()
}

// compileLastGood compiles the version status.activeSpec recorded as in force, or returns nil
// when there is none or it does not compile (the pool's limits may have changed).
func compileLastGood(reg *interpret.Registry, ric *configv1alpha1.ResourceInterpreterCustomization) *interpret.Customization {
	if ric.Status.ActiveSpec == nil || ric.Status.ActiveGeneration == 0 {
		return nil
	}
	prev := ric.DeepCopy()
	prev.Generation, prev.Spec = ric.Status.ActiveGeneration, *ric.Status.ActiveSpec.DeepCopy()
	compiled, err := reg.Compile(prev)
	if err != nil {
		return nil
	}
	return compiled
}

// Customizations are compiled into interpreters and report whether they loaded.
// +kubebuilder:rbac:groups=config.flotilla.dev,resources=resourceinterpretercustomizations,verbs=get;list;watch
// +kubebuilder:rbac:groups=config.flotilla.dev,resources=resourceinterpretercustomizations/status,verbs=get;update;patch

// Reconcile compiles one customization. A version that does not compile is Stalled and the
// last version that compiled stays in force, as if admission had refused the edit; status
// records that version's spec, so it stays in force across restarts too.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ric := &configv1alpha1.ResourceInterpreterCustomization{}
	if err := c.Client.Get(ctx, req.NamespacedName, ric); err != nil {
		if apierrors.IsNotFound(err) {
			c.Registry.Remove(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !ric.DeletionTimestamp.IsZero() {
		c.Registry.Remove(ric.Name)
		return ctrl.Result{}, nil
	}
	status := ric.Status.DeepCopy()
	status.ObservedGeneration = ric.Generation
	compiled, err := c.Registry.Compile(ric)
	if err != nil {
		msg := Describe(err)
		active, inForce := c.Registry.Active(ric.Name)
		inForce = inForce && active.Generation != ric.Generation && !active.IsBroken()
		if !inForce { // a restarted controller: the version in force is recorded in status
			if prev := compileLastGood(c.Registry, ric); prev != nil {
				c.Registry.Put(prev)
				active, inForce = prev, true
			}
		}
		ready := metav1.Condition{Type: configv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: configv1alpha1.ReasonCompileFailed,
			Message: "no version of this customization compiles; objects of the kind fail interpretation until it is fixed"}
		if !inForce {
			if gv, perr := schema.ParseGroupVersion(ric.Spec.Target.APIVersion); perr == nil {
				c.Registry.Put(interpret.Broken(ric.Name, ric.Generation, gv.WithKind(ric.Spec.Target.Kind), errors.New(msg)))
			}
		}
		if inForce {
			ready.Status, ready.Reason = metav1.ConditionTrue, "PreviousGenerationInForce"
			ready.Message = fmt.Sprintf("generation %d stays in force; generation %d does not compile", active.Generation, ric.Generation)
		}
		setConditions(status, ric.Generation, ready, metav1.Condition{Type: configv1alpha1.ConditionStalled, Status: metav1.ConditionTrue,
			Reason: configv1alpha1.ReasonCompileFailed, Message: msg})
		if stalled := meta.FindStatusCondition(ric.Status.Conditions, configv1alpha1.ConditionStalled); stalled == nil || stalled.Message != msg {
			c.Recorder.Eventf(ric, nil, corev1.EventTypeWarning, configv1alpha1.ReasonCompileFailed, "Compile", "%s", msg)
		}
		return ctrl.Result{}, c.patchStatus(ctx, ric, status)
	}
	stalled := metav1.Condition{Type: configv1alpha1.ConditionStalled, Status: metav1.ConditionFalse, Reason: configv1alpha1.ReasonCompiled, Message: "every script compiled"}
	ready := metav1.Condition{Type: configv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: configv1alpha1.ReasonCompiled,
		Message: fmt.Sprintf("in force for %s %s", ric.Spec.Target.APIVersion, ric.Spec.Target.Kind)}
	winner := c.Registry.Put(compiled)
	if winner != "" && c.gone(ctx, winner) { // its own reconcile has not removed it yet
		c.Registry.Remove(winner)
		winner = c.Registry.Put(compiled)
	}
	if winner != "" {
		ready.Status, ready.Reason = metav1.ConditionFalse, configv1alpha1.ReasonConflict
		ready.Message = fmt.Sprintf("customization %s also targets %s %s and wins (names sort first); delete one of them", winner, ric.Spec.Target.APIVersion, ric.Spec.Target.Kind)
		stalled.Status, stalled.Reason, stalled.Message = metav1.ConditionTrue, configv1alpha1.ReasonConflict, ready.Message
	}
	// Recorded win or lose: a loser takes over its kind when the winner goes, and a restarted
	// controller must then restore this version, not an older one.
	status.ActiveGeneration, status.ActiveSpec = ric.Generation, recordable(&ric.Spec)
	if status.ActiveSpec == nil {
		ready.Message += fmt.Sprintf("; the scripts are over %d KiB, too large to record in status, so after a restart a broken edit fails the kind instead of keeping this version", maxRecordedSpecBytes/1024)
	}
	setConditions(status, ric.Generation, ready, stalled)
	return ctrl.Result{}, c.patchStatus(ctx, ric, status)
}

// gone reports a customization deleted or being deleted.
func (c *Controller) gone(ctx context.Context, name string) bool {
	ric := &configv1alpha1.ResourceInterpreterCustomization{}
	err := c.Client.Get(ctx, client.ObjectKey{Name: name}, ric)
	return apierrors.IsNotFound(err) || (err == nil && !ric.DeletionTimestamp.IsZero())
}

// Describe words a compile error for a condition: operation, field and Lua line first.
func Describe(err error) string {
	var ce *interpret.CompileError
	if errors.As(err, &ce) {
		if line := ce.Line(); line > 0 {
			return fmt.Sprintf("%s script (spec.customizations.%s.luaScript) does not compile at Lua line %d: %v", ce.Operation, ce.Field, line, ce.Err)
		}
		return fmt.Sprintf("%s script (spec.customizations.%s.luaScript) does not compile: %v", ce.Operation, ce.Field, ce.Err)
	}
	return err.Error()
}

func setConditions(status *configv1alpha1.ResourceInterpreterCustomizationStatus, gen int64, conds ...metav1.Condition) {
	for _, c := range conds {
		c.ObservedGeneration = gen
		meta.SetStatusCondition(&status.Conditions, c)
	}
}

func (c *Controller) patchStatus(ctx context.Context, ric *configv1alpha1.ResourceInterpreterCustomization, status *configv1alpha1.ResourceInterpreterCustomizationStatus) error {
	patch := client.MergeFrom(ric.DeepCopy())
	ric.Status = *status
	return c.Client.Status().Patch(ctx, ric, patch)
}
