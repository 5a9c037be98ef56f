package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/flotilla-dev/flotilla/internal/customization"
	"github.com/flotilla-dev/flotilla/internal/luavm"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/release"
)

// releaseTarget finds a template's binding and its newest release.
type releaseTarget struct {
	c       client.Client
	binding workv1alpha1.Binding
	release *rolloutv1alpha1.Release
}

func findRelease(ctx context.Context, c client.Client, arg, namespace string) (*releaseTarget, error) {
	kind, name, err := templateArg(arg)
	if err != nil {
		return nil, err
	}
	b, err := findBinding(ctx, c, kind, name, namespace)
	if err != nil {
		return nil, err
	}
	revs := b.BindingSpec().Revisions
	if revs == nil {
		return nil, fmt.Errorf("%s is not released in waves: its policy has no rollout section", arg)
	}
	t := &releaseTarget{c: c, binding: b}
	if revs.Latest == 1 && revs.Stable != 0 {
		return t, nil // nothing released yet; a staged first revision (stable 0) has a release
	}
	rel := &rolloutv1alpha1.Release{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: release.Namespace(b), Name: release.ReleaseName(b, revs.Latest)}, rel); err != nil {
		return nil, fmt.Errorf("release of revision %d of %s: %w", revs.Latest, arg, err)
	}
	t.release = rel
	return t, nil
}

func (t *releaseTarget) needRelease() error {
	if t.release == nil {
		return fmt.Errorf("%s has only its first revision: there is no release to act on", t.binding.GetName())
	}
	return nil
}

// patchSpec changes the release's controls.
func (t *releaseTarget) patchSpec(ctx context.Context, change func(*rolloutv1alpha1.ReleaseSpec)) error {
	if err := t.needRelease(); err != nil {
		return err
	}
	patch := client.MergeFrom(t.release.DeepCopy())
	change(&t.release.Spec)
	return t.c.Patch(ctx, t.release, patch)
}

func newReleaseCommand(g *globals) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Follow and steer the wave-by-wave release of a template's changes",
		Example: fmt.Sprintf(`  %[1]s release watch deployment/web -n shop
  %[1]s release promote deployment/web -n shop
  %[1]s release abort deployment/web -n shop
  %[1]s release undo deployment/web -n shop --to-revision 2`, invokedName()),
	}
	target := func(cmd *cobra.Command, args []string) (*releaseTarget, error) {
		c, err := g.controlPlaneClient()
		if err != nil {
			return nil, err
		}
		return findRelease(cmd.Context(), c, args[0], namespace)
	}
	sub := func(use, short string, run func(cmd *cobra.Command, t *releaseTarget) error) *cobra.Command {
		c := &cobra.Command{Use: use + " KIND/NAME", Short: short, Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
			t, err := target(cmd, args)
			if err != nil {
				return err
			}
			return run(cmd, t)
		}}
		c.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the template (default: default)")
		return withKubeFlags(g, c)
	}
	out := g.streams.Out
	get := sub("get", "Show the release as a tree: waves, clusters, analysis", func(cmd *cobra.Command, t *releaseTarget) error {
		return printRelease(out, t)
	})
	watch := sub("watch", "Show the release tree live until it finishes", func(cmd *cobra.Command, t *releaseTarget) error {
		return watchRelease(cmd.Context(), out, t)
	})
	pause := sub("pause", "Hold the release where it is", func(cmd *cobra.Command, t *releaseTarget) error {
		return report(out, t, "paused", t.patchSpec(cmd.Context(), func(s *rolloutv1alpha1.ReleaseSpec) { s.Paused = true }))
	})
	resume := sub("resume", "Go on after a pause", func(cmd *cobra.Command, t *releaseTarget) error {
		return report(out, t, "resumed", t.patchSpec(cmd.Context(), func(s *rolloutv1alpha1.ReleaseSpec) { s.Paused = false }))
	})
	var full bool
	promote := sub("promote", "Pass the current wave's gates (approval, bake time, analysis); --full releases every remaining wave at once", func(cmd *cobra.Command, t *releaseTarget) error {
		if err := t.needRelease(); err != nil {
			return err
		}
		wave := t.release.Status.CurrentWave
		// Inside a wave's canary steps, promote passes the pause it stands at; after them, the
		// wave's gates.
		pausedStep := ""
		if int(wave) < len(t.release.Status.Waves) {
			ws := t.release.Status.Waves[wave]
			for _, w := range t.release.Spec.Strategy.Waves {
				if w.Name == ws.Name && int(ws.CurrentStep) < len(w.Steps) {
					pausedStep = fmt.Sprintf("%s/%d", ws.Name, ws.CurrentStep)
				}
			}
		}
		return report(out, t, "promoted", t.patchSpec(cmd.Context(), func(s *rolloutv1alpha1.ReleaseSpec) {
			if pausedStep != "" && !full {
				s.PromotedStep = pausedStep
			} else {
				s.PromotedWave = ptr.To(wave)
			}
			s.PromoteFull = s.PromoteFull || full
			s.Paused = false
		}))
	})
	promote.Flags().BoolVar(&full, "full", false, "release every remaining wave at once, skipping gates")
	abort := sub("abort", "Return every cluster the release updated to the stable revision", func(cmd *cobra.Command, t *releaseTarget) error {
		return report(out, t, "aborted", t.patchSpec(cmd.Context(), func(s *rolloutv1alpha1.ReleaseSpec) { s.Abort = true }))
	})
	retry := sub("retry", "Start an aborted or rolled-back release again from the wave that failed", func(cmd *cobra.Command, t *releaseTarget) error {
		return report(out, t, "retrying", t.patchSpec(cmd.Context(), func(s *rolloutv1alpha1.ReleaseSpec) { s.Abort = false; s.Retry++ }))
	})
	var toRevision int64
	undo := sub("undo", "Put a previous revision's workload back into the template (a new release carries it)", func(cmd *cobra.Command, t *releaseTarget) error {
		return undoRelease(cmd.Context(), out, t, toRevision)
	})
	undo.Flags().Int64Var(&toRevision, "to-revision", 0, "revision to go back to (default: before the last release that went through, else the stable one)")
	cmd.AddCommand(get, watch, pause, resume, promote, abort, retry, undo)
	return cmd
}

