package cli

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// workIn is shop/web-deployment's Work for cluster.
func workIn(cluster string) *workv1alpha1.Work {
	return &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-es-" + cluster, Name: "shop-web-deployment", Labels: map[string]string{
		workv1alpha1.BindingNamespaceLabel: "shop", workv1alpha1.BindingNameLabel: "web-deployment", workv1alpha1.ClusterLabel: cluster,
	}}}
}

// describe tells the truth per cluster during and after a staged adoption: adopted where the
// release pinned the cluster and its Work exists, not reached yet (unmanaged) where it has not,
// handed back once the release was aborted; the binding's "waiting for the members" and its
// overall Unknown health, which count clusters Flotilla does not manage, are not shown.
func TestDescribeShowsAdoptionStates(t *testing.T) {
	waiting := []metav1.Condition{{Type: workv1alpha1.ConditionApplied, Status: metav1.ConditionFalse, Reason: "NotApplied", Message: "waiting for the members"}}
	unknown := workv1alpha1.ClusterStatus{Cluster: "west", Health: workv1alpha1.HealthUnknown}
	tests := []struct {
		name    string
		revs    *workv1alpha1.Revisions
		status  []workv1alpha1.ClusterStatus
		release *rolloutv1alpha1.Release
		works   []client.Object
		want    []string // regular expressions
	}{
		{
			name:   "first wave adopted",
			revs:   &workv1alpha1.Revisions{Latest: 1, Stable: 0, Pins: []workv1alpha1.RevisionPin{{Cluster: "east", Revision: 1}}},
			status: []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy}, unknown},
			release: webRelease(1, 0, rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Wave: "1/2 first",
				Waves: []rolloutv1alpha1.WaveStatus{{Name: "first", Phase: rolloutv1alpha1.WaveWaitingForApproval}, {Name: "rest", Phase: rolloutv1alpha1.WavePending}}}),
			works: []client.Object{workIn("east")},
			want: []string{
				`Health:     Healthy \(of the 1 adopted of 2 clusters\)`,
				`Adoption:   staged by release web-deployment-r1 \(Progressing, wave 1/2 first\): 1 of 2 clusters adopted; not reached yet: west`,
				`east\s+2\s+true\s+Healthy\s+adopted\s+-`,
				`west\s+2\s+-\s+-\s+not reached yet \(unmanaged\)\s+-`,
			},
		},
		{
			name:   "aborted",
			revs:   &workv1alpha1.Revisions{Latest: 1, Stable: 0},
			status: []workv1alpha1.ClusterStatus{{Cluster: "east", Health: workv1alpha1.HealthUnknown}, unknown},
			release: webRelease(1, 0, rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseAborted, UpdatedClusters: []string{"east"},
				Waves: []rolloutv1alpha1.WaveStatus{{Name: "first", Phase: rolloutv1alpha1.WaveRolledBack}, {Name: "rest", Phase: rolloutv1alpha1.WavePending}}}),
			want: []string{
				`Health:     - \(Flotilla manages no cluster of it yet\)`,
				"Adoption:   release web-deployment-r1 Aborted: handed back to unmanaged in east, objects and pods left running; Flotilla writes nowhere \\(`flotilla release retry deployment/web` adopts again\\)",
				`east\s+2\s+-\s+-\s+handed back \(unmanaged\)\s+-`,
				`west\s+2\s+-\s+-\s+not adopted \(unmanaged\)\s+-`,
			},
		},
		{
			name:   "adopted everywhere",
			revs:   &workv1alpha1.Revisions{Latest: 1, Stable: 1},
			status: []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy}, {Cluster: "west", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy}},
			release: webRelease(1, 0, rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseSucceeded, Wave: "done",
				Waves: []rolloutv1alpha1.WaveStatus{{Name: "first", Phase: rolloutv1alpha1.WaveSucceeded}, {Name: "rest", Phase: rolloutv1alpha1.WaveSucceeded}}}),
			works: []client.Object{workIn("east"), workIn("west")},
			want:  []string{`east\s+2\s+true\s+Healthy\s+managed`, `west\s+2\s+true\s+Healthy\s+managed`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := releasedBinding(tt.revs, tt.status...)
			b.Status.Conditions = waiting
			for _, w := range tt.works { // a cluster with a Work keeps a lastApplied record
				for i := range b.Status.Clusters {
					if b.Status.Clusters[i].Cluster == w.GetLabels()[workv1alpha1.ClusterLabel] {
						b.Status.Clusters[i].LastApplied = &workv1alpha1.LastApplied{Hash: "applied"}
					}
				}
			}
			objs := append([]client.Object{b.DeepCopy(), tt.release}, tt.works...)
			var out bytes.Buffer
			if err := describeBinding(context.Background(), fakeClient(objs...), &out, b); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !regexp.MustCompile(w).MatchString(out.String()) {
					t.Errorf("describe lacks %s:\n%s", w, out.String())
				}
			}
			if tt.revs.Stable == 0 && (strings.Contains(out.String(), "waiting for the members") || regexp.MustCompile(`\bmanaged\b`).MatchString(out.String())) {
				t.Errorf("describe of a staged adoption counts unadopted clusters as waiting or managed:\n%s", out.String())
			}
		})
	}
}

