package release

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/revision"
)

// Steering: the checks and spec changes behind the release verbs (pause, resume, promote,
// abort, retry), shared by the CLI and the dashboard, so a verb answers the same wherever it is
// clicked or typed and one that would change nothing fails saying why.

// SteerOptions are what a steering verb takes besides the release.
type SteerOptions struct {
	// Full: promote every remaining wave at once, skipping gates (promote --full).
	Full bool
	// OverrideWindow: pass the change windows that hold the release and allow overrides, for
	// Reason (promote --override-window --reason TEXT).
	OverrideWindow bool
	Reason         string
	// Command is the command line's name as the user invoked it ("flotilla", "kubectl
	// flotilla"), for the hints that name the next command.
	Command string
}

// Steer carries out verb on the release namespace/name with c (the caller's identity), and
// answers what it did as "release/NAME what".
func Steer(ctx context.Context, c client.Client, namespace, name, verb string, opts SteerOptions) (string, error) {
	rel := &rolloutv1alpha1.Release{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, rel); err != nil {
		return "", err
	}
	return SteerRelease(ctx, c, rel, verb, opts)
}

// SteerRelease is Steer of a release already read; rel is patched in place.
func SteerRelease(ctx context.Context, c client.Client, rel *rolloutv1alpha1.Release, verb string, opts SteerOptions) (string, error) {
	var background rolloutv1alpha1.AnalysisPhase
	if name := rel.Status.BackgroundAnalysisRun; name != "" && verb == "promote" {
		run := &rolloutv1alpha1.AnalysisRun{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: name}, run); err == nil {
			background = run.Status.Phase
		}
	}
	change, what, err := PlanSteer(rel, verb, opts, background)
	if err != nil {
		return "", err
	}
	patch := client.MergeFrom(rel.DeepCopy())
	change(&rel.Spec)
	if err := c.Patch(ctx, rel, patch); err != nil {
		return "", err
	}
	return "release/" + rel.Name + " " + what, nil
}

// PlanSteer says what a steering verb would change in the release's spec and how to report it,
// or why it would change nothing. It reads the release as the controller last wrote it;
// background is the phase of its background analysis run, if any.
func PlanSteer(rel *rolloutv1alpha1.Release, verb string, opts SteerOptions, background rolloutv1alpha1.AnalysisPhase) (func(*rolloutv1alpha1.ReleaseSpec), string, error) {
	if opts.Command == "" {
		opts.Command = "flotilla"
	}
	name := "release/" + rel.Name
	if verb == "retry" {
		failed := slices.ContainsFunc(rel.Status.Waves, func(w rolloutv1alpha1.WaveStatus) bool { return w.Phase == rolloutv1alpha1.WaveFailed })
		if rel.Status.Phase != rolloutv1alpha1.ReleaseAborted && rel.Status.Phase != rolloutv1alpha1.ReleaseRolledBack && !failed {
			return nil, "", fmt.Errorf("%s is %s: retry starts again only a release that was aborted, rolled back or holds a Failed wave", name, orNone(string(rel.Status.Phase)))
		}
		return func(s *rolloutv1alpha1.ReleaseSpec) { s.Abort = false; s.Retry++ }, "retrying from wave " + WaveName(rel), nil
	}
	if err := finished(rel, verb, opts.Command); err != nil {
		return nil, "", err
	}
	switch verb {
	case "pause":
		if rel.Spec.Paused {
			return nil, "", fmt.Errorf("%s is paused already; `%s release resume` goes on", name, opts.Command)
		}
		return func(s *rolloutv1alpha1.ReleaseSpec) { s.Paused = true }, "paused at wave " + WaveName(rel), nil
	case "resume":
		if !rel.Spec.Paused {
			hint := ""
			if i := int(rel.Status.CurrentWave); i < len(rel.Status.Waves) && rel.Status.Waves[i].Phase == rolloutv1alpha1.WaveWaitingForApproval {
				hint = fmt.Sprintf("; it waits for approval: `%s release promote` passes it", opts.Command)
			}
			return nil, "", fmt.Errorf("%s is not paused%s", name, hint)
		}
		return func(s *rolloutv1alpha1.ReleaseSpec) { s.Paused = false }, "resumed at wave " + WaveName(rel), nil
	case "abort":
		if rel.Spec.Abort {
			return nil, "", fmt.Errorf("%s: abort was requested already; the release controller is returning the clusters", name)
		}
		what := fmt.Sprintf("aborted: the clusters it updated go back to revision %d", rel.Spec.StableRevision)
		if rel.Spec.StableRevision == 0 {
			what = "aborted: the clusters it adopted are handed back to unmanaged, objects and pods left running"
		}
		return func(s *rolloutv1alpha1.ReleaseSpec) { s.Abort = true }, what, nil
	case "promote":
		return planPromote(rel, opts, background)
	}
	return nil, "", fmt.Errorf("unknown release command %q", verb)
}