func report(out io.Writer, t *releaseTarget, what string, err error) error {
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "release/%s %s\n", t.release.Name, what)
	return nil
}

func undoRelease(ctx context.Context, out io.Writer, t *releaseTarget, to int64) error {
	revs := t.binding.BindingSpec().Revisions
	if to == 0 {
		// Undo the last change: back to what ran before a release that went through, else to
		// what runs now (the stable revision a failed or unfinished release left in place).
		to = revs.Stable
		if t.release != nil && t.release.Status.Phase == rolloutv1alpha1.ReleaseSucceeded {
			to = t.release.Spec.StableRevision
		}
	}
	if to < 1 || to >= revs.Latest+1 {
		return fmt.Errorf("--to-revision %d: revisions run from 1 to %d", to, revs.Latest)
	}
	old, _, err := release.LoadRevision(ctx, t.c, t.binding, to)
	if err != nil {
		return fmt.Errorf("--to-revision %d: %w (only the newest revisions are kept)", to, err)
	}
	r := t.binding.BindingSpec().Resource
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(schema.FromAPIVersionAndKind(r.APIVersion, r.Kind))
	if err := t.c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, tmpl); err != nil {
		return err
	}
	interpreters := interpret.NewRegistry(luavm.Limits{})
	if err := customization.Load(ctx, t.c, interpreters); err != nil {
		return err
	}
	in := interpreters.For(tmpl.GroupVersionKind())
	replicas, hasReplicas, _ := in.GetReplicas(tmpl)
	for k, v := range old.Object {
		if k != "metadata" && k != "status" {
			tmpl.Object[k] = v
		}
	}
	if hasReplicas { // undo is about the workload; the current scale stays
		if err := in.ReviseReplica(tmpl, replicas); err != nil {
			return err
		}
	}
	if err := t.c.Update(ctx, tmpl); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s/%s: workload of revision %d put back; a new release carries it\n", strings.ToLower(r.Kind), r.Name, to)
	return nil
}

var phaseSymbols = map[string]string{
	"Succeeded": "✔", "Healthy": "✔", "Successful": "✔",
	"Progressing": "◐", "Updating": "◐", "Baking": "◐", "Analyzing": "◐", "Running": "◐",
	"Paused": "॥", "WaitingForApproval": "॥",
	"Pending": "○",
	"Failed":  "✖", "Degraded": "✖", "Error": "✖", "Inconclusive": "?",
	"Aborted": "↺", "RolledBack": "↺", "Superseded": "↷",
}

func symbol(phase string) string {
	if s, ok := phaseSymbols[phase]; ok {
		return s
	}
	return "·"
}

