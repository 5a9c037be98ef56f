package release

import (
	"fmt"
	"strings"
	"time"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// waveState is everything the verdict on one wave depends on: its clusters, where each is
// pinned and what each reports, its clock marks, its gates and the time. judgeWave reads
// nothing else (no client, no clock), so the state machine of a wave is tested by tables.
type waveState struct {
	Name     string
	Revision int64
	Clusters []string
	Pinned   map[string]int64                      // cluster -> revision it renders
	Reported map[string]workv1alpha1.ClusterStatus // cluster -> what the binding says of it
	// Batch is how many clusters may be on their way at once (maxUnavailable).
	Batch int
	// Fresh: the binding's status was computed for its current pins; a stale one is not judged.
	Fresh bool
	// Held are clusters change windows hold, with why: they are not pinned, and the wave's
	// progress deadline does not run for them.
	Held map[string]string

	Now           time.Time
	StartedAt     time.Time
	ProgressSince *time.Time // the current batch's start, if any
	HealthyAt     *time.Time // when every cluster first ran the revision healthy
	Deadline      time.Duration

	// Gated: the wave has gates and was not promoted past them.
	Gated          bool
	Bake           time.Duration // 0: none
	Analysis       bool          // an analysis gate
	AnalysisPassed bool          // the caller ran that analysis and it passed
	Approval       bool
	// Next is the name of the wave after this one, "" for the last.
	Next string
}

// waveVerdict is what the wave does now.
type waveVerdict struct {
	Pin           []string // clusters to pin to the revision now (their batch starts)
	Clusters      []rolloutv1alpha1.ClusterRelease
	ProgressSince *time.Time // a batch started now: the deadline counts from here

	// Judged is false when the binding's status was stale: nothing below is set.
	Judged bool
	// Fail is why the wave failed ("" when it did not).
	Fail string
	// Healthy: every cluster runs the revision healthy (the canaries may go).
	Healthy   bool
	HealthyAt *time.Time // set when Healthy
	Phase     rolloutv1alpha1.WavePhase
	Message   string
	After     time.Duration // look again then (deadline, bake)
	// NeedAnalysis: the gates reached the analysis; run it and judge again with
	// AnalysisPassed once it passed.
	NeedAnalysis bool
	Done         bool
}

// judgeWave decides one wave's next move: which clusters start (maxUnavailable at a time),
// whether it failed (a cluster Degraded on the revision, the progress deadline passed),
// and which gate it stands at (bake, analysis, approval) once every cluster runs the
// revision healthy.
func judgeWave(st waveState) waveVerdict {
	var v waveVerdict
	pinned := func(cl string) int64 { return st.Pinned[cl] }
	started := map[string]bool{}
	runningHealthy := func(cs workv1alpha1.ClusterStatus) bool {
		return cs.Applied && cs.Revision == st.Revision && cs.Health == workv1alpha1.HealthHealthy
	}
	inFlight, healthy := 0, 0
	var degraded []string
	for _, cl := range st.Clusters {
		cs := st.Reported[cl]
		running := cs.Applied && cs.Revision == st.Revision
		switch {
		case running && cs.Health == workv1alpha1.HealthHealthy:
			healthy++
		case running && cs.Health == workv1alpha1.HealthDegraded:
			if msg := st.Reported[cl].Message; msg != "" {
				cl += " (" + msg + ")"
			}
			degraded = append(degraded, cl)
		}
		if pinned(cl) == st.Revision && !runningHealthy(cs) {
			inFlight++
		}
	}
	waitingForWindows := 0
	for _, cl := range st.Clusters {
		held := st.Held[cl] != "" && pinned(cl) != st.Revision
		if held {
			waitingForWindows++
		}
		if pinned(cl) != st.Revision && inFlight < st.Batch && !held {
			v.Pin = append(v.Pin, cl)
			started[cl] = true
			inFlight++
			now := st.Now
			v.ProgressSince = &now // each batch gets the whole deadline
		}
		cs := st.Reported[cl]
		cr := rolloutv1alpha1.ClusterRelease{Name: cl, Phase: rolloutv1alpha1.ClusterPending}
		switch running := cs.Applied && cs.Revision == st.Revision; {
		case held:
			cr.Message = st.Held[cl]
		case pinned(cl) != st.Revision && !started[cl]:
			cr.Message = "waits for a free slot (maxUnavailable)"
		case running && cs.Health == workv1alpha1.HealthHealthy:
			cr.Phase = rolloutv1alpha1.ClusterHealthy
		case running && cs.Health == workv1alpha1.HealthDegraded:
			cr.Phase, cr.Message = rolloutv1alpha1.ClusterDegraded, orText(cs.Message, "the workload is Degraded")
		default:
			cr.Phase = rolloutv1alpha1.ClusterUpdating
			cr.Message = fmt.Sprintf("waiting for revision %d to run healthy (now: revision %d, %s)", st.Revision, cs.Revision, orText(string(cs.Health), "no status yet"))
		}
		v.Clusters = append(v.Clusters, cr)
	}
	if !st.Fresh {
		return v
	}
	v.Judged = true
	if len(degraded) > 0 {
		v.Fail = fmt.Sprintf("wave %s: Degraded in %s", st.Name, strings.Join(degraded, ", "))
		return v
	}
	if healthy < len(st.Clusters) {
		v.Phase = rolloutv1alpha1.WaveUpdating
		v.Message = fmt.Sprintf("%d of %d clusters run revision %d healthy", healthy, len(st.Clusters), st.Revision)
		since := st.StartedAt
		if v.ProgressSince != nil {
			since = *v.ProgressSince
		} else if st.ProgressSince != nil {
			since = *st.ProgressSince
		}
		if healthy+waitingForWindows == len(st.Clusters) && v.ProgressSince == nil {
			return v // only windows hold the rest: no deadline runs for them
		}
		if left := st.Deadline - st.Now.Sub(since); left <= 0 {
			v.Fail = fmt.Sprintf("wave %s: not healthy within the progress deadline %s", st.Name, st.Deadline)
		} else {
			v.After = left
		}
		return v
	}
	v.Healthy = true
	healthyAt := st.Now
	if st.HealthyAt != nil {
		healthyAt = *st.HealthyAt
	}
	v.HealthyAt = &healthyAt
	if st.Gated {
		if st.Bake > 0 {
			if left := st.Bake - st.Now.Sub(healthyAt); left > 0 {
				v.Phase, v.Message, v.After = rolloutv1alpha1.WaveBaking, fmt.Sprintf("healthy; baking for %s more", left.Round(time.Second)), left
				return v
			}
		}
		if st.Analysis && !st.AnalysisPassed {
			v.NeedAnalysis = true
			return v
		}
		if st.Approval {
			// A wave's gates run once it runs the revision: an approval holds the next wave.
			v.Phase, v.Message = rolloutv1alpha1.WaveWaitingForApproval, "healthy; waiting for `flotilla release promote` before wave "+st.Next+" starts"
			if st.Next == "" {
				v.Message = "healthy; waiting for `flotilla release promote` to finish the release (gates run after their wave: to hold clusters back, gate the wave before theirs)"
			}
			return v
		}
	}
	v.Phase, v.Message, v.Done = rolloutv1alpha1.WaveSucceeded, fmt.Sprintf("revision %d runs healthy in all %d clusters", st.Revision, len(st.Clusters)), true
	if len(st.Clusters) == 1 {
		v.Message = fmt.Sprintf("revision %d runs healthy in %s", st.Revision, st.Clusters[0])
	}
	return v
}
