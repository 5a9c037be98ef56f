package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/testenv"
)

// The scheduler against a real API server: a binding of a Divided policy over two Ready
// clusters gets 3 + 1 replicas by static weight and Scheduled=True, applied under the
// scheduler's own field manager; relabelling a cluster out of the policy's selector moves
// every replica to the other (the policy index and the Cluster watch bring the binding back).
func TestSchedulerOnARealAPIServer(t *testing.T) {
	ctx := context.Background()
	cfg, c := testenv.Start(t)
	testenv.Manager(t, cfg, func(mgr ctrl.Manager) error {
		if err := kube.IndexBindingsByPolicy(ctx, mgr.GetFieldIndexer()); err != nil {
			return err
		}
		return (&Controller{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr)
	})
	for _, ns := range []string{"shop", kube.SystemNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"east", "west"} {
		cl := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "gold"}},
			Spec: clusterv1alpha1.ClusterSpec{Endpoint: "https://" + name + ".example:6443", SyncMode: clusterv1alpha1.SyncModePush,
				CredentialsSecretRef: clusterv1alpha1.SecretReference{Namespace: kube.SystemNamespace, Name: name}}}
		if err := c.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
		cl.Status = clusterv1alpha1.ClusterStatus{
			Conditions:     []metav1.Condition{{Type: clusterv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "ProbeSucceeded", LastTransitionTime: metav1.Now()}},
			APIEnablements: []clusterv1alpha1.APIEnablement{{GroupVersion: "apps/v1", Resources: []clusterv1alpha1.APIResource{{Name: "deployments", Kind: "Deployment"}}}},
		}
		if err := c.Status().Update(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	weight := func(cluster string, w int64) policyv1alpha1.StaticClusterWeight {
		return policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{cluster}}, Weight: w}
	}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{LabelSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"tier": "gold"}}},
				ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{Type: policyv1alpha1.ReplicaSchedulingDivided, DivisionPreference: policyv1alpha1.DivisionWeighted,
					WeightPreference: &policyv1alpha1.WeightPreference{StaticWeightList: []policyv1alpha1.StaticClusterWeight{weight("east", 3), weight("west", 1)}}},
			}}}
	if err := c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment"},
		Spec: workv1alpha1.ResourceBindingSpec{Replicas: 4,
			Resource:  workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
			PolicyRef: workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "web"}}}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	placement := func() map[string]int32 {
		got := &workv1alpha1.ResourceBinding{}
		if c.Get(ctx, client.ObjectKeyFromObject(b), got) != nil {
			return nil
		}
		if s, ok := workv1alpha1.ScheduleOf(got); !ok || !s.Placed {
			return nil
		}
		out := map[string]int32{}
		for _, t := range got.Spec.Clusters {
			out[t.Name] = t.Replicas
		}
		return out
	}
	waitFor := func(what string, want map[string]int32) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := placement()
			if len(got) == len(want) && got["east"] == want["east"] && got["west"] == want["west"] {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: placement %v, want %v", what, got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("divided 3:1", map[string]int32{"east": 3, "west": 1})
	got := &workv1alpha1.ResourceBinding{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(b), got); err != nil {
		t.Fatal(err)
	}
	// The outcome travels with the clusters, in the same write; the scheduler writes no status.
	if s, ok := workv1alpha1.ScheduleOf(got); !ok || !s.Placed || s.Generation != got.Generation || !strings.Contains(s.Message, "east=3") {
		t.Errorf("schedule annotation %+v (found %v), generation %d", s, ok, got.Generation)
	}
	for _, mf := range got.ManagedFields {
		if mf.Subresource == "status" {
			t.Errorf("status written by %s: the scheduler writes none", mf.Manager)
		}
	}

	west := &clusterv1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: "west"}, west); err != nil {
		t.Fatal(err)
	}
	west.Labels["tier"] = "silver"
	if err := c.Update(ctx, west); err != nil {
		t.Fatal(err)
	}
	waitFor("relabelled out", map[string]int32{"east": 4})
}
