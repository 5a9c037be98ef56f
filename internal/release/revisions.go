package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// Labels and annotations of revision snapshots.
const (
	// BindingLabel holds a short hash of the binding's kind, namespace and name: binding names
	// can be longer than a label value.
	BindingLabel = "rollout.flotilla.dev/binding"
	// PolicyKindLabel on a Release is the kind of policy whose rollout it runs: the admission
	// policy lets only those who may update ClusterPropagationPolicies steer the platform's.
	PolicyKindLabel = "rollout.flotilla.dev/policy-kind"
	// StrategyTrustLabel on a Release says whose limits its strategy's gates and steps run
	// with: StrategyTrustPlatform only when the platform wrote the rollout (a
	// ClusterPropagationPolicy not generated from a team's TargetPolicy), else
	// StrategyTrustNamespace. Recorded when the release is created, with the strategy.
	StrategyTrustLabel = "rollout.flotilla.dev/strategy-trust"
	// RevisionHashAnnotation is the workload hash a revision was recorded for.
	RevisionHashAnnotation = "rollout.flotilla.dev/revision-hash"
)

// Values of StrategyTrustLabel.
const (
	StrategyTrustPlatform  = "platform"
	StrategyTrustNamespace = "namespace"
)

// PlatformStrategy reports whether a release's strategy was written by the platform, so its
// gates may run ClusterAnalysisTemplates with the platform's allowances. It reads what was
// recorded when the release was created, never the binding's policy now: a template relabelled
// into a platform policy mid-release must not lend the tenant's strategy the platform's trust.
func PlatformStrategy(rel *rolloutv1alpha1.Release) bool {
	if t, ok := rel.Labels[StrategyTrustLabel]; ok {
		return t == StrategyTrustPlatform
	}
	// Recorded before the trust label existed: the policy kind it was released by.
	return rel.Labels[PolicyKindLabel] == "ClusterPropagationPolicy"
}

// RevisionName is the ControllerRevision holding a binding's revision rev.
func RevisionName(b workv1alpha1.Binding, rev int64) string {
	suffix := "-r" + strconv.FormatInt(rev, 10)
	name := b.GetName()
	if len(name)+len(suffix) > 253 {
		name = name[:253-len(suffix)]
	}
	return name + suffix
}

// Namespace is where a binding's revisions and releases live: the template's namespace, or
// flotilla's own for cluster-scoped templates.
func Namespace(b workv1alpha1.Binding) string {
	if b.GetNamespace() == "" {
		return kube.SystemNamespace
	}
	return b.GetNamespace()
}

func bindingHash(b workv1alpha1.Binding) string {
	sum := sha256.Sum256([]byte(b.GetObjectKind().GroupVersionKind().Kind + "/" + b.GetNamespace() + "/" + b.GetName()))
	return hex.EncodeToString(sum[:])[:40]
}

// WorkloadHash hashes what a release is about: the template without metadata, status and
// replicas. A change of replicas or labels alone is not a new revision.
func WorkloadHash(in interpret.Interpreter, tmpl *unstructured.Unstructured) string {
	c := tmpl.DeepCopy()
	delete(c.Object, "metadata")
	delete(c.Object, "status")
	if _, has, _ := in.GetReplicas(c); has {
		_ = in.ReviseReplica(c, 0)
	}
	data, _ := json.Marshal(c.Object)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:32]
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
			Name: RevisionName(b, rev), Namespace: Namespace(b),
			Labels:      map[string]string{BindingLabel: bindingHash(b)},
			Annotations: map[string]string{RevisionHashAnnotation: hash},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: rev,
	}
	if b.GetNamespace() != "" { // owners must share the namespace; cluster-scoped ones: DeleteHistory when the binding goes
		cr.OwnerReferences = []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: b.GetName(), UID: b.GetUID()}}
	}
	return c.Create(ctx, cr)
}

// LoadRevision returns the template as recorded in revision rev and its workload hash.
func LoadRevision(ctx context.Context, c client.Reader, b workv1alpha1.Binding, rev int64) (*unstructured.Unstructured, string, error) {
	cr, u, err := LoadRevisionObject(ctx, c, b, rev)
	if err != nil {
		return nil, "", err
	}
	return u, cr.Annotations[RevisionHashAnnotation], nil
}

// LoadRevisionObject reads a revision's ControllerRevision (for when it was recorded) and the
// template it holds.
func LoadRevisionObject(ctx context.Context, c client.Reader, b workv1alpha1.Binding, rev int64) (*appsv1.ControllerRevision, *unstructured.Unstructured, error) {
	cr := &appsv1.ControllerRevision{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace(b), Name: RevisionName(b, rev)}, cr); err != nil {
		return nil, nil, fmt.Errorf("revision %d of %s: %w", rev, b.GetName(), err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(cr.Data.Raw); err != nil {
		return nil, nil, fmt.Errorf("revision %d of %s: %w", rev, b.GetName(), err)
	}
	return cr, u, nil
}

// pruneRevisions keeps the newest limit revisions and every revision still pinned or stable.
func pruneRevisions(ctx context.Context, c client.Client, b workv1alpha1.Binding, limit int, keep map[int64]bool) error {
	list := &appsv1.ControllerRevisionList{}
	if err := c.List(ctx, list, client.InNamespace(Namespace(b)), client.MatchingLabels{BindingLabel: bindingHash(b)}); err != nil {
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
	if err := c.List(ctx, rels, client.InNamespace(Namespace(b)), client.MatchingLabels{BindingLabel: bindingHash(b)}); err != nil {
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
