package release

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

func TestJudgeWaveLeavesHeldClustersUnpinnedWithoutADeadline(t *testing.T) {
	held := map[string]string{"west": "held by change window freeze until 2026-11-23 14:00:00 UTC"}
	v := judgeWave(wave(func(st *waveState) { st.Held = held }))
	if strings.Join(v.Pin, ",") != "east,europe" || v.Clusters[1].Message != held["west"] || v.Clusters[1].Phase != rolloutv1alpha1.ClusterPending {
		t.Fatalf("pins %v clusters %+v", v.Pin, v.Clusters)
	}
	// East and europe run it healthy, west still held, long past the deadline: no failure.
	v = judgeWave(wave(func(st *waveState) {
		st.Held, st.Now = held, judgeT0.Add(time.Hour)
		for _, cl := range []string{"east", "europe"} {
			st.Pinned[cl], st.Reported[cl] = 2, runs(2, workv1alpha1.HealthHealthy)
		}
	}))
	if v.Fail != "" || v.Done || v.Phase != rolloutv1alpha1.WaveUpdating || len(v.Pin) != 0 {
		t.Fatalf("%+v", v)
	}
}

// A deny window over region=west holds the release before west: east takes the revision,
// west waits saying which window holds it and until when. A hard freeze ignores an override;
// an overridable one lets it through and the release records the window; a deleted window
// frees the next release at once.
func TestChangeWindowsHoldAReleaseInTheClustersTheySelect(t *testing.T) {
	ctx := context.Background()
	c, b := releaseFixture(t, &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
		{Name: "east", ClusterNames: []string{"east"}}, {Name: "west", ClusterNames: []string{"west"}}}},
		healthyAsPinned)
	west := &clusterv1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: "west"}, west); err != nil {
		t.Fatal(err)
	}
	west.Labels = map[string]string{"region": "west"}
	if err := c.Update(ctx, west); err != nil {
		t.Fatal(err)
	}
	stableRevision1(t, c, b)
	freeze := &rolloutv1alpha1.ClusterChangeWindow{ObjectMeta: metav1.ObjectMeta{Name: "freeze"}, Spec: rolloutv1alpha1.ChangeWindowSpec{
		Kind: rolloutv1alpha1.WindowDeny, Schedule: "* * * * *", Duration: "2h", Overridable: ptr.To(false),
		ClusterSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "west"}}}}
	if err := c.Create(ctx, freeze); err != nil {
		t.Fatal(err)
	}
	changeImage(t, c, "registry.example/web:2")
	rel := &rolloutv1alpha1.Release{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("release %s: %+v", rel.Name, rel.Status)
		}
	})
	get := func(name string) *rolloutv1alpha1.Release {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, rel); err != nil {
			return &rolloutv1alpha1.Release{}
		}
		return rel
	}
	eventually(t, "east ran revision 2 and west waits for the window", func() bool {
		r := get("web-deployment-r2")
		return r.Status.CurrentWave == 1 && len(r.Status.Waves) == 2 && len(r.Status.Waves[1].Clusters) == 1 &&
			strings.HasPrefix(r.Status.Waves[1].Clusters[0].Message, "held by change window freeze until ")
	})
	if !strings.HasPrefix(rel.Status.Message, "held: wave 2/2 (west) not started: west held by change window freeze until") || rel.Status.Phase != rolloutv1alpha1.ReleaseProgressing {
		t.Errorf("release %s: %q", rel.Status.Phase, rel.Status.Message)
	}
	cur := &workv1alpha1.ResourceBinding{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(b), cur); err != nil || cur.Spec.Revisions.RevisionFor("west") != 1 {
		t.Fatalf("west renders revision %d while the window holds it", cur.Spec.Revisions.RevisionFor("west"))
	}

	// A hard freeze: the override does not pass it, and the message says so.
	rel.Spec.WindowOverride = &rolloutv1alpha1.WindowOverride{Reason: "CVE-2026-1234"}
	if err := c.Update(ctx, rel); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the release says the window allows no override", func() bool {
		return strings.Contains(get("web-deployment-r2").Status.Message, "no override")
	})
	// Overridable now: the override passes and is recorded.
	if err := c.Get(ctx, client.ObjectKeyFromObject(freeze), freeze); err != nil {
		t.Fatal(err)
	}
	freeze.Spec.Overridable = ptr.To(true)
	if err := c.Update(ctx, freeze); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the overriding release succeeded", func() bool {
		r := get("web-deployment-r2")
		return r.Status.Phase == rolloutv1alpha1.ReleaseSucceeded && slices.Equal(r.Status.OverriddenWindows, []string{"freeze"}) &&
			slices.Equal(r.Status.Waves[1].Clusters[0].OverriddenWindows, []string{"freeze"}) && len(r.Status.Waves[0].Clusters[0].OverriddenWindows) == 0
	})

	// The next release waits again; deleting the window frees it.
	changeImage(t, c, "registry.example/web:3")
	eventually(t, "release r3 waits before west", func() bool {
		return strings.HasPrefix(get("web-deployment-r3").Status.Message, "held: wave 2/2 (west)")
	})
	if err := c.Delete(ctx, freeze); err != nil {
		t.Fatal(err)
	}
	eventually(t, "release r3 succeeded once the window is gone", func() bool {
		r := get("web-deployment-r3")
		return r.Status.Phase == rolloutv1alpha1.ReleaseSucceeded && len(r.Status.OverriddenWindows) == 0
	})
}
