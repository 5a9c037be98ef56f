package bench

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/failover"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// Failover stops one member's API server per round and times, from the stop: the Cluster
// turning not Ready (detection), the unreachable taint (grace period), the binding
// re-placed off the member, and the replacements available in the other members.
func Failover(ctx context.Context, lf *localfleet.LocalFleet, rounds int, grace time.Duration, out io.Writer) error {
	members := lf.Fleet().Names()
	sort.Strings(members)
	cpCfg, err := lf.RESTConfig("")
	if err != nil {
		return err
	}
	cp, err := client.New(cpCfg, client.Options{Scheme: kube.Scheme})
	if err != nil {
		return err
	}
	clients := map[string]kubernetes.Interface{}
	for _, m := range members {
		cfg, err := lf.RESTConfig(m)
		if err != nil {
			return err
		}
		if clients[m], err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
	}
	ns := "bench-failover"
	if err := cp.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	var weights []policyv1alpha1.StaticClusterWeight
	for _, m := range members {
		weights = append(weights, policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{m}}, Weight: 1})
	}
	replicas := int32(3 * len(members))
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{
				Type: policyv1alpha1.ReplicaSchedulingDivided, DivisionPreference: policyv1alpha1.DivisionWeighted,
				WeightPreference: &policyv1alpha1.WeightPreference{StaticWeightList: weights}}},
		},
	}
	if err := cp.Create(ctx, policy); err != nil {
		return err
	}
	web := deployment(ns, 0)
	web.Name, web.Spec.Replicas = "web", ptr.To(replicas)
	if err := cp.Create(ctx, web); err != nil {
		return err
	}
	available := func(skip string) int32 {
		var n int32
		for m, cs := range clients {
			if m == skip {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			d, err := cs.AppsV1().Deployments(ns).Get(cctx, "web", metav1.GetOptions{})
			cancel()
			if err == nil {
				n += d.Status.AvailableReplicas
			}
		}
		return n
	}
	if err := poll(ctx, 5*time.Minute, func() bool { return available("") == replicas }); err != nil {
		return fmt.Errorf("waiting for %d available replicas before the first round: %w", replicas, err)
	}
	fmt.Fprintf(out, "Failover on %d members, %d replicas divided evenly, grace period %s, probe period 1s x 2 + 1s timeout\n", len(members), replicas, grace)
	var detect, taint, replace, up []time.Duration
	for r := range rounds {
		victim := members[r%len(members)]
		start := time.Now()
		if err := lf.StopComponent(victim + "-apiserver"); err != nil {
			return err
		}
		var t [4]time.Duration
		err := poll(ctx, 3*time.Minute, func() bool {
			cl := &clusterv1alpha1.Cluster{}
			if cp.Get(ctx, client.ObjectKey{Name: victim}, cl) == nil {
				if t[0] == 0 && !meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ConditionReady) {
					t[0] = time.Since(start)
				}
				if t[1] == 0 && failover.Unreachable(cl) {
					t[1] = time.Since(start)
				}
			}
			if t[2] == 0 {
				b := &workv1alpha1.ResourceBinding{}
				if cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-deployment"}, b) == nil && len(b.Spec.Clusters) > 0 {
					placed := false
					for _, c := range b.Spec.Clusters {
						placed = placed || c.Name == victim
					}
					if !placed {
						t[2] = time.Since(start)
					}
				}
			}
			if t[2] != 0 && t[3] == 0 && available(victim) == replicas {
				t[3] = time.Since(start)
			}
			return t[3] != 0 && t[0] != 0 && t[1] != 0
		})
		if err != nil {
			return fmt.Errorf("round %d (%s stopped): %w (so far %v)", r+1, victim, err, t)
		}
		fmt.Fprintf(out, "  round %d, %s stopped: not Ready after %s, tainted after %s, re-placed after %s, replacements available after %s\n",
			r+1, victim, t[0].Round(time.Millisecond), t[1].Round(time.Millisecond), t[2].Round(time.Millisecond), t[3].Round(time.Millisecond))
		detect, taint, replace, up = append(detect, t[0]), append(taint, t[1]), append(replace, t[2]), append(up, t[3])
		if err := lf.StartMember(ctx, victim); err != nil {
			return err
		}
		// The next round starts from the division restored on every member.
		if err := poll(ctx, 5*time.Minute, func() bool { return available("") == replicas }); err != nil {
			return fmt.Errorf("round %d: %s back: %w", r+1, victim, err)
		}
	}
	fmt.Fprintf(out, "  detection p50 %s max %s; taint p50 %s max %s; re-placement p50 %s max %s; replacements available p50 %s max %s\n",
		pct(detect, 50), pct(detect, 100), pct(taint, 50), pct(taint, 100), pct(replace, 50), pct(replace, 100), pct(up, 50), pct(up, 100))
	fmt.Fprintf(out, "  from the taint to replacements available: p50 %s max %s\n", pct(sub(up, taint), 50), pct(sub(up, taint), 100))
	return nil
}

func sub(a, b []time.Duration) []time.Duration {
	out := make([]time.Duration, len(a))
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out
}

// pct is the p-th percentile (nearest rank) of d.
func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))].Round(time.Millisecond)
}

func poll(ctx context.Context, timeout time.Duration, done func() bool) error {
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
