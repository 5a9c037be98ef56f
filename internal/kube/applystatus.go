package kube

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ApplyStatus writes the given status fields of obj by server-side apply with the field
// manager of the controller that owns them. Only the fields in status are claimed: another
// controller's conditions (list entries keyed by type) and fields stay as the API server holds
// them, so a controller working from a stale cached copy can never write back an old value
// of a field it does not own; a field this manager owned and now leaves out is removed.
// status is a typed status struct (its omitempty fields left out when empty) or a map.
//
// New code applies the typed apply configurations of api/applyconfiguration with
// client.Client.Status().Apply, the field manager and client.ForceOwnership instead (as the
// application and targeting controllers do); this untyped form stays until the binding
// controllers switch.
func ApplyStatus(ctx context.Context, c client.Client, obj client.Object, gvk schema.GroupVersionKind, status any, manager string) error {
	var st map[string]any
	switch s := status.(type) {
	case map[string]any:
		st = s
	default:
		var err error
		if st, err = runtime.DefaultUnstructuredConverter.ToUnstructured(status); err != nil {
			return fmt.Errorf("status of %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": st}}
	u.SetGroupVersionKind(gvk)
	u.SetName(obj.GetName())
	u.SetNamespace(obj.GetNamespace())
	//nolint:staticcheck // the apply patch type is what a status subresource apply needs here
	return c.Status().Patch(ctx, u, client.Apply, client.FieldOwner(manager), client.ForceOwnership)
}

// Conditions returns the apply configurations of conds, each field set as metav1.Condition
// serializes it: observedGeneration left out when zero (it is omitempty), every other field
// always present. A status built with meta.SetStatusCondition thus claims, when applied, the
// same fields it would have claimed as a typed struct.
func Conditions(conds []metav1.Condition) []*metav1ac.ConditionApplyConfiguration {
	out := make([]*metav1ac.ConditionApplyConfiguration, 0, len(conds))
	for _, c := range conds {
		ac := metav1ac.Condition().
			WithType(c.Type).
			WithStatus(c.Status).
			WithLastTransitionTime(c.LastTransitionTime).
			WithReason(c.Reason).
			WithMessage(c.Message)
		if c.ObservedGeneration != 0 {
			ac.WithObservedGeneration(c.ObservedGeneration)
		}
		out = append(out, ac)
	}
	return out
}
