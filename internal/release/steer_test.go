package release_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/release"
)

// webRelease is the release of revision rev of shop/web from stable.
func webRelease(rev, stable int64, status rolloutv1alpha1.ReleaseStatus, waves ...policyv1alpha1.Wave) *rolloutv1alpha1.Release {
	return &rolloutv1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("web-deployment-r%d", rev)},
		Spec: rolloutv1alpha1.ReleaseSpec{
			Binding:  rolloutv1alpha1.BindingReference{Kind: "ResourceBinding", Name: "web-deployment"},
			Resource: rolloutv1alpha1.ResourceReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
			Revision: rev, StableRevision: stable,
			Strategy: policyv1alpha1.RolloutStrategy{Waves: waves},
		},
		Status: status,
	}
}

func fakeClient(objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(objs...).WithStatusSubresource(&rolloutv1alpha1.Release{}).Build()
}

func intstrOf(s string) intstr.IntOrString { return intstr.FromString(s) }

// Steering a release answers only what happened: a command that would change nothing (the
// release is over, the wave stands where promote cannot help, it is paused already) fails
// naming the release and what to do, and leaves the release as it was.
func TestSteeringRefusesWhatWouldChangeNothing(t *testing.T) {
	steps := []policyv1alpha1.Wave{{Name: "canary", ClusterNames: []string{"east"}, Steps: []policyv1alpha1.CanaryStep{
		{SetWeight: ptr.To(int32(20))}, {Analysis: &policyv1alpha1.AnalysisGate{}}, {Pause: &policyv1alpha1.PauseStep{Duration: ptr.To(intstrOf("1m"))}}, {Pause: &policyv1alpha1.PauseStep{}},
	}}}
	gated := []policyv1alpha1.Wave{{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{ManualApproval: true}}, {Name: "second", ClusterNames: []string{"west"}}}
	atStep := func(k int32, phase rolloutv1alpha1.WavePhase) rolloutv1alpha1.ReleaseStatus {
		return rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Waves: []rolloutv1alpha1.WaveStatus{{Name: "canary", Phase: phase, CurrentStep: k, AnalysisRun: "web-deployment-r2-canary-step1"}}}
	}
	inWave := func(i int32, phase rolloutv1alpha1.WavePhase) rolloutv1alpha1.ReleaseStatus {
		waves := []rolloutv1alpha1.WaveStatus{{Name: "first", Phase: rolloutv1alpha1.WaveSucceeded}, {Name: "second", Phase: rolloutv1alpha1.WavePending}}
		waves[i].Phase = phase
		return rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, CurrentWave: i, Waves: waves}
	}
	final := func(phase rolloutv1alpha1.ReleasePhase) rolloutv1alpha1.ReleaseStatus {
		return rolloutv1alpha1.ReleaseStatus{Phase: phase, CurrentWave: 2, Waves: []rolloutv1alpha1.WaveStatus{{Name: "first"}, {Name: "second"}}}
	}
	held := inWave(0, rolloutv1alpha1.WaveAnalyzing)
	held.Conditions = []metav1.Condition{{Type: release.ConditionValid, Status: metav1.ConditionFalse, Reason: "InvalidAnalysis", Message: `analysis for first: AnalysisTemplate "smoke": {{args.image}} is not declared`}}
	tests := []struct {
		name    string
		verb    string
		full    bool
		waves   []policyv1alpha1.Wave
		status  rolloutv1alpha1.ReleaseStatus
		spec    func(*rolloutv1alpha1.ReleaseSpec)
		wantErr string
	}{
		{name: "promote succeeded", verb: "promote", waves: gated, status: final(rolloutv1alpha1.ReleaseSucceeded), wantErr: "release/web-deployment-r2 succeeded: revision 2 runs in every cluster, there is nothing to promote"},
		{name: "promote --full aborted", verb: "promote", full: true, waves: gated, status: final(rolloutv1alpha1.ReleaseAborted), wantErr: "is Aborted, there is nothing to promote (`flotilla release retry`"},
		{name: "promote rolled back", verb: "promote", waves: gated, status: final(rolloutv1alpha1.ReleaseRolledBack), wantErr: "is RolledBack, there is nothing to promote"},
		{name: "promote superseded", verb: "promote", waves: gated, status: final(rolloutv1alpha1.ReleaseSuperseded), wantErr: "is Superseded"},
		{name: "promote held by an analysis mistake", verb: "promote", waves: gated, status: held, wantErr: "is held: analysis for first: AnalysisTemplate \"smoke\": {{args.image}} is not declared; promote cannot pass that"},
		{name: "promote at a running analysis step", verb: "promote", waves: steps, status: atStep(1, rolloutv1alpha1.WaveAnalyzing),
			wantErr: "wave 1/1 canary stands at step 2/4 analysis (canary 20%), analysis web-deployment-r2-canary-step1 Analyzing; promote passes an analysis step only once it is Inconclusive"},
		{name: "promote at a timed pause", verb: "promote", waves: steps, status: atStep(2, rolloutv1alpha1.WaveBaking), wantErr: "stands at step 3/4 pause 1m (canary 20%), which ends by itself"},
		{name: "promote while canaries start", verb: "promote", waves: steps, status: atStep(0, rolloutv1alpha1.WaveUpdating), wantErr: "stands at step 1/4 setWeight 20%, which ends by itself; there is no pause to pass (now: "},
		{name: "promote a wave without gates", verb: "promote", waves: gated, status: inWave(1, rolloutv1alpha1.WaveUpdating), wantErr: "wave 2/2 second has no gate to pass"},
		{name: "promote twice", verb: "promote", waves: gated, status: inWave(0, rolloutv1alpha1.WaveWaitingForApproval), spec: func(s *rolloutv1alpha1.ReleaseSpec) { s.PromotedWave = ptr.To(int32(0)) }, wantErr: "the gates of wave 1/2 first are passed already"},
		{name: "promote after --full", verb: "promote", waves: steps, status: atStep(1, rolloutv1alpha1.WaveUpdating), spec: func(s *rolloutv1alpha1.ReleaseSpec) { s.PromoteFull = true }, wantErr: "is promoted in full already: it succeeds once every cluster runs revision 2 healthy"},
		{name: "pause succeeded", verb: "pause", waves: gated, status: final(rolloutv1alpha1.ReleaseSucceeded), wantErr: "there is nothing to pause"},
		{name: "pause paused", verb: "pause", waves: gated, status: inWave(0, rolloutv1alpha1.WaveUpdating), spec: func(s *rolloutv1alpha1.ReleaseSpec) { s.Paused = true }, wantErr: "is paused already"},
		{name: "resume running", verb: "resume", waves: gated, status: inWave(0, rolloutv1alpha1.WaveWaitingForApproval), wantErr: "is not paused; it waits for approval: `flotilla release promote` passes it"},
		{name: "resume aborted", verb: "resume", waves: gated, status: final(rolloutv1alpha1.ReleaseAborted), wantErr: "there is nothing to resume"},
		{name: "abort succeeded", verb: "abort", waves: gated, status: final(rolloutv1alpha1.ReleaseSucceeded), wantErr: "there is nothing to abort (`flotilla release undo` goes back)"},
		{name: "abort rolled back", verb: "abort", waves: gated, status: final(rolloutv1alpha1.ReleaseRolledBack), wantErr: "there is nothing to abort"},
		{name: "retry running", verb: "retry", waves: gated, status: inWave(0, rolloutv1alpha1.WaveUpdating), wantErr: "retry starts again only a release that was aborted, rolled back or holds a Failed wave"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rel := webRelease(2, 1, tt.status, tt.waves...)
			if tt.spec != nil {
				tt.spec(&rel.Spec)
			}
			c := fakeClient(rel.DeepCopy())
			what, err := release.SteerRelease(context.Background(), c, rel.DeepCopy(), tt.verb, release.SteerOptions{Full: tt.full, Command: "flotilla"})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("%s: error = %v\nwant it to contain %q (answer %q)", tt.verb, err, tt.wantErr, what)
			}
			if what != "" {
				t.Errorf("%s answered %q although it changed nothing", tt.verb, what)
			}
			got := &rolloutv1alpha1.Release{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(rel), got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(rel.Spec, got.Spec); diff != "" {
				t.Errorf("%s changed the release (-before +after):\n%s", tt.verb, diff)
			}
		})
	}
}

