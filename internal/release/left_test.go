package release

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/changewindow"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
)

// A cluster that leaves the placement during a release stays in its wave as Left, with why.
func TestMarkLeftKeepsClustersThatLeft(t *testing.T) {
	tainted := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "west"},
		Spec: clusterv1alpha1.ClusterSpec{Taints: []clusterv1alpha1.Taint{{Key: "cluster.flotilla.dev/unreachable", Effect: clusterv1alpha1.TaintEffectNoExecute}}}}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(tainted).Build()
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment"},
		Spec: workv1alpha1.ResourceBindingSpec{GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{
			{Cluster: "north", Reason: workv1alpha1.EvictionReasonClusterFailover, Message: "cluster north is unreachable"}}}}
	old := []rolloutv1alpha1.ClusterRelease{{Name: "east", Phase: rolloutv1alpha1.ClusterHealthy}, {Name: "west", Phase: rolloutv1alpha1.ClusterHealthy},
		{Name: "north", Phase: rolloutv1alpha1.ClusterUpdating}, {Name: "gone", Phase: rolloutv1alpha1.ClusterPending}}
	ws := &rolloutv1alpha1.WaveStatus{Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "east", Phase: rolloutv1alpha1.ClusterHealthy}}}
	markLeft(context.Background(), c, b, ws, old, nil, []string{"east"})
	want := map[string]string{
		"west":  "tainted cluster.flotilla.dev/unreachable:NoExecute",
		"north": "evicted by ClusterFailover: cluster north is unreachable",
		"gone":  "the cluster left the fleet",
	}
	if len(ws.Clusters) != 4 {
		t.Fatalf("clusters %v, want east and the three that left", ws.Clusters)
	}
	for _, cr := range ws.Clusters[1:] {
		if cr.Phase != rolloutv1alpha1.ClusterLeft || !strings.Contains(cr.Message, want[cr.Name]) {
			t.Errorf("%s: %s %q, want Left saying %q", cr.Name, cr.Phase, cr.Message, want[cr.Name])
		}
	}
	st := &rolloutv1alpha1.ReleaseStatus{Waves: []rolloutv1alpha1.WaveStatus{*ws}}
	if got := strings.Join(leftClusters(st), ","); got != "gone,north,west" {
		t.Errorf("leftClusters = %s", got)
	}
}

// A Ready cluster that does not serve the template's kind says so, not "the policy changed".
func TestWhyNotPlacedNamesAKindTheClusterDoesNotServe(t *testing.T) {
	ready := []metav1.Condition{{Type: clusterv1alpha1.ConditionReady, Status: metav1.ConditionTrue}}
	east := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "east"}, Status: clusterv1alpha1.ClusterStatus{Conditions: ready,
		APIEnablements: []clusterv1alpha1.APIEnablement{{GroupVersion: "apps/v1", Resources: []clusterv1alpha1.APIResource{{Name: "deployments", Kind: "Deployment"}}}}}}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(east).Build()
	route := &workv1alpha1.ResourceBinding{Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute"}}}
	if why := WhyNotPlaced(context.Background(), c, route, "east"); why != "the cluster does not serve HTTPRoute of gateway.networking.k8s.io/v1: install its CRD there" {
		t.Errorf("HTTPRoute: %q", why)
	}
	web := &workv1alpha1.ResourceBinding{Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment"}}}
	if why := WhyNotPlaced(context.Background(), c, web, "east"); !strings.HasPrefix(why, "no longer placed") {
		t.Errorf("Deployment: %q", why)
	}
	east.Spec.Taints = []clusterv1alpha1.Taint{{Key: "maint", Effect: clusterv1alpha1.TaintEffectNoSchedule}}
	c = fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(east).Build()
	if why := WhyNotPlaced(context.Background(), c, web, "east"); !strings.HasPrefix(why, "the cluster is tainted maint:NoSchedule") {
		t.Errorf("a NoSchedule taint: %q", why)
	}
}

// A cluster failover declared lost (tainted unreachable) leaves its wave even when it stays
// placed (Duplicated, or a placement tolerating the taint); one only briefly not Ready stays.
func TestWithoutLostTakesTaintedClustersOutOfTheirWaves(t *testing.T) {
	unreachable := []clusterv1alpha1.Taint{{Key: names.UnreachableTaintKey, Effect: clusterv1alpha1.TaintEffectNoExecute}}
	placed := []clusterv1alpha1.Cluster{
		{ObjectMeta: metav1.ObjectMeta{Name: "east"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "west"}}, // not Ready, not tainted yet: waited for
		{ObjectMeta: metav1.ObjectMeta{Name: "europe"}, Spec: clusterv1alpha1.ClusterSpec{Taints: unreachable}},
		{ObjectMeta: metav1.ObjectMeta{Name: "asia"}, Spec: clusterv1alpha1.ClusterSpec{Taints: unreachable}},
	}
	strategy := &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
		{Name: "first", ClusterNames: []string{"east"}}, {Name: "second", ClusterNames: []string{"west", "europe"}}, {Name: "third", ClusterNames: []string{"asia"}}}}
	got := withoutLost(ResolveWaves(strategy, placed), placed)
	want := []Wave{
		{Name: "first", Clusters: []string{"east"}, Spec: &strategy.Waves[0]},
		{Name: "second", Clusters: []string{"west"}, Lost: []string{"europe"}, Spec: &strategy.Waves[1]},
		{Name: "third", Lost: []string{"asia"}, Spec: &strategy.Waves[2]},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waves (-want +got):\n%s", diff)
	}
	if got := inRelease(got); !slices.Equal(got, []string{"east", "west"}) {
		t.Errorf("inRelease = %v, want east, west", got)
	}
}

