package release

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// foreignTarget is why a Release may not move its binding's pins: a Release lives where its
// binding's revisions live (the template's namespace, or flotilla-system for cluster-scoped
// templates), so one in a tenant's namespace moves only that namespace's ResourceBindings.
// b is the binding once read, nil before. Empty when the target is the Release's own.
func foreignTarget(rel *rolloutv1alpha1.Release, b workv1alpha1.Binding) string {
	ref, res := rel.Spec.Binding, rel.Spec.Resource
	name := "Release " + rel.Namespace + "/" + rel.Name
	if ref.Kind == "ClusterResourceBinding" {
		switch {
		case rel.Namespace != kube.SystemNamespace:
			return fmt.Sprintf("%s: spec.binding names ClusterResourceBinding %s; a Release in namespace %s moves only ResourceBindings of %s (releases of cluster-scoped templates live in %s and are Flotilla's), so no pin moves",
				name, ref.Name, rel.Namespace, rel.Namespace, kube.SystemNamespace)
		case res.Namespace != "":
			return fmt.Sprintf("%s: spec.resource.namespace is %q but spec.binding is a ClusterResourceBinding, which places cluster-scoped templates only, so no pin moves",
				name, res.Namespace)
		}
	} else if res.Namespace != rel.Namespace {
		return fmt.Sprintf("%s: spec.resource.namespace is %q; a Release moves templates of its own namespace %q only, so no pin moves",
			name, res.Namespace, rel.Namespace)
	}
	if b != nil && b.GetNamespace() != "" && b.BindingSpec().Resource.Namespace != b.GetNamespace() {
		return fmt.Sprintf("%s: spec.binding names ResourceBinding %s, whose template is in namespace %q; a Release moves templates of its own namespace %q only, so no pin moves",
			name, b.GetName(), b.BindingSpec().Resource.Namespace, rel.Namespace)
	}
	return ""
}

// refuseForeign reports a Release whose target is not its own (Valid=False and the message,
// with an event when new) and moves nothing; its next change brings it back.
func (c *Controller) refuseForeign(ctx context.Context, rel *rolloutv1alpha1.Release, msg string) error {
	status := rel.Status.DeepCopy()
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: ConditionValid, Status: metav1.ConditionFalse, Reason: "ForeignTarget",
		Message: msg, ObservedGeneration: rel.Generation})
	status.Message = "refused: " + msg
	Summarize(status, rel.Generation)
	if apiequality.Semantic.DeepEqual(status, &rel.Status) {
		return nil
	}
	patch := client.MergeFromWithOptions(rel.DeepCopy(), client.MergeFromWithOptimisticLock{})
	rel.Status = *status
	if err := c.Client.Status().Patch(ctx, rel, patch); err != nil {
		return err
	}
	if c.Recorder != nil {
		c.Recorder.Eventf(rel, nil, corev1.EventTypeWarning, "ReleaseRefused", "Release", "%s", msg)
	}
	return nil
}