// What promote can pass it passes, and it says which.
func TestPromotePassesWhatWaits(t *testing.T) {
	steps := []policyv1alpha1.Wave{{Name: "canary", ClusterNames: []string{"east"}, Steps: []policyv1alpha1.CanaryStep{{SetWeight: ptr.To(int32(20))}, {Pause: &policyv1alpha1.PauseStep{}}}}}
	gated := []policyv1alpha1.Wave{{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{ManualApproval: true}}}
	status := func(name string, k int32, phase rolloutv1alpha1.WavePhase) rolloutv1alpha1.ReleaseStatus {
		return rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Waves: []rolloutv1alpha1.WaveStatus{{Name: name, Phase: phase, CurrentStep: k}}}
	}
	tests := []struct {
		name     string
		full     bool
		waves    []policyv1alpha1.Wave
		status   rolloutv1alpha1.ReleaseStatus
		wantSpec func(*rolloutv1alpha1.ReleaseSpec)
		wantOut  string
	}{
		{name: "a canary pause", waves: steps, status: status("canary", 1, rolloutv1alpha1.WaveWaitingForApproval),
			wantSpec: func(s *rolloutv1alpha1.ReleaseSpec) { s.PromotedStep = "canary/1" },
			wantOut:  "release/web-deployment-r2 promoted: wave 1/1 canary passes step 2/2 pause until promote (canary 20%)"},
		{name: "manual approval", waves: gated, status: status("first", 0, rolloutv1alpha1.WaveWaitingForApproval),
			wantSpec: func(s *rolloutv1alpha1.ReleaseSpec) { s.PromotedWave = ptr.To(int32(0)) },
			wantOut:  "release/web-deployment-r2 promoted: wave 1/1 first passes its gates (manual approval)"},
		{name: "full while canaries start", full: true, waves: steps, status: status("canary", 0, rolloutv1alpha1.WaveUpdating),
			wantSpec: func(s *rolloutv1alpha1.ReleaseSpec) { s.PromotedWave, s.PromoteFull = ptr.To(int32(0)), true },
			wantOut:  "release/web-deployment-r2 promoted in full: every remaining wave takes revision 2 at once, gates skipped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rel := webRelease(2, 1, tt.status, tt.waves...)
			c := fakeClient(rel.DeepCopy())
			what, err := release.SteerRelease(context.Background(), c, rel.DeepCopy(), "promote", release.SteerOptions{Full: tt.full, Command: "flotilla"})
			if err != nil {
				t.Fatal(err)
			}
			if what != tt.wantOut {
				t.Errorf("answer %q, want %q", what, tt.wantOut)
			}
			got := &rolloutv1alpha1.Release{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(rel), got); err != nil {
				t.Fatal(err)
			}
			want := rel.Spec.DeepCopy()
			tt.wantSpec(want)
			if diff := cmp.Diff(*want, got.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}
}

// Hints name the command as the user invoked it (the kubectl plugin, or the dashboard's host).
func TestSteeringHintsNameTheCommand(t *testing.T) {
	gated := []policyv1alpha1.Wave{{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{ManualApproval: true}}}
	rel := webRelease(2, 1, rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing,
		Waves: []rolloutv1alpha1.WaveStatus{{Name: "first", Phase: rolloutv1alpha1.WaveWaitingForApproval}}}, gated...)
	_, _, err := release.PlanSteer(rel, "resume", release.SteerOptions{Command: "kubectl flotilla"}, "")
	if err == nil || !strings.Contains(err.Error(), "`kubectl flotilla release promote` passes it") {
		t.Errorf("resume of a release waiting for approval: %v, want a hint naming `kubectl flotilla release promote`", err)
	}
	change, what, err := release.PlanSteer(rel, "pause", release.SteerOptions{}, "")
	if err != nil || what != "paused at wave 1/1 first" {
		t.Fatalf("pause: %q, %v", what, err)
	}
	change(&rel.Spec)
	if !rel.Spec.Paused {
		t.Error("the plan of pause does not pause")
	}
}

