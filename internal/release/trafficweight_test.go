package release

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

func TestCanaryShort(t *testing.T) {
	healthy := func(avail *int32) workv1alpha1.ClusterStatus {
		return workv1alpha1.ClusterStatus{CanaryHealth: workv1alpha1.HealthHealthy, CanaryAvailableReplicas: avail}
	}
	for _, tc := range []struct {
		name        string
		reported    map[string]workv1alpha1.ClusterStatus
		fresh       bool
		wantWaiting []string
		wantShort   []string
	}{
		{"every canary has its replicas", map[string]workv1alpha1.ClusterStatus{"east": healthy(ptr.To[int32](3)), "west": healthy(ptr.To[int32](4))}, true, nil, nil},
		{"one is short, though a status says healthy", map[string]workv1alpha1.ClusterStatus{"east": healthy(ptr.To[int32](1)), "west": healthy(ptr.To[int32](3))}, true,
			[]string{"east"}, []string{"1/3 available in east"}},
		{"a status of the smaller canary is not believed", map[string]workv1alpha1.ClusterStatus{"east": healthy(ptr.To[int32](3)), "west": healthy(ptr.To[int32](3))}, false,
			[]string{"east", "west"}, []string{"3/3 available in east, not reported healthy yet", "3/3 available in west, not reported healthy yet"}},
		{"a kind without a count is judged by its health", map[string]workv1alpha1.ClusterStatus{"east": healthy(nil), "west": {CanaryHealth: workv1alpha1.HealthProgressing}}, true,
			[]string{"west"}, []string{"3 starting in west"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waiting, short := canaryShort([]string{"east", "west", "north"}, map[string]int32{"east": 3, "west": 3, "north": 0}, tc.reported, tc.fresh)
			if d := cmp.Diff(tc.wantWaiting, waiting); d != "" {
				t.Errorf("waiting (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantShort, short); d != "" {
				t.Errorf("short (-want +got):\n%s", d)
			}
		})
	}
}

// trafficFixture is a routed release of revision 2 at step 2 (setWeight 60) of a wave over
// east and west, 5 replicas each, whose canaries run at 20% with 1 replica.
func trafficFixture(available int32, pinnedReplicas int32) (*step, *rolloutv1alpha1.WaveStatus, Wave, map[string]workv1alpha1.ClusterStatus) {
	steps := []policyv1alpha1.CanaryStep{{SetWeight: ptr.To[int32](20)}, {Pause: &policyv1alpha1.PauseStep{}}, {SetWeight: ptr.To[int32](60)}}
	wave := Wave{Name: "both", Clusters: []string{"east", "west"}, Spec: &policyv1alpha1.Wave{Name: "both", Steps: steps}}
	rb := workv1alpha1.NewBinding("shop", "web-deployment").(*workv1alpha1.ResourceBinding)
	rb.Spec.Clusters = []workv1alpha1.TargetCluster{{Name: "east", Replicas: 5}, {Name: "west", Replicas: 5}}
	rb.Spec.Revisions = &workv1alpha1.Revisions{Stable: 1, Latest: 2}
	status := map[string]workv1alpha1.ClusterStatus{}
	for _, cl := range wave.Clusters {
		rb.Spec.Revisions.Canaries = append(rb.Spec.Revisions.Canaries, workv1alpha1.CanaryPin{Cluster: cl, Revision: 2, Replicas: pinnedReplicas, Weight: ptr.To[int32](20)})
		status[cl] = workv1alpha1.ClusterStatus{Cluster: cl, CanaryHealth: workv1alpha1.HealthHealthy, CanaryAvailableReplicas: ptr.To(available)}
	}
	rel := &rolloutv1alpha1.Release{}
	rel.Spec.Revision = 2
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	s := &step{rel: rel, status: &rolloutv1alpha1.ReleaseStatus{}, binding: rb, revs: rb.Spec.Revisions.DeepCopy(), now: now, statusFresh: true}
	ws := &rolloutv1alpha1.WaveStatus{Name: "both", CurrentStep: 2, StepStartedAt: &metav1.MicroTime{Time: now}, TrafficWeight: ptr.To[int32](20)}
	return s, ws, wave, status
}

func weights(revs *workv1alpha1.Revisions) map[string]int32 {
	out := map[string]int32{}
	for _, c := range revs.Canaries {
		out[c.Cluster] = *c.Weight
	}
	return out
}

// The bug of issue 34: the pass that grew the canary read a fresh, Healthy status of the
// 1-replica canary and moved the routes to 60% at once.
func TestTrafficStepRaisesTheWeightOnlyOnceTheCanaryHasItsReplicas(t *testing.T) {
	ctx := context.Background()
	c := &Controller{}
	s, ws, wave, status := trafficFixture(1, 1)
	done, err := c.trafficStep(ctx, s, ws, wave, 2, status)
	if err != nil || done {
		t.Fatalf("growing the canary: done %v, err %v", done, err)
	}
	if d := cmp.Diff(map[string]int32{"east": 20, "west": 20}, weights(s.revs)); d != "" {
		t.Errorf("the routes moved before the canary grew (-want +got):\n%s", d)
	}
	if n := s.revs.Canaries[0].Replicas; n != 3 {
		t.Errorf("canary pinned at %d replicas, want 3 (60%% of 5)", n)
	}
	if !strings.Contains(ws.Message, "canary scaling for 60%: 1/3 available in east, 1/3 available in west") || *ws.TrafficWeight != 20 {
		t.Errorf("message %q, trafficWeight %d", ws.Message, *ws.TrafficWeight)
	}

	// The canaries are pinned at 3 now; east has them, west has 2.
	s, ws, wave, status = trafficFixture(3, 3)
	status["west"] = workv1alpha1.ClusterStatus{CanaryHealth: workv1alpha1.HealthProgressing, CanaryAvailableReplicas: ptr.To[int32](2)}
	if done, _ := c.trafficStep(ctx, s, ws, wave, 2, status); done || weights(s.revs)["east"] != 20 {
		t.Errorf("every cluster of the wave must have its replicas first: done %v, weights %v", done, weights(s.revs))
	}
	if !strings.HasSuffix(ws.Message, "canary scaling for 60%: 2/3 available in west") {
		t.Errorf("message %q", ws.Message)
	}

	s, ws, wave, status = trafficFixture(3, 3)
	if done, err := c.trafficStep(ctx, s, ws, wave, 2, status); !done || err != nil {
		t.Fatalf("available everywhere: done %v, err %v (%s)", done, err, ws.Message)
	}
	if d := cmp.Diff(map[string]int32{"east": 60, "west": 60}, weights(s.revs)); d != "" {
		t.Errorf("routes (-want +got):\n%s", d)
	}
	if *ws.TrafficWeight != 60 {
		t.Errorf("trafficWeight %d, want 60", *ws.TrafficWeight)
	}
}

func TestTrafficStepLowersTheWeightAtOnce(t *testing.T) {
	s, ws, wave, status := trafficFixture(0, 1)
	ws.TrafficWeight = ptr.To[int32](60)
	wave.Spec.Steps[2].SetWeight = ptr.To[int32](10)
	for i := range s.revs.Canaries {
		s.revs.Canaries[i].Weight = ptr.To[int32](60)
	}
	for cl, cs := range status {
		cs.CanaryHealth = workv1alpha1.HealthProgressing
		status[cl] = cs
	}
	if done, _ := (&Controller{}).trafficStep(context.Background(), s, ws, wave, 2, status); done {
		t.Fatal("the canaries are not available: the step waits")
	}
	if d := cmp.Diff(map[string]int32{"east": 10, "west": 10}, weights(s.revs)); d != "" {
		t.Errorf("a lower weight goes to the routes while the step waits (-want +got):\n%s", d)
	}
}

func TestSetTrafficCeiling(t *testing.T) {
	s, _, _, _ := trafficFixture(1, 1)
	s.revs.Canaries[1].Revision = 1 // west runs an earlier release's canary
	ts := trafficStep{weight: 60}
	s.setTraffic([]string{"east", "west"}, ts, ptr.To[int32](100))
	if d := cmp.Diff(map[string]int32{"east": 20, "west": 0}, weights(s.revs)); d != "" {
		t.Errorf("no cluster's routes rise above what they carry for this revision (-want +got):\n%s", d)
	}
	s.setTraffic([]string{"east", "west"}, ts, nil)
	if d := cmp.Diff(map[string]int32{"east": 60, "west": 60}, weights(s.revs)); d != "" {
		t.Errorf("without a ceiling (-want +got):\n%s", d)
	}
}