// finished refuses to steer a release that is over.
func finished(rel *rolloutv1alpha1.Release, verb, command string) error {
	name := "release/" + rel.Name
	switch rel.Status.Phase {
	case rolloutv1alpha1.ReleaseSucceeded:
		return fmt.Errorf("%s succeeded: revision %d runs in every cluster, there is nothing to %s (`%s release undo` goes back)",
			name, rel.Spec.Revision, verb, command)
	case rolloutv1alpha1.ReleaseAborted, rolloutv1alpha1.ReleaseRolledBack:
		return fmt.Errorf("%s is %s, there is nothing to %s (`%s release retry` starts it again from the wave that failed)",
			name, rel.Status.Phase, verb, command)
	case rolloutv1alpha1.ReleaseSuperseded:
		return fmt.Errorf("%s is Superseded (%s), there is nothing to %s", name, rel.Status.Message, verb)
	}
	return nil
}

// HeldBy is the configuration problem a release holds on, if any: no gate opens it, only a fix.
func HeldBy(rel *rolloutv1alpha1.Release) string {
	c := meta.FindStatusCondition(rel.Status.Conditions, ConditionValid)
	if c == nil || c.Status != metav1.ConditionFalse {
		return ""
	}
	if c.Reason == "InvalidAnalysis" || strings.Contains(c.Message, "blocking: ") {
		return c.Message
	}
	return ""
}

// planPromote says what promote passes now: the canary pause the wave stands at (or its
// Inconclusive analysis step), else the wave's gates; --full every remaining wave.
func planPromote(rel *rolloutv1alpha1.Release, opts SteerOptions, background rolloutv1alpha1.AnalysisPhase) (func(*rolloutv1alpha1.ReleaseSpec), string, error) {
	name := "release/" + rel.Name
	if opts.OverrideWindow {
		return planOverride(rel, opts)
	}
	if why := HeldBy(rel); why != "" {
		return nil, "", fmt.Errorf("%s is held: %s; promote cannot pass that: fix what it names and the release goes on by itself", name, why)
	}
	i := int(rel.Status.CurrentWave)
	if rel.Spec.PromoteFull {
		return nil, "", fmt.Errorf("%s is promoted in full already: it succeeds once every cluster runs revision %d healthy", name, rel.Spec.Revision)
	}
	if opts.Full {
		return func(s *rolloutv1alpha1.ReleaseSpec) {
			s.PromotedWave, s.PromoteFull, s.Paused = ptr.To(int32(i)), true, false
		}, "promoted in full: every remaining wave takes revision " + fmt.Sprint(rel.Spec.Revision) + " at once, gates skipped", nil
	}
	if background == rolloutv1alpha1.AnalysisInconclusive {
		return nil, "", fmt.Errorf("%s: background analysis %s is Inconclusive; `%s release promote --full` takes the release through, `%[3]s release abort` rolls back",
			name, rel.Status.BackgroundAnalysisRun, opts.Command)
	}
	if i >= len(rel.Status.Waves) {
		return nil, "", fmt.Errorf("%s has no wave left to promote (%s)", name, orNone(rel.Status.Message))
	}
	ws := rel.Status.Waves[i]
	where := "wave " + WaveName(rel)
	resumed := ""
	if rel.Spec.Paused {
		resumed = " and resumed"
	}
	if steps := revision.WaveSteps(rel, ws.Name); int(ws.CurrentStep) < len(steps) {
		k := int(ws.CurrentStep)
		label, st := revision.StepLabel(steps, k), steps[k]
		promoted := fmt.Sprintf("%s/%d", ws.Name, k)
		full := fmt.Sprintf("`%s release promote --full` skips every remaining step and gate", opts.Command)
		switch {
		case rel.Spec.PromotedStep == promoted:
			return nil, "", fmt.Errorf("%s: %s is promoted already; the release controller passes it at its next step", name, label)
		case st.Pause != nil && st.Pause.Duration == nil,
			st.Analysis != nil && ws.Phase == rolloutv1alpha1.WaveWaitingForApproval: // an Inconclusive analysis step
			return func(s *rolloutv1alpha1.ReleaseSpec) { s.PromotedStep, s.Paused = promoted, false },
				fmt.Sprintf("promoted%s: %s passes %s", resumed, where, label), nil
		case st.Analysis != nil:
			return nil, "", fmt.Errorf("%s: %s stands at %s, analysis %s %s; promote passes an analysis step only once it is Inconclusive: wait for its verdict, or %s",
				name, where, label, orNone(ws.AnalysisRun), orNone(string(ws.Phase)), full)
		case st.Pause != nil:
			return nil, "", fmt.Errorf("%s: %s stands at %s, which ends by itself; %s", name, where, label, full)
		default:
			waiting := strings.TrimPrefix(ws.Message, label+": ")
			if waiting == "" {
				waiting = "its canaries to run healthy"
			}
			return nil, "", fmt.Errorf("%s: %s stands at %s, which ends by itself; there is no pause to pass (now: %s) (%s)", name, where, label, waiting, full)
		}
	}
	if rel.Spec.PromotedWave != nil && int(*rel.Spec.PromotedWave) >= i {
		return nil, "", fmt.Errorf("%s: the gates of %s are passed already; it moves on once its clusters run revision %d healthy", name, where, rel.Spec.Revision)
	}
	gates := waveGates(rel, ws.Name)
	approve := func(s *rolloutv1alpha1.ReleaseSpec) { s.PromotedWave, s.Paused = ptr.To(int32(i)), false }
	switch ws.Phase {
	case rolloutv1alpha1.WaveFailed:
		return nil, "", fmt.Errorf("%s: %s failed (%s); `%s release abort` returns its clusters, or fix the cause and `%[4]s release retry`", name, where, ws.Message, opts.Command)
	case rolloutv1alpha1.WaveWaitingForApproval, rolloutv1alpha1.WaveBaking, rolloutv1alpha1.WaveAnalyzing:
		return approve, fmt.Sprintf("promoted%s: %s passes its gates (%s)", resumed, where, strings.Join(gates, ", ")), nil
	}
	if len(gates) == 0 {
		return nil, "", fmt.Errorf("%s: %s has no gate to pass; it moves on once its clusters run revision %d healthy (%s)", name, where, rel.Spec.Revision, orNone(ws.Message))
	}
	return approve, fmt.Sprintf("promoted%s: %s will pass its gates (%s) as soon as its clusters run revision %d healthy", resumed, where, strings.Join(gates, ", "), rel.Spec.Revision), nil
}