func TestPromoteOverrideWindowNeedsAReasonAndRespectsHardFreezes(t *testing.T) {
	held := rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, CurrentWave: 1,
		Waves:   []rolloutv1alpha1.WaveStatus{{Name: "east", Phase: rolloutv1alpha1.WaveSucceeded}, {Name: "west", Phase: rolloutv1alpha1.WavePending}},
		Message: "held: wave 2/2 (west) not started: west held by change window freeze until 2026-11-27 18:00:00 UTC"}
	rel := webRelease(2, 1, held, policyv1alpha1.Wave{Name: "east"}, policyv1alpha1.Wave{Name: "west"})
	if _, _, err := release.PlanSteer(rel, "promote", release.SteerOptions{OverrideWindow: true}, ""); err == nil || !strings.Contains(err.Error(), "--reason") {
		t.Errorf("no reason: %v", err)
	}
	change, what, err := release.PlanSteer(rel, "promote", release.SteerOptions{OverrideWindow: true, Reason: " CVE-2026-1234 "}, "")
	if err != nil || !strings.HasPrefix(what, "passes the change windows that hold it") {
		t.Fatalf("%q %v", what, err)
	}
	change(&rel.Spec)
	if rel.Spec.WindowOverride == nil || rel.Spec.WindowOverride.Reason != "CVE-2026-1234" || rel.Spec.PromotedWave != nil {
		t.Errorf("spec %+v: want only the override", rel.Spec)
	}
	if _, _, err := release.PlanSteer(rel, "promote", release.SteerOptions{OverrideWindow: true, Reason: "again"}, ""); err == nil || !strings.Contains(err.Error(), "already") {
		t.Errorf("twice: %v", err)
	}
	hard := held
	hard.Message += " (no override: the window is a hard freeze)"
	if _, _, err := release.PlanSteer(webRelease(2, 1, hard), "promote", release.SteerOptions{OverrideWindow: true, Reason: "x"}, ""); err == nil || !strings.Contains(err.Error(), "hard freeze") {
		t.Errorf("hard freeze: %v", err)
	}
}
