package execute

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

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
