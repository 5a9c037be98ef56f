package release

import (
	"strings"
	"testing"
	"time"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

var judgeT0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time { t := judgeT0.Add(d); return &t }

// wave of east, west, europe for revision 2, started at judgeT0, now 30s later.
func wave(mut func(*waveState)) waveState {
	st := waveState{Name: "second", Revision: 2, Clusters: []string{"east", "west", "europe"},
		Pinned: map[string]int64{"east": 1, "west": 1, "europe": 1}, Reported: map[string]workv1alpha1.ClusterStatus{},
		Batch: 3, Fresh: true, Now: judgeT0.Add(30 * time.Second), StartedAt: judgeT0, Deadline: 10 * time.Minute}
	if mut != nil {
		mut(&st)
	}
	return st
}

func runs(rev int64, h workv1alpha1.Health) workv1alpha1.ClusterStatus {
	return workv1alpha1.ClusterStatus{Applied: true, Revision: rev, Health: h}
}

func allOn(rev int64, h workv1alpha1.Health) func(*waveState) {
	return func(st *waveState) {
		for _, cl := range st.Clusters {
			st.Pinned[cl] = rev
			st.Reported[cl] = runs(rev, h)
		}
	}
}

func TestJudgeWave(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state waveState
		check func(t *testing.T, v waveVerdict)
	}{
		{"a new wave pins every cluster and waits", wave(nil), func(t *testing.T, v waveVerdict) {
			if strings.Join(v.Pin, ",") != "east,west,europe" || v.ProgressSince == nil || !v.ProgressSince.Equal(judgeT0.Add(30*time.Second)) {
				t.Fatalf("pins %v since %v", v.Pin, v.ProgressSince)
			}
			if v.Phase != rolloutv1alpha1.WaveUpdating || v.After != 10*time.Minute || v.Done {
				t.Fatalf("%+v", v)
			}
		}},
		{"maxUnavailable 1 starts one, the others wait for a slot", wave(func(st *waveState) { st.Batch = 1 }), func(t *testing.T, v waveVerdict) {
			if strings.Join(v.Pin, ",") != "east" {
				t.Fatalf("pins %v", v.Pin)
			}
			if v.Clusters[1].Message != "waits for a free slot (maxUnavailable)" || v.Clusters[0].Phase != rolloutv1alpha1.ClusterUpdating {
				t.Fatalf("%+v", v.Clusters)
			}
		}},
		{"the next batch starts when the first runs healthy", wave(func(st *waveState) {
			st.Batch = 1
			st.Pinned["east"] = 2
			st.Reported["east"] = runs(2, workv1alpha1.HealthHealthy)
		}), func(t *testing.T, v waveVerdict) {
			if strings.Join(v.Pin, ",") != "west" {
				t.Fatalf("pins %v", v.Pin)
			}
		}},
		{"a stale binding status is not judged", wave(func(st *waveState) { st.Fresh = false; allOn(2, workv1alpha1.HealthDegraded)(st) }), func(t *testing.T, v waveVerdict) {
			if v.Judged || v.Fail != "" {
				t.Fatalf("%+v", v)
			}
		}},
		{"degraded on the revision fails", wave(func(st *waveState) {
			allOn(2, workv1alpha1.HealthHealthy)(st)
			st.Reported["west"] = runs(2, workv1alpha1.HealthDegraded)
		}), func(t *testing.T, v waveVerdict) {
			if v.Fail != "wave second: Degraded in west" {
				t.Fatalf("fail %q", v.Fail)
			}
		}},
		{"degraded on the old revision is no verdict on the new one", wave(func(st *waveState) {
			st.Pinned["west"], st.Reported["west"] = 2, runs(1, workv1alpha1.HealthDegraded)
		}), func(t *testing.T, v waveVerdict) {
			if v.Fail != "" || v.Phase != rolloutv1alpha1.WaveUpdating {
				t.Fatalf("%+v", v)
			}
		}},
		{"the progress deadline passed", wave(func(st *waveState) {
			for _, cl := range st.Clusters {
				st.Pinned[cl] = 2
			}
			st.ProgressSince = at(0)
			st.Now = judgeT0.Add(10 * time.Minute)
		}), func(t *testing.T, v waveVerdict) {
			if !strings.Contains(v.Fail, "not healthy within the progress deadline 10m0s") {
				t.Fatalf("fail %q", v.Fail)
			}
		}},
		{"healthy without gates succeeds", wave(allOn(2, workv1alpha1.HealthHealthy)), func(t *testing.T, v waveVerdict) {
			if !v.Done || v.Phase != rolloutv1alpha1.WaveSucceeded || v.Message != "revision 2 runs healthy in all 3 clusters" {
				t.Fatalf("%+v", v)
			}
		}},
		{"healthy, baking", wave(func(st *waveState) {
			allOn(2, workv1alpha1.HealthHealthy)(st)
			st.Gated, st.Bake, st.HealthyAt = true, time.Minute, at(10*time.Second)
		}), func(t *testing.T, v waveVerdict) {
			if v.Phase != rolloutv1alpha1.WaveBaking || v.After != 40*time.Second || v.Done {
				t.Fatalf("%+v", v)
			}
		}},
		{"baked, analysis next", wave(func(st *waveState) {
			allOn(2, workv1alpha1.HealthHealthy)(st)
			st.Gated, st.Bake, st.HealthyAt, st.Analysis, st.Approval = true, time.Second, at(0), true, true
		}), func(t *testing.T, v waveVerdict) {
			if !v.NeedAnalysis || v.Done {
				t.Fatalf("%+v", v)
			}
		}},
		{"analysis passed, approval next", wave(func(st *waveState) {
			allOn(2, workv1alpha1.HealthHealthy)(st)
			st.Gated, st.Analysis, st.AnalysisPassed, st.Approval, st.Next = true, true, true, true, "prod"
		}), func(t *testing.T, v waveVerdict) {
			if v.Phase != rolloutv1alpha1.WaveWaitingForApproval || v.Done || !strings.Contains(v.Message, "before wave prod starts") {
				t.Fatalf("%+v", v)
			}
		}},
		{"an approval on the last wave says it only finishes the release", wave(func(st *waveState) {
			allOn(2, workv1alpha1.HealthHealthy)(st)
			st.Gated, st.Approval = true, true
		}), func(t *testing.T, v waveVerdict) {
			if v.Phase != rolloutv1alpha1.WaveWaitingForApproval || !strings.Contains(v.Message, "to finish the release (gates run after their wave") {
				t.Fatalf("%+v", v)
			}
		}},
		{"promoted past the gates succeeds", wave(func(st *waveState) {
			allOn(2, workv1alpha1.HealthHealthy)(st)
			st.Gated = false
			st.Approval = true
		}), func(t *testing.T, v waveVerdict) {
			if !v.Done {
				t.Fatalf("%+v", v)
			}
		}},
		{"healthy keeps when it first was", wave(func(st *waveState) {
			allOn(2, workv1alpha1.HealthHealthy)(st)
			st.HealthyAt = at(5 * time.Second)
		}), func(t *testing.T, v waveVerdict) {
			if !v.HealthyAt.Equal(judgeT0.Add(5 * time.Second)) {
				t.Fatalf("healthyAt %v", v.HealthyAt)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, judgeWave(tc.state)) })
	}
}
