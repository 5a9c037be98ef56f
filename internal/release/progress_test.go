package release

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/config/crd"
	"github.com/flotilla-dev/flotilla/internal/revision"
)

// status.wave counts waves and steps from 1, says "done" once the release succeeded and names
// where a stopped release stopped, instead of an index that is empty for wave 0 and past the
// end once every wave passed.
func TestWaveSummary(t *testing.T) {
	rel := &rolloutv1alpha1.Release{Spec: rolloutv1alpha1.ReleaseSpec{Strategy: policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
		{Name: "canary", Steps: []policyv1alpha1.CanaryStep{{SetWeight: ptr.To(int32(20))}, {Pause: &policyv1alpha1.PauseStep{}}, {SetWeight: ptr.To(int32(60))}, {Pause: &policyv1alpha1.PauseStep{}}}},
		{Name: "early"},
	}}}}
	waves := func(phases ...rolloutv1alpha1.WavePhase) []rolloutv1alpha1.WaveStatus {
		pending := rolloutv1alpha1.WavePending
		out := []rolloutv1alpha1.WaveStatus{{Name: "canary", Phase: pending}, {Name: "early", Phase: pending}, {Name: "rest", Phase: pending}}
		for i, p := range phases {
			out[i].Phase = p
		}
		return out
	}
	inStep := waves(rolloutv1alpha1.WaveWaitingForApproval)
	inStep[0].CurrentStep = 1
	for _, tt := range []struct {
		name   string
		status rolloutv1alpha1.ReleaseStatus
		want   string
	}{
		{"nothing resolved yet", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing}, "not started"},
		{"wave 0 before its first step", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Waves: waves()}, "1/3 canary"},
		{"wave 0 at its second step", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Waves: inStep}, "1/3 canary step 2/4"},
		{"wave 1", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleasePaused, CurrentWave: 1, Waves: waves(rolloutv1alpha1.WaveSucceeded, rolloutv1alpha1.WaveUpdating)}, "2/3 early"},
		{"every wave passed", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseSucceeded, CurrentWave: 3, Waves: waves(rolloutv1alpha1.WaveSucceeded, rolloutv1alpha1.WaveSucceeded, rolloutv1alpha1.WaveSucceeded)}, "done"},
		{"rolled back in wave 1", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseRolledBack, CurrentWave: 1, Waves: waves(rolloutv1alpha1.WaveRolledBack, rolloutv1alpha1.WaveRolledBack)}, "stopped at 2/3 early"},
		{"superseded in a step", rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseSuperseded, Waves: inStep}, "stopped at 1/3 canary step 2/4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := WaveSummary(rel, &tt.status); got != tt.want {
				t.Errorf("WaveSummary = %q, want %q", got, tt.want)
			}
		})
	}
}

// Steps are labelled as people count them, with the canary weight in force at each.
func TestStepLabel(t *testing.T) {
	steps := []policyv1alpha1.CanaryStep{
		{SetWeight: ptr.To(int32(20))},
		{Pause: &policyv1alpha1.PauseStep{Duration: ptr.To(intstr.FromString("1m"))}},
		{SetWeight: ptr.To(int32(40))},
		{Pause: &policyv1alpha1.PauseStep{Duration: ptr.To(intstr.FromInt32(30))}},
		{Analysis: &policyv1alpha1.AnalysisGate{}},
		{Pause: &policyv1alpha1.PauseStep{}},
	}
	want := []string{
		"step 1/6 setWeight 20%",
		"step 2/6 pause 1m (canary 20%)",
		"step 3/6 setWeight 40%",
		"step 4/6 pause 30s (canary 40%)",
		"step 5/6 analysis (canary 40%)",
		"step 6/6 pause until promote (canary 40%)",
		"steps 6/6 done",
	}
	var got []string
	for k := range len(steps) + 1 {
		got = append(got, revision.StepLabel(steps, k))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

// The WAVE printer column of kubectl get releases shows status.wave.
func TestReleaseWaveColumnShowsStatusWave(t *testing.T) {
	for _, doc := range bytes.Split(crd.YAML(), []byte("\n---\n")) {
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(bytes.TrimPrefix(doc, []byte("---\n")), c); err != nil || c.Name != "releases.rollout.flotilla.dev" {
			continue
		}
		for _, col := range c.Spec.Versions[0].AdditionalPrinterColumns {
			if col.Name == "Wave" {
				if col.JSONPath != ".status.wave" || col.Type != "string" {
					t.Errorf("Wave column reads %s (%s); want .status.wave (string): run make generate", col.JSONPath, col.Type)
				}
				return
			}
		}
		t.Fatal("releases.rollout.flotilla.dev has no Wave column")
	}
	t.Fatal("no CRD releases.rollout.flotilla.dev in config/crd/bases")
}
