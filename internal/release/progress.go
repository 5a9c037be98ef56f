package release

import (
	"fmt"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/revision"
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
	if steps := revision.WaveSteps(rel, status.Waves[i].Name); len(steps) > 0 && int(status.Waves[i].CurrentStep) < len(steps) &&
		status.Waves[i].Phase != rolloutv1alpha1.WavePending {
		at += fmt.Sprintf(" step %d/%d", status.Waves[i].CurrentStep+1, len(steps))
	}
	if Final(status.Phase) {
		return "stopped at " + at
	}
	return at
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
