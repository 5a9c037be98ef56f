// Package revision holds what is recorded for each change of a workload and how releases are
// named and told: revision snapshots (ControllerRevisions) and their labels, the workload hash
// that says whether a change is a new revision, release names, and the words for a wave's
// canary steps. The release recorder writes revisions; the binding controller, history and the
// inventory read them through this package. It must not import any controller.
package revision

import (
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
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

// Name is the ControllerRevision holding a binding's revision rev.
func Name(b workv1alpha1.Binding, rev int64) string {
	suffix := "-r" + strconv.FormatInt(rev, 10)
	name := b.GetName()
	if len(name)+len(suffix) > 253 {
		name = name[:253-len(suffix)]
	}
	return name + suffix
}

// ReleaseName is the name of the release of a binding's revision.
func ReleaseName(b workv1alpha1.Binding, rev int64) string { return Name(b, rev) }

// Namespace is where a binding's revisions and releases live: the template's namespace, or
// flotilla's own for cluster-scoped templates.
func Namespace(b workv1alpha1.Binding) string {
	if b.GetNamespace() == "" {
		return kube.SystemNamespace
	}
	return b.GetNamespace()
}

// BindingHash labels the revisions and releases of a binding: its kind, namespace and name
// hashed, since a binding name can be longer than a label value.
func BindingHash(b workv1alpha1.Binding) string {
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

// Load returns the template as recorded in revision rev and its workload hash.
func Load(ctx context.Context, c client.Reader, b workv1alpha1.Binding, rev int64) (*unstructured.Unstructured, string, error) {
	cr, u, err := LoadObject(ctx, c, b, rev)
	if err != nil {
		return nil, "", err
	}
	return u, cr.Annotations[RevisionHashAnnotation], nil
}

// LoadObject reads a revision's ControllerRevision (for when it was recorded) and the
// template it holds.
func LoadObject(ctx context.Context, c client.Reader, b workv1alpha1.Binding, rev int64) (*appsv1.ControllerRevision, *unstructured.Unstructured, error) {
	cr := &appsv1.ControllerRevision{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace(b), Name: Name(b, rev)}, cr); err != nil {
		return nil, nil, fmt.Errorf("revision %d of %s: %w", rev, b.GetName(), err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(cr.Data.Raw); err != nil {
		return nil, nil, fmt.Errorf("revision %d of %s: %w", rev, b.GetName(), err)
	}
	return cr, u, nil
}

// DeleteHistory removes a binding's revisions and releases: when its rollout goes away, so a
// rollout added later starts a history of its own, and when a cluster-scoped binding (whose
// history nothing owns) is deleted.
func DeleteHistory(ctx context.Context, c client.Client, b workv1alpha1.Binding) error {
	sel := []client.DeleteAllOfOption{client.InNamespace(Namespace(b)), client.MatchingLabels{BindingLabel: BindingHash(b)}}
	if err := c.DeleteAllOf(ctx, &appsv1.ControllerRevision{}, sel...); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := c.DeleteAllOf(ctx, &rolloutv1alpha1.Release{}, sel...); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// WaveSteps are the canary steps of the release's wave called name; none for the rest wave.
func WaveSteps(rel *rolloutv1alpha1.Release, name string) []policyv1alpha1.CanaryStep {
	for i := range rel.Spec.Strategy.Waves {
		if rel.Spec.Strategy.Waves[i].Name == name {
			return rel.Spec.Strategy.Waves[i].Steps
		}
	}
	return nil
}

// StepLabel names canary step k (from 0) of steps as people count it, with the canary weight
// in force there: "step 2/4 setWeight 40%", "step 3/4 pause 1m (canary 40%)",
// "step 4/4 pause until promote (canary 40%)", "step 1/4 analysis (canary 0%)".
func StepLabel(steps []policyv1alpha1.CanaryStep, k int) string {
	if k < 0 || k >= len(steps) {
		return fmt.Sprintf("steps %d/%d done", len(steps), len(steps))
	}
	label := fmt.Sprintf("step %d/%d ", k+1, len(steps))
	weight := int32(0)
	for _, st := range steps[:k] {
		if st.SetWeight != nil {
			weight = *st.SetWeight
		}
	}
	st := steps[k]
	switch {
	case st.SetWeight != nil:
		return label + fmt.Sprintf("setWeight %d%%", *st.SetWeight)
	case st.Pause != nil && st.Pause.Duration != nil:
		d := st.Pause.Duration.String()
		if st.Pause.Duration.Type == intstr.Int {
			d += "s" // whole seconds, as Argo Rollouts writes them
		}
		return label + fmt.Sprintf("pause %s (canary %d%%)", d, weight)
	case st.Pause != nil:
		return label + fmt.Sprintf("pause until promote (canary %d%%)", weight)
	case st.SetCanaryScale != nil && st.SetCanaryScale.Replicas != nil:
		return label + fmt.Sprintf("setCanaryScale %d replicas (traffic %d%%)", *st.SetCanaryScale.Replicas, weight)
	case st.SetCanaryScale != nil && st.SetCanaryScale.Weight != nil:
		return label + fmt.Sprintf("setCanaryScale %d%% (traffic %d%%)", *st.SetCanaryScale.Weight, weight)
	case st.SetCanaryScale != nil:
		return label + fmt.Sprintf("setCanaryScale matchTrafficWeight (traffic %d%%)", weight)
	case st.SetHeaderRoute != nil && len(st.SetHeaderRoute.Match) == 0:
		return label + "setHeaderRoute off"
	case st.SetHeaderRoute != nil:
		var hs []string
		for _, h := range st.SetHeaderRoute.Match {
			hs = append(hs, h.Name)
		}
		return label + "setHeaderRoute " + strings.Join(hs, ",")
	default:
		return label + fmt.Sprintf("analysis (canary %d%%)", weight)
	}
}