// planOverride lets the release pass the change windows that hold it (now or later in the
// release), when they allow overrides.
func planOverride(rel *rolloutv1alpha1.Release, opts SteerOptions) (func(*rolloutv1alpha1.ReleaseSpec), string, error) {
	name := "release/" + rel.Name
	reason := strings.TrimSpace(opts.Reason)
	switch {
	case reason == "":
		return nil, "", fmt.Errorf("--override-window needs --reason TEXT: why the change cannot wait is recorded in the release and in history")
	case len(reason) > 512:
		return nil, "", fmt.Errorf("--reason: %d characters; write at most 512", len(reason))
	case rel.Spec.WindowOverride != nil:
		return nil, "", fmt.Errorf("%s overrides the change windows already (reason: %s)", name, rel.Spec.WindowOverride.Reason)
	case strings.HasPrefix(rel.Status.Message, heldMark+"wave ") && strings.Contains(rel.Status.Message, "(no override"):
		return nil, "", fmt.Errorf("%s: %s; a hard freeze ends only when the platform changes or deletes the window", name, strings.TrimPrefix(rel.Status.Message, heldMark))
	}
	what := "passes the change windows that hold it (those that allow overrides), for: " + reason
	if !strings.HasPrefix(rel.Status.Message, heldMark+"wave ") {
		what = "will pass any change window that holds it from now on (none holds it now), for: " + reason
	}
	return func(s *rolloutv1alpha1.ReleaseSpec) {
		s.WindowOverride = &rolloutv1alpha1.WindowOverride{Reason: reason}
	}, what, nil
}

// waveGates names the gates of the release's wave called name.
func waveGates(rel *rolloutv1alpha1.Release, name string) []string {
	var out []string
	for _, w := range rel.Spec.Strategy.Waves {
		if w.Name != name {
			continue
		}
		if w.Gates.BakeTime != nil {
			out = append(out, "bake time "+w.Gates.BakeTime.String())
		}
		if w.Gates.Analysis != nil {
			out = append(out, "analysis")
		}
		if w.Gates.ManualApproval {
			out = append(out, "manual approval")
		}
	}
	return out
}

// WaveName is the wave the release stands at, as status.wave says it ("2/3 early").
func WaveName(rel *rolloutv1alpha1.Release) string {
	n := len(rel.Status.Waves)
	if n == 0 {
		return "1 (not started)"
	}
	i := min(int(rel.Status.CurrentWave), n-1)
	return fmt.Sprintf("%d/%d %s", i+1, n, rel.Status.Waves[i].Name)
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
