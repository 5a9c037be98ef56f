package inventory

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/targetplan"
)

// whatIfTargets answers for a proposed TargetPolicy or ClusterTargetPolicy: every Application
// in scope that the stored or the proposed policy selects is planned as the targeting
// controller would plan it with the proposal, and its templates' bindings are scheduled with
// the policy it would generate. An application left without placement (no target policy, a
// conflict, no cluster) is one Change per template saying why.
func (s *Server) whatIfTargets(ctx context.Context, out *WhatIf, proposed client.Object, scope []string, bindings []workv1alpha1.ResourceBinding, clusters []clusterv1alpha1.Cluster) error {
	stored := proposed.DeepCopyObject().(client.Object)
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(proposed), stored); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading the stored %s: %w", kindName(proposed), err)
		}
		stored = nil
	}
	var apps appsv1alpha1.ApplicationList
	if err := s.Client.List(ctx, &apps, client.InNamespace(proposed.GetNamespace())); err != nil {
		return fmt.Errorf("listing applications: %w", err)
	}
	for i := range apps.Items {
		app := &apps.Items[i]
		if !inScope(scope, app.Namespace) || !app.DeletionTimestamp.IsZero() {
			continue
		}
		if !targetplan.Selects(proposed, app) && (stored == nil || !targetplan.Selects(stored, app)) {
			continue
		}
		plan, err := targetplan.PlanFor(ctx, s.Client, app, proposed)
		if err != nil {
			return fmt.Errorf("planning Application %s/%s: %w", app.Namespace, app.Name, err)
		}
		var own []*workv1alpha1.ResourceBinding
		for j := range bindings {
			if b := &bindings[j]; b.DeletionTimestamp.IsZero() && ofApplication(b, app) {
				own = append(own, b)
			}
		}
		if plan.Placed() {
			for _, b := range own {
				s.preview(ctx, out, b, &plan.Spec, clusters)
			}
			continue
		}
		if plan.Keep && plan.Reason != appsv1alpha1.ReasonTargetConflict {
			continue // no templates yet: nothing to place either way
		}
		msg := fmt.Sprintf("Application %s/%s: %s", app.Namespace, app.Name, plan.Message)
		if len(own) == 0 {
			out.Changes = append(out.Changes, Change{Namespace: app.Namespace, Kind: "Application", Name: app.Name,
				Before: []workv1alpha1.TargetCluster{}, Error: msg})
			continue
		}
		for _, b := range own {
			ch := diff(b, nil)
			ch.After = nil
			ch.Error = msg
			out.Changes = append(out.Changes, ch)
		}
	}
	return nil
}

// ofApplication reports whether a binding places one of the Application's templates: it
// refers to a policy generated for the application, or its template is one the application
// produced (each carries the application label).
func ofApplication(b *workv1alpha1.ResourceBinding, app *appsv1alpha1.Application) bool {
	if b.Namespace != app.Namespace {
		return false
	}
	ref := b.Spec.PolicyRef
	if (ref.Kind == "PropagationPolicy" && ref.Namespace == app.Namespace && ref.Name == targetplan.GeneratedName(app, false)) ||
		(ref.Kind == "ClusterPropagationPolicy" && ref.Name == targetplan.GeneratedName(app, true)) {
		return true
	}
	res := b.Spec.Resource
	return res.Namespace == app.Namespace && slices.ContainsFunc(app.Status.Objects, func(o appsv1alpha1.ApplicationObject) bool {
		return o.APIVersion == res.APIVersion && o.Kind == res.Kind && o.Name == res.Name
	})
}

func kindName(o client.Object) string {
	switch o.(type) {
	case *appsv1alpha1.TargetPolicy:
		return "TargetPolicy " + o.GetNamespace() + "/" + o.GetName()
	case *appsv1alpha1.ClusterTargetPolicy:
		return "ClusterTargetPolicy " + o.GetName()
	}
	return o.GetName()
}