// A lost cluster that is still placed is Left as lost, whether the wave listed it (and was
// updating it) or not yet; a listed cluster still in the release is left alone.
func TestMarkLeftListsLostClustersStillPlaced(t *testing.T) {
	europe := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "europe"},
		Spec: clusterv1alpha1.ClusterSpec{Taints: []clusterv1alpha1.Taint{{Key: names.UnreachableTaintKey, Effect: clusterv1alpha1.TaintEffectNoExecute}}}}
	asia := europe.DeepCopy()
	asia.Name = "asia"
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(europe, asia).Build()
	b := &workv1alpha1.ResourceBinding{Spec: workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "west"}, {Name: "europe"}, {Name: "asia"}}}}
	ws := &rolloutv1alpha1.WaveStatus{Clusters: []rolloutv1alpha1.ClusterRelease{
		{Name: "west", Phase: rolloutv1alpha1.ClusterHealthy}, {Name: "europe", Phase: rolloutv1alpha1.ClusterUpdating, Message: "waiting for revision 2 to run healthy"}}}
	markLeft(context.Background(), c, b, ws, slices.Clone(ws.Clusters), []string{"europe", "asia"}, []string{"east", "west"})
	if len(ws.Clusters) != 3 || ws.Clusters[0].Phase != rolloutv1alpha1.ClusterHealthy {
		t.Fatalf("clusters %+v, want west Healthy, europe and asia Left", ws.Clusters)
	}
	for _, cr := range ws.Clusters[1:] {
		if cr.Phase != rolloutv1alpha1.ClusterLeft || !strings.HasPrefix(cr.Message, "lost/unreachable: not Ready past the failover grace period") ||
			!strings.HasSuffix(cr.Message, "rejoins when it returns") {
			t.Errorf("%s: %s %q, want Left as lost", cr.Name, cr.Phase, cr.Message)
		}
	}
	// The reason a cluster left with stays, even once the taint is gone.
	first := ws.Clusters[1].Message
	markLeft(context.Background(), fake.NewClientBuilder().WithScheme(kube.Scheme).Build(), b, ws, slices.Clone(ws.Clusters), []string{"europe", "asia"}, []string{"east", "west"})
	if ws.Clusters[1].Message != first || len(ws.Clusters) != 3 {
		t.Errorf("after a second pass: %+v", ws.Clusters)
	}
}

// A Divided placement moved off a lost cluster: the reason names the eviction and the loss.
func TestWhyLeftNamesAFailoverEviction(t *testing.T) {
	europe := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "europe"},
		Spec: clusterv1alpha1.ClusterSpec{Taints: []clusterv1alpha1.Taint{{Key: names.UnreachableTaintKey, Effect: clusterv1alpha1.TaintEffectNoExecute}}}}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(europe).Build()
	b := &workv1alpha1.ResourceBinding{Spec: workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "east"}},
		GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{Cluster: "europe", Reason: workv1alpha1.EvictionReasonClusterFailover,
			Message: "cluster europe is unreachable; its 3 replicas moved to the other clusters"}}}}
	const want = "lost/unreachable: evicted by ClusterFailover: cluster europe is unreachable; its 3 replicas moved to the other clusters; the release goes on without it, and it rejoins when it returns"
	if got := whyLeft(context.Background(), c, b, "europe"); got != want {
		t.Errorf("whyLeft = %q\nwant      %q", got, want)
	}
}

