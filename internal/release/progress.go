package release

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// WaveSummary is status.wave: where the release stands, in the words of the WAVE column.
// Waves count from 1 ("1/3 canary"), the canary step in progress too ("1/3 canary step 2/4");
// a release that succeeded is "done", one that stopped names the wave it stopped in. It reads
// only the status being written, so it never disagrees with currentWave and waves.
func WaveSummary(rel *rolloutv1alpha1.Release, status *rolloutv1alpha1.ReleaseStatus) string {
	n := len(status.Waves)
	if status.Phase == rolloutv1alpha1.ReleaseSucceeded {
		return "done"
	}
	if n == 0 {
		return "not started"
	}
	i := min(int(status.CurrentWave), n-1) // past the end only once every wave passed
	at := fmt.Sprintf("%d/%d %s", i+1, n, status.Waves[i].Name)
	if steps := WaveSteps(rel, status.Waves[i].Name); len(steps) > 0 && int(status.Waves[i].CurrentStep) < len(steps) &&
		status.Waves[i].Phase != rolloutv1alpha1.WavePending {
		at += fmt.Sprintf(" step %d/%d", status.Waves[i].CurrentStep+1, len(steps))
	}
	if Final(status.Phase) {
		return "stopped at " + at
	}
	return at
}

// WaveSteps are the canary steps of the release's wave called name; none for the rest wave.
func WaveSteps(rel *rolloutv1alpha1.Release, name string) []policyv1alpha1.CanaryStep {
	for i := range rel.Spec.Strategy.Waves {
		if rel.Spec.Strategy.Waves[i].Name == name {
			return rel.Spec.Strategy.Waves[i].Steps
		}
	}
	return nil
}

// StepLabel names canary step k (from 0) of steps as people count it, with the canary weight
// in force there: "step 2/4 setWeight 40%", "step 3/4 pause 1m (canary 40%)",
// "step 4/4 pause until promote (canary 40%)", "step 1/4 analysis (canary 0%)".
func StepLabel(steps []policyv1alpha1.CanaryStep, k int) string {
	if k < 0 || k >= len(steps) {
		return fmt.Sprintf("steps %d/%d done", len(steps), len(steps))
	}
	label := fmt.Sprintf("step %d/%d ", k+1, len(steps))
	weight := int32(0)
	for _, st := range steps[:k] {
		if st.SetWeight != nil {
			weight = *st.SetWeight
		}
	}
	st := steps[k]
	switch {
	case st.SetWeight != nil:
		return label + fmt.Sprintf("setWeight %d%%", *st.SetWeight)
	case st.Pause != nil && st.Pause.Duration != nil:
		d := st.Pause.Duration.String()
		if st.Pause.Duration.Type == intstr.Int {
			d += "s" // whole seconds, as Argo Rollouts writes them
		}
		return label + fmt.Sprintf("pause %s (canary %d%%)", d, weight)
	case st.Pause != nil:
		return label + fmt.Sprintf("pause until promote (canary %d%%)", weight)
	case st.SetCanaryScale != nil && st.SetCanaryScale.Replicas != nil:
		return label + fmt.Sprintf("setCanaryScale %d replicas (traffic %d%%)", *st.SetCanaryScale.Replicas, weight)
	case st.SetCanaryScale != nil && st.SetCanaryScale.Weight != nil:
		return label + fmt.Sprintf("setCanaryScale %d%% (traffic %d%%)", *st.SetCanaryScale.Weight, weight)
	case st.SetCanaryScale != nil:
		return label + fmt.Sprintf("setCanaryScale matchTrafficWeight (traffic %d%%)", weight)
	case st.SetHeaderRoute != nil && len(st.SetHeaderRoute.Match) == 0:
		return label + "setHeaderRoute off"
	case st.SetHeaderRoute != nil:
		var hs []string
		for _, h := range st.SetHeaderRoute.Match {
			hs = append(hs, h.Name)
		}
		return label + "setHeaderRoute " + strings.Join(hs, ",")
	default:
		return label + fmt.Sprintf("analysis (canary %d%%)", weight)
	}
}

// rolledBackTo says where a rollback left the clusters it returned: on the stable revision,
// or, for a staged first release (stable 0), handed back to unmanaged with their objects and
// pods left running.
func rolledBackTo(stable int64) string {
	if stable == 0 {
		return "handed back to unmanaged (objects and pods left running)"
	}
	return fmt.Sprintf("rolled back to revision %d", stable)
}