func printRelease(out io.Writer, t *releaseTarget) error {
	if t.release == nil {
		revs := t.binding.BindingSpec().Revisions
		fmt.Fprintf(out, "%s: revision %d runs everywhere; no release yet\n", t.binding.GetName(), revs.Stable)
		return nil
	}
	rel := t.release
	r := rel.Spec.Resource
	fmt.Fprintf(out, "%s Release %s  %s %s/%s  revision %d → %d  %s", symbol(string(rel.Status.Phase)), rel.Name, r.Kind, r.Namespace, r.Name,
		rel.Spec.StableRevision, rel.Spec.Revision, orDash(string(rel.Status.Phase)))
	if rel.Spec.Paused {
		fmt.Fprint(out, " (paused)")
	}
	fmt.Fprintln(out)
	if rel.Status.Message != "" {
		fmt.Fprintf(out, "│  %s\n", rel.Status.Message)
	}
	runs := map[string]*rolloutv1alpha1.AnalysisRun{}
	members := map[string]workv1alpha1.ClusterStatus{}
	for _, cs := range t.binding.BindingStatus().Clusters {
		members[cs.Cluster] = cs
	}
	for i, w := range rel.Status.Waves {
		last := i == len(rel.Status.Waves)-1
		branch, indent := "├─", "│  "
		if last {
			branch, indent = "└─", "   "
		}
		fmt.Fprintf(out, "%s %s wave %s  %s  %s\n", branch, symbol(string(w.Phase)), w.Name, w.Phase, w.Message)
		for j, cl := range w.Clusters {
			cb := "├─"
			if j == len(w.Clusters)-1 && w.AnalysisRun == "" {
				cb = "└─"
			}
			fmt.Fprintf(out, "%s%s %s %s  %s  %s%s\n", indent, cb, symbol(string(cl.Phase)), cl.Name, cl.Phase, workload(r.Kind, members[cl.Name]), cl.Message)
		}
		if w.AnalysisRun != "" {
			run := runs[w.AnalysisRun]
			if run == nil {
				run = &rolloutv1alpha1.AnalysisRun{}
				if err := t.c.Get(context.Background(), client.ObjectKey{Namespace: rel.Namespace, Name: w.AnalysisRun}, run); err != nil {
					run = nil
				}
			}
			phase, msg := "", ""
			if run != nil {
				phase, msg = string(run.Status.Phase), run.Status.Message
			}
			fmt.Fprintf(out, "%s└─ %s analysis %s  %s  %s\n", indent, symbol(phase), w.AnalysisRun, orDash(phase), msg)
		}
	}
	return nil
}

// watchRelease redraws the tree in place on a terminal; elsewhere (a log, a pipe) it prints
// each new state once, under a rule.
// workload says what the cluster's member object runs: its revision, health and replicas.
func workload(kind string, cs workv1alpha1.ClusterStatus) string {
	if cs.Cluster == "" {
		return ""
	}
	out := fmt.Sprintf("[%s rev %d %s", strings.ToLower(kind), cs.Revision, orDash(string(cs.Health)))
	if cs.Status != nil {
		var st struct {
			Replicas          *int64 `json:"replicas"`
			AvailableReplicas int64  `json:"availableReplicas"`
		}
		if json.Unmarshal(cs.Status.Raw, &st) == nil && st.Replicas != nil {
			out += fmt.Sprintf(" %d/%d available", st.AvailableReplicas, *st.Replicas)
		}
	}
	return out + "]  "
}

func watchRelease(ctx context.Context, out io.Writer, t *releaseTarget) error {
	f, isFile := out.(*os.File)
	tty := isFile && term.IsTerminal(int(f.Fd()))
	var last string
	lines := 0
	for {
		var buf strings.Builder
		if err := printRelease(&buf, t); err != nil {
			return err
		}
		if s := buf.String(); s != last {
			switch {
			case tty && lines > 0:
				fmt.Fprintf(out, "\033[%dA\033[J", lines) // up over the last frame, clear to the end
			case last != "":
				fmt.Fprintln(out, strings.Repeat("─", 60))
			}
			fmt.Fprint(out, s)
			last, lines = s, strings.Count(s, "\n")
		}
		if t.release == nil || release.Final(t.release.Status.Phase) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		if err := t.c.Get(ctx, client.ObjectKeyFromObject(t.release), t.release); err != nil {
			return err
		}
		_ = t.c.Get(ctx, client.ObjectKeyFromObject(t.binding), t.binding) // the workloads' latest view
	}
}
