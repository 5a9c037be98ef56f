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
	"github.com/flotilla-dev/flotilla/internal/names"
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

// withoutLost takes out of each wave the clusters failover declared lost: tainted
// unreachable, that is not Ready for longer than the failover grace period. A Divided
// placement moves off such a cluster anyway, but a Duplicated one (or one that tolerates the
// taint) stays placed and the binding reports it Lost: a wave waiting for it to run the
// revision would wait until the cluster returns, or roll the release back at its progress
// deadline. The taint, not Ready alone, decides, so a cluster that blinks for a probe or two
// is waited for, as the scheduler waits for it. A lost cluster keeps its place in the
// strategy (percentages do not reshuffle the others), rejoins its wave when the taint goes,
// and renders whatever its pin says meanwhile: the release's revision if its wave had
// reached it, the stable one otherwise.
func withoutLost(waves []Wave, placed []clusterv1alpha1.Cluster) []Wave {
	lost := map[string]bool{}
	for i := range placed {
		lost[placed[i].Name] = kube.Unreachable(&placed[i])
	}
	out := make([]Wave, len(waves))
	for i, w := range waves {
		out[i] = Wave{Name: w.Name, Spec: w.Spec}
		for _, cl := range w.Clusters {
			if lost[cl] {
				out[i].Lost = append(out[i].Lost, cl)
			} else {
				out[i].Clusters = append(out[i].Clusters, cl)
			}
		}
	}
	return out
}

// inRelease are the clusters the waves still count: placed and not lost.
func inRelease(waves []Wave) []string {
	var out []string
	for _, w := range waves {
		out = append(out, w.Clusters...)
	}
	return out
}

// markLeft keeps in a wave's status the clusters that left the release after the wave listed
// them (they left the placement, or failover declared them lost), and the wave's lost clusters
// it never listed, as Left with the reason, instead of letting them vanish from the release.
// active are the clusters still in the release, in any wave: one that moved to another wave
// is not Left.
func markLeft(ctx context.Context, c client.Reader, b workv1alpha1.Binding, ws *rolloutv1alpha1.WaveStatus, old []rolloutv1alpha1.ClusterRelease, lost, active []string) {
	leave := func(cr *rolloutv1alpha1.ClusterRelease) {
		if cr.Phase != rolloutv1alpha1.ClusterLeft { // the first reason stays: it is what happened
			cr.Phase, cr.Message = rolloutv1alpha1.ClusterLeft, whyLeft(ctx, c, b, cr.Name)
		}
	}
	listed := func(name string) bool {
		return slices.ContainsFunc(ws.Clusters, func(x rolloutv1alpha1.ClusterRelease) bool { return x.Name == name })
	}
	for i := range ws.Clusters {
		if !slices.Contains(active, ws.Clusters[i].Name) {
			leave(&ws.Clusters[i])
		}
	}
	for _, cr := range old {
		if slices.Contains(active, cr.Name) || listed(cr.Name) {
			continue
		}
		leave(&cr)
		ws.Clusters = append(ws.Clusters, cr)
	}
	for _, name := range lost {
		if !listed(name) {
			cr := rolloutv1alpha1.ClusterRelease{Name: name}
			leave(&cr)
			ws.Clusters = append(ws.Clusters, cr)
		}
	}
}

// whyLeft says why a cluster left the release: lost (tainted unreachable), whether or not the
// placement moved off it, or why the binding no longer places its template there.
func whyLeft(ctx context.Context, c client.Reader, b workv1alpha1.Binding, cluster string) string {
	cl := &clusterv1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: cluster}, cl); err != nil || !kube.Unreachable(cl) {
		return WhyNotPlaced(ctx, c, b, cluster)
	}
	// Said without "still placed" or "moved": the scheduler may move a Divided placement a
	// moment after the taint, and the first reason is the one kept.
	why := fmt.Sprintf("lost/unreachable: not Ready past the failover grace period, tainted %s", names.UnreachableTaintKey)
	if !slices.ContainsFunc(b.BindingSpec().Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == cluster }) {
		why = "lost/unreachable: " + WhyNotPlaced(ctx, c, b, cluster)
	}
	return why + "; the release goes on without it, and it rejoins when it returns"
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