// describe says why a fleet cluster the template does not run on is missing, when the reason
// is not merely the policy's selection: a taint that moved it off, a cluster not Ready.
func TestDescribeSaysWhyAClusterIsNotPlaced(t *testing.T) {
	b := releasedBinding(nil, workv1alpha1.ClusterStatus{Cluster: "east", Applied: true, Health: workv1alpha1.HealthHealthy})
	b.Spec.Clusters = []workv1alpha1.TargetCluster{{Name: "east", Replicas: 4}}
	ready := func(name string, status metav1.ConditionStatus, taints ...clusterv1alpha1.Taint) *clusterv1alpha1.Cluster {
		return &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clusterv1alpha1.ClusterSpec{Taints: taints},
			Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: clusterv1alpha1.ConditionReady, Status: status}}}}
	}
	c := fakeClient(b.DeepCopy(), ready("east", metav1.ConditionTrue),
		ready("west", metav1.ConditionFalse, clusterv1alpha1.Taint{Key: "cluster.flotilla.dev/unreachable", Effect: clusterv1alpha1.TaintEffectNoExecute}),
		ready("europe", metav1.ConditionTrue), ready("asia", metav1.ConditionFalse))
	var out bytes.Buffer
	if err := describeBinding(context.Background(), c, &out, b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Not placed:",
		"  west: the cluster is tainted cluster.flotilla.dev/unreachable:NoExecute, which moves placements off it (cluster failover)",
		"  asia: the cluster is not Ready",
		"  1 other cluster(s): not selected by the policy",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
}

// The commands take a kind as kubectl does: short, plural or with its group.
func TestResolveKindAcceptsWhatKubectlAccepts(t *testing.T) {
	for in, want := range map[string]string{"deploy": "Deployment", "deployments": "Deployment", "deployment.apps": "Deployment",
		"Deployment": "Deployment", "cm": "ConfigMap", "sts": "StatefulSet", "svc": "Service"} {
		if got := resolveKind(nil, in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	if got := resolveKind(nil, "httproute"); got != "httproute" {
		t.Errorf("an unknown kind is kept as given (bindings are named by its lower case): %s", got)
	}
}

// REPLICAS is what each cluster is given: an override's replicas, not the scheduler's share,
// where they differ.
func TestDescribeShowsOverriddenReplicas(t *testing.T) {
	two, five := int64(2), int64(5)
	b := releasedBinding(&workv1alpha1.Revisions{Latest: 1, Stable: 1},
		workv1alpha1.ClusterStatus{Cluster: "east", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy, LastApplied: &workv1alpha1.LastApplied{Hash: "a", Replicas: &two}},
		workv1alpha1.ClusterStatus{Cluster: "west", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy, LastApplied: &workv1alpha1.LastApplied{Hash: "b", Replicas: &five}})
	var out bytes.Buffer
	if err := describeBinding(context.Background(), fakeClient(b.DeepCopy()), &out, b); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`east\s+2\s+true\s+Healthy`, `west\s+5 \(override; scheduled 2\)\s+true\s+Healthy`} {
		if !regexp.MustCompile(w).MatchString(out.String()) {
			t.Errorf("describe lacks %s:\n%s", w, out.String())
		}
	}
}
