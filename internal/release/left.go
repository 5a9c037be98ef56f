package release

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// WhyNotPlaced says why a binding no longer places its template on a cluster: evicted by a
// failover, the cluster gone, tainted or not Ready, or a placement change.
func WhyNotPlaced(ctx context.Context, c client.Reader, b workv1alpha1.Binding, cluster string) string {
	bs := b.BindingSpec()
	if t, ok := bs.EvictionFor(cluster); ok {
		return fmt.Sprintf("evicted by %s: %s", t.Reason, t.Message)
	}
	for _, f := range bs.FailedClusters {
		if f.Cluster == cluster && f.TemplateGeneration == bs.TemplateGeneration {
			return "application failover moved the workload off it: " + f.Message
		}
	}
	cl := &clusterv1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: cluster}, cl); apierrors.IsNotFound(err) {
		return "the cluster left the fleet"
	} else if err == nil {
		for _, t := range cl.Spec.Taints {
			if t.Effect == clusterv1alpha1.TaintEffectNoExecute {
				return fmt.Sprintf("the cluster is tainted %s:%s, which moves placements off it (cluster failover)", t.Key, t.Effect)
			}
		}
		if !meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ConditionReady) {
			return "the cluster is not Ready"
		}
		for _, t := range cl.Spec.Taints {
			if t.Effect == clusterv1alpha1.TaintEffectNoSchedule {
				return fmt.Sprintf("the cluster is tainted %s:%s, so only policies that tolerate it place new workloads there", t.Key, t.Effect)
			}
		}
		gvk := schema.FromAPIVersionAndKind(bs.Resource.APIVersion, bs.Resource.Kind)
		if len(cl.Status.APIEnablements) > 0 && !kube.Serves(cl, gvk) {
			return fmt.Sprintf("the cluster does not serve %s of %s: install its CRD there", gvk.Kind, gvk.GroupVersion())
		}
	}
	return "no longer placed: the policy, the cluster's labels or its taints changed"
}

// markLeft keeps in a wave's status the clusters that left the placement after the wave
// listed them, as Left with the reason, instead of letting them vanish from the release.
func markLeft(ctx context.Context, c client.Reader, b workv1alpha1.Binding, ws *rolloutv1alpha1.WaveStatus, old []rolloutv1alpha1.ClusterRelease, placed []string) {
	for _, cr := range old {
		if slices.Contains(placed, cr.Name) || slices.ContainsFunc(ws.Clusters, func(x rolloutv1alpha1.ClusterRelease) bool { return x.Name == cr.Name }) {
			continue
		}
		if cr.Phase != rolloutv1alpha1.ClusterLeft {
			cr.Phase, cr.Message = rolloutv1alpha1.ClusterLeft, WhyNotPlaced(ctx, c, b, cr.Name)
		}
		ws.Clusters = append(ws.Clusters, cr)
	}
}

// leftClusters lists the clusters marked Left in any wave.
func leftClusters(status *rolloutv1alpha1.ReleaseStatus) []string {
	var out []string
	for _, w := range status.Waves {
		for _, cr := range w.Clusters {
			if cr.Phase == rolloutv1alpha1.ClusterLeft && !slices.Contains(out, cr.Name) {
				out = append(out, cr.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}
