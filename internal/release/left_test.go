package release

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
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
	markLeft(context.Background(), c, b, ws, old, []string{"east"})
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