// A cluster that returns to a finished wave takes the revision, unless a change window holds
// it, and shows Healthy once it runs it so (not "returned" until the release ends).
func TestAReturnedClusterCatchesUpAndTurnsHealthy(t *testing.T) {
	c := &Controller{Client: fake.NewClientBuilder().WithScheme(kube.Scheme).Build()}
	rel := &rolloutv1alpha1.Release{Spec: rolloutv1alpha1.ReleaseSpec{Revision: 2, StableRevision: 1}}
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment"}}
	status := &rolloutv1alpha1.ReleaseStatus{CurrentWave: 1, Waves: []rolloutv1alpha1.WaveStatus{{Name: "first", Phase: rolloutv1alpha1.WaveSucceeded,
		Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "east", Phase: rolloutv1alpha1.ClusterLeft, Message: "lost/unreachable"}, {Name: "west", Phase: rolloutv1alpha1.ClusterLeft}}}}}
	s := &step{rel: rel, status: status, binding: b, revs: &workv1alpha1.Revisions{Latest: 2, Stable: 1}, statusFresh: true,
		held: map[string]fmt.Stringer{"west": changewindow.Hold{Windows: []string{"freeze"}, Deny: true, Overridable: true}}}
	waves := []Wave{{Name: "first", Clusters: []string{"east", "west"}}}
	c.catchUpFinishedWaves(context.Background(), s, waves, nil)
	if s.pinnedTo("east") != 2 || s.pinnedTo("west") != 1 {
		t.Fatalf("pins east %d west %d: want east caught up, west held by the window", s.pinnedTo("east"), s.pinnedTo("west"))
	}
	if cr := status.Waves[0].Clusters[1]; !strings.HasPrefix(cr.Message, "held by change window freeze") {
		t.Errorf("west: %s %q", cr.Phase, cr.Message)
	}
	c.catchUpFinishedWaves(context.Background(), s, waves, map[string]workv1alpha1.ClusterStatus{"east": {Cluster: "east", Applied: true, Revision: 2, Health: workv1alpha1.HealthHealthy}})
	if cr := status.Waves[0].Clusters[0]; cr.Phase != rolloutv1alpha1.ClusterHealthy || cr.Message != "" {
		t.Errorf("east runs revision 2 healthy: %s %q", cr.Phase, cr.Message)
	}
}

// A rollback keeps a cluster that left as Left with why, and says what it gets back.
func TestRollbackKeepsALeftClusterLeft(t *testing.T) {
	c := &Controller{Client: fake.NewClientBuilder().WithScheme(kube.Scheme).Build()}
	rel := &rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment-r2"}, Spec: rolloutv1alpha1.ReleaseSpec{Revision: 2, StableRevision: 1}}
	status := &rolloutv1alpha1.ReleaseStatus{UpdatedClusters: []string{"east", "west"}, Waves: []rolloutv1alpha1.WaveStatus{{Name: "first",
		Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "east", Phase: rolloutv1alpha1.ClusterLeft, Message: "lost/unreachable: not Ready"}, {Name: "west", Phase: rolloutv1alpha1.ClusterDegraded}}}}}
	s := &step{rel: rel, status: status, binding: &workv1alpha1.ResourceBinding{}, revs: &workv1alpha1.Revisions{Latest: 2, Stable: 1,
		Pins: []workv1alpha1.RevisionPin{{Cluster: "east", Revision: 2}, {Cluster: "west", Revision: 2}}}}
	if err := c.rollback(context.Background(), s, rolloutv1alpha1.ReleaseRolledBack, "wave first: Degraded in west"); err != nil {
		t.Fatal(err)
	}
	east, west := status.Waves[0].Clusters[0], status.Waves[0].Clusters[1]
	if east.Phase != rolloutv1alpha1.ClusterLeft || east.Message != "lost/unreachable: not Ready; the release rolled back: runs revision 1 once it returns" {
		t.Errorf("east: %s %q", east.Phase, east.Message)
	}
	if west.Phase != rolloutv1alpha1.ClusterRolledBack || len(s.revs.Pins) != 0 {
		t.Errorf("west %s, pins %v", west.Phase, s.revs.Pins)
	}
}
