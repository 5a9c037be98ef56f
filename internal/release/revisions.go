package release

import (
	"context"
	"encoding/json"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/revision"
)

// PlatformStrategy reports whether a release's strategy was written by the platform, so its
// gates may run ClusterAnalysisTemplates with the platform's allowances. It reads what was
// recorded when the release was created, never the binding's policy now: a template relabelled
// into a platform policy mid-release must not lend the tenant's strategy the platform's trust.
func PlatformStrategy(rel *rolloutv1alpha1.Release) bool {
	if t, ok := rel.Labels[revision.StrategyTrustLabel]; ok {
		return t == revision.StrategyTrustPlatform
	}
	// Recorded before the trust label existed: the policy kind it was released by.
	return rel.Labels[revision.PolicyKindLabel] == "ClusterPropagationPolicy"
}

// snapshot is what a revision stores: the template without status and server metadata.
func snapshot(tmpl *unstructured.Unstructured) ([]byte, error) {
	c := tmpl.DeepCopy()
	delete(c.Object, "status")
	c.Object["metadata"] = map[string]any{"name": tmpl.GetName(), "namespace": tmpl.GetNamespace(),
		"labels": tmpl.GetLabels(), "annotations": workv1alpha1.WithoutSwitches(tmpl.GetAnnotations())}
	return json.Marshal(c.Object)
}

// recordRevision writes revision rev of the template, owned by the binding.
func recordRevision(ctx context.Context, c client.Client, b workv1alpha1.Binding, tmpl *unstructured.Unstructured, rev int64, hash string) error {
	data, err := snapshot(tmpl)
	if err != nil {
		return err
	}
	gvk := b.GetObjectKind().GroupVersionKind()
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: revision.Name(b, rev), Namespace: revision.Namespace(b),
			Labels:      map[string]string{revision.BindingLabel: revision.BindingHash(b)},
			Annotations: map[string]string{revision.RevisionHashAnnotation: hash},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: rev,
	}
	if b.GetNamespace() != "" { // owners must share the namespace; cluster-scoped ones: revision.DeleteHistory when the binding goes
		cr.OwnerReferences = []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: b.GetName(), UID: b.GetUID()}}
	}
	return c.Create(ctx, cr)
}

// pruneRevisions keeps the newest limit revisions and every revision still pinned or stable.
func pruneRevisions(ctx context.Context, c client.Client, b workv1alpha1.Binding, limit int, keep map[int64]bool) error {
	list := &appsv1.ControllerRevisionList{}
	if err := c.List(ctx, list, client.InNamespace(revision.Namespace(b)), client.MatchingLabels{revision.BindingLabel: revision.BindingHash(b)}); err != nil {
		return err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Revision > list.Items[j].Revision })
	oldestKept := int64(0)
	for i := range list.Items {
		cr := &list.Items[i]
		if i < limit || keep[cr.Revision] {
			oldestKept = cr.Revision
			continue
		}
		if err := c.Delete(ctx, cr); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	// Finished releases of revisions no longer kept go too, with their analysis runs.
	rels := &rolloutv1alpha1.ReleaseList{}
	if err := c.List(ctx, rels, client.InNamespace(revision.Namespace(b)), client.MatchingLabels{revision.BindingLabel: revision.BindingHash(b)}); err != nil {
		return err
	}
	for i := range rels.Items {
		rel := &rels.Items[i]
		if rel.Spec.Revision < oldestKept && Final(rel.Status.Phase) && !keep[rel.Spec.Revision] {
			if err := c.Delete(ctx, rel, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}
