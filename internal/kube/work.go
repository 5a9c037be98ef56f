package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// ExecutionNamespacePrefix starts the namespaces of the control plane that hold Works.
const ExecutionNamespacePrefix = "flotilla-es-"

// GetWork reads a binding's Work in one cluster: by its name, else by its labels (a Work
// written under the names of an earlier version keeps its name).
func GetWork(ctx context.Context, c client.Reader, bindingNamespace, binding, cluster string, w *workv1alpha1.Work, opts ...client.GetOption) error {
	ns := ExecutionNamespacePrefix + cluster
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: workv1alpha1.WorkName(bindingNamespace, binding)}, w, opts...)
	if !apierrors.IsNotFound(err) {
		return err
	}
	list := &workv1alpha1.WorkList{}
	if lerr := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{
		workv1alpha1.BindingNamespaceLabel: bindingNamespace, workv1alpha1.BindingNameLabel: binding}); lerr != nil || len(list.Items) == 0 {
		return err
	}
	list.Items[0].DeepCopyInto(w)
	return nil
}

// RenderedTemplate is the template as a Work renders it for its cluster (the last manifest:
// the revision the cluster runs, the cluster's overrides applied), nil when it has none.
func RenderedTemplate(w *workv1alpha1.Work) *unstructured.Unstructured {
	if len(w.Spec.Manifests) == 0 {
		return nil
	}
	u := &unstructured.Unstructured{}
	if u.UnmarshalJSON(w.Spec.Manifests[len(w.Spec.Manifests)-1].Raw) != nil {
		return nil
	}
	return u
}

// AppliedThisSpec says whether the member runs the Work's spec as it is now: the executor
// applied these very manifests and said so for this generation.
func AppliedThisSpec(w *workv1alpha1.Work) bool {
	c := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.ConditionApplied)
	return c != nil && c.Status == "True" && c.ObservedGeneration == w.Generation && w.Status.AppliedHash == ManifestsHash(w)
}

// ManifestsHash is what a Work's status.appliedHash says once the member runs its manifests.
func ManifestsHash(w *workv1alpha1.Work) string {
	h := sha256.New()
	for _, m := range w.Spec.Manifests {
		h.Write(m.Raw)
	}
	h.Write([]byte(w.Spec.ConflictResolution))
	return hex.EncodeToString(h.Sum(nil))
}

// ManifestHash is what a member object's ManifestHashAnnotation says once it was applied from
// the manifest raw.
func ManifestHash(raw []byte) string {
	h := sha256.Sum256(raw)
	return hex.EncodeToString(h[:])
}
