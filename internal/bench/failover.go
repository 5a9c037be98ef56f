package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
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
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// FailoverOptions size the failover bench.
type FailoverOptions struct {
	Rounds int
	Grace  time.Duration
	// Workloads is how many Deployments are divided over the members; Replicas each.
	Workloads, Replicas int
}

// Failover stops one member's API server per round and times, from the stop: the Cluster
// turning not Ready (detection), the unreachable taint (grace period), the first and the last
// binding re-placed off the member, and every replacement available in the other members.
func Failover(ctx context.Context, lf *localfleet.LocalFleet, o FailoverOptions, out io.Writer) error {
	members := lf.Fleet().Names()
	sort.Strings(members)
	cpCfg, err := lf.RESTConfig("")
	if err != nil {
		return err
	}
	cpCfg.QPS, cpCfg.Burst = 200, 400
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
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{
				Type: policyv1alpha1.ReplicaSchedulingDivided, DivisionPreference: policyv1alpha1.DivisionWeighted,
				WeightPreference: &policyv1alpha1.WeightPreference{StaticWeightList: weights}}},
		},
	}
	if err := cp.Create(ctx, policy); err != nil {
		return err
	}
	if err := forEachParallel(o.Workloads, 8, func(i int) error {
		d := deployment(ns, i)
		d.Spec.Replicas = ptr.To(int32(o.Replicas))
		return cp.Create(ctx, d)
	}); err != nil {
		return err
	}
	want := int32(o.Workloads * o.Replicas)
	available := func(skip string) int32 {
		var n int32
		for m, cs := range clients {
			if m == skip {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			list, err := cs.AppsV1().Deployments(ns).List(cctx, metav1.ListOptions{})
			cancel()
			if err != nil {
				continue
			}
			for _, d := range list.Items {
				n += d.Status.AvailableReplicas
			}
		}
		return n
	}
	// movedOff counts the bindings placed and no longer placed on the victim.
	movedOff := func(victim string) int {
		list := &workv1alpha1.ResourceBindingList{}
		if cp.List(ctx, list, client.InNamespace(ns)) != nil {
			return 0
		}
		n := 0
		for _, b := range list.Items {
			if len(b.Spec.Clusters) > 0 && !slices.ContainsFunc(b.Spec.Clusters, func(c workv1alpha1.TargetCluster) bool { return c.Name == victim }) {
				n++
			}
		}
		return n
	}
	if err := poll(ctx, 10*time.Minute, func() bool { return available("") == want }); err != nil {
		return fmt.Errorf("waiting for %d available replicas before the first round: %w", want, err)
	}
	fmt.Fprintf(out, "Failover on %d members: %d Deployments of %d replicas divided evenly (%d pods), grace period %s, probe period 1s x 2 + 1s timeout\n",
		len(members), o.Workloads, o.Replicas, want, o.Grace)
	var detect, taint, first, last, up []time.Duration
	for r := range o.Rounds {
		victim := members[r%len(members)]
		start := time.Now()
		if err := lf.StopComponent(victim + "-apiserver"); err != nil {
			return err
		}
		// not Ready, tainted, first binding moved, every binding moved, every replacement available
		var t [5]time.Duration
		err := poll(ctx, 3*time.Minute, func() bool {
			cl := &clusterv1alpha1.Cluster{}
			if cp.Get(ctx, client.ObjectKey{Name: victim}, cl) == nil {
				if t[0] == 0 && !meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ConditionReady) {
					t[0] = time.Since(start)
				}
				if t[1] == 0 && kube.Unreachable(cl) {
					t[1] = time.Since(start)
				}
			}
			if t[3] == 0 {
				moved := movedOff(victim)
				if t[2] == 0 && moved > 0 {
					t[2] = time.Since(start)
				}
				if moved == o.Workloads {
					t[3] = time.Since(start)
				}
			}
			if t[3] != 0 && t[4] == 0 && available(victim) == want {
				t[4] = time.Since(start)
			}
			return t[4] != 0 && t[0] != 0 && t[1] != 0
		})
		if err != nil {
			return fmt.Errorf("round %d (%s stopped): %w (so far %v; %s)", r+1, victim, err, t, perMember(ctx, clients, ns))
		}
		ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
		fmt.Fprintf(out, "  round %d, %s stopped: not Ready after %s, tainted after %s, first binding re-placed after %s, all %d after %s, replacements available after %s\n",
			r+1, victim, ms(t[0]), ms(t[1]), ms(t[2]), o.Workloads, ms(t[3]), ms(t[4]))
		detect, taint, first, last, up = append(detect, t[0]), append(taint, t[1]), append(first, t[2]), append(last, t[3]), append(up, t[4])
		if err := lf.StartMember(ctx, victim); err != nil {
			return err
		}
		// The next round starts from the division restored on every member.
		if err := poll(ctx, 10*time.Minute, func() bool { return available("") == want }); err != nil {
			return fmt.Errorf("round %d: %s back: %w", r+1, victim, err)
		}
	}
	fmt.Fprintf(out, "  detection p50 %s max %s; taint p50 %s max %s; first re-placement p50 %s; all re-placed p50 %s max %s; replacements available p50 %s max %s\n",
		pct(detect, 50), pct(detect, 100), pct(taint, 50), pct(taint, 100), pct(first, 50), pct(last, 50), pct(last, 100), pct(up, 50), pct(up, 100))
	fmt.Fprintf(out, "  from the taint to replacements available: p50 %s max %s\n", pct(sub(up, taint), 50), pct(sub(up, taint), 100))
	return nil
}

// perMember says, for a bench that timed out, how many replicas each member runs and has
// available, and which Deployments lag.
func perMember(ctx context.Context, clients map[string]kubernetes.Interface, ns string) string {
	var parts []string
	for m, cs := range clients {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		list, err := cs.AppsV1().Deployments(ns).List(cctx, metav1.ListOptions{})
		cancel()
		if err != nil {
			parts = append(parts, m+": "+err.Error())
			continue
		}
		var spec, avail int32
		var lagging []string
		for _, d := range list.Items {
			spec += ptr.Deref(d.Spec.Replicas, 0)
			avail += d.Status.AvailableReplicas
			if d.Status.AvailableReplicas != ptr.Deref(d.Spec.Replicas, 0) && len(lagging) < 3 {
				lagging = append(lagging, fmt.Sprintf("%s %d/%d", d.Name, d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 0)))
			}
		}
		pods := map[string]int{}
		cctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		if pl, err := cs.CoreV1().Pods(ns).List(cctx, metav1.ListOptions{}); err == nil {
			for _, p := range pl.Items {
				state := string(p.Status.Phase)
				if p.DeletionTimestamp != nil {
					state = "Terminating"
				}
				if len(p.OwnerReferences) == 0 {
					state += "/orphan"
				}
				pods[state]++
			}
		}
		cancel()
		parts = append(parts, fmt.Sprintf("%s: %d Deployments, %d of %d replicas available, pods %v, lagging %v", m, len(list.Items), avail, spec, pods, lagging))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
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
