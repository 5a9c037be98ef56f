package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/kubectl/pkg/cmd/get"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/customization"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/luavm"
	"github.com/flotilla-dev/flotilla/internal/release"
	"github.com/flotilla-dev/flotilla/internal/revision"
)

// Exit codes of `release watch` and `release status`, for CI gates; 1 and 2 (ExitUsage) mean
// what they mean for every command.
const (
	// ExitReleaseFailed: the release ended without its revision running everywhere
	// (RolledBack, Aborted, Superseded) or holds a Failed wave waiting for abort or retry.
	ExitReleaseFailed = 3
	// ExitTimeout: --timeout passed before the release finished.
	ExitTimeout = 4
)

// releaseTarget finds a template's binding and its newest release.
type releaseTarget struct {
	c       client.Client
	binding workv1alpha1.Binding
	release *rolloutv1alpha1.Release
	// pending: the template changed since its latest recorded revision (generation below);
	// the release of that change does not exist yet.
	pending    bool
	generation int64
	// images caches each revision's container images, read from its ControllerRevision.
	images map[int64]string
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
	if t.pending, t.generation, err = pendingChange(ctx, c, b); err != nil {
		return nil, err
	}
	rel := &rolloutv1alpha1.Release{}
	err = c.Get(ctx, client.ObjectKey{Namespace: revision.Namespace(b), Name: revision.ReleaseName(b, revs.Latest)}, rel)
	switch {
	case apierrors.IsNotFound(err) && revs.Latest == 1 && revs.Stable != 0:
		// The first revision went everywhere at once. Only a staged one (an adoption, see
		// rollout.stageFirstRevision) has a release, and it stays findable once it succeeded.
		return t, nil
	case apierrors.IsNotFound(err):
		t.pending = true // recorded a moment ago; its release is being created
		return t, nil
	case err != nil:
		return nil, fmt.Errorf("release of revision %d of %s: %w", revs.Latest, arg, err)
	}
	t.release = rel
	return t, nil
}

// pendingChange says whether the template's workload differs from its latest recorded
// revision: a change made a moment ago, whose revision and release are not written yet.
func pendingChange(ctx context.Context, c client.Client, b workv1alpha1.Binding) (bool, int64, error) {
	r := b.BindingSpec().Resource
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(schema.FromAPIVersionAndKind(r.APIVersion, r.Kind))
	if err := c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, tmpl); err != nil {
		return false, 0, client.IgnoreNotFound(err) // deleted: its releases are what is left
	}
	_, hash, err := revision.Load(ctx, c, b, b.BindingSpec().Revisions.Latest)
	if apierrors.IsNotFound(err) {
		return true, tmpl.GetGeneration(), nil
	} else if err != nil {
		return false, 0, err
	}
	interpreters := interpret.NewRegistry(luavm.Limits{})
	if err := customization.Load(ctx, c, interpreters); apierrors.IsForbidden(err) {
		// Without the customizations the hash may differ from the recorder's for ever: say
		// nothing is pending rather than wait on a guess.
		return false, tmpl.GetGeneration(), nil
	} else if err != nil {
		return false, 0, err
	}
	return revision.WorkloadHash(interpreters.For(tmpl.GroupVersionKind()), tmpl) != hash, tmpl.GetGeneration(), nil
}

// interpreterFor is the kind's interpreter with the fleet's customizations; a user who may
// not read customizations gets the built-in one.
func interpreterFor(ctx context.Context, c client.Client, gvk schema.GroupVersionKind) (interpret.Interpreter, error) {
	interpreters := interpret.NewRegistry(luavm.Limits{})
	if err := customization.Load(ctx, c, interpreters); err != nil && !apierrors.IsForbidden(err) {
		return nil, err
	}
	return interpreters.For(gvk), nil
}

// awaitRelease finds the release of the template as it is now: when the template's latest
// change is not recorded yet, it waits for that change's release instead of showing the
// previous one.
func awaitRelease(ctx context.Context, out io.Writer, c client.Client, arg, namespace string) (*releaseTarget, error) {
	said := false
	for {
		t, err := findRelease(ctx, c, arg, namespace)
		if err != nil || !t.pending {
			return t, err
		}
		if !said {
			fmt.Fprintf(out, "%s: generation %d is not recorded as a revision yet; waiting for its release\n", arg, t.generation)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// outcome turns a release's end into the command's exit: nil when it succeeded.
func outcome(rel *rolloutv1alpha1.Release) error {
	name := "release/" + rel.Name
	switch rel.Status.Phase {
	case rolloutv1alpha1.ReleaseSucceeded:
		return nil
	case rolloutv1alpha1.ReleaseRolledBack, rolloutv1alpha1.ReleaseAborted, rolloutv1alpha1.ReleaseSuperseded:
		return &ExitError{Code: ExitReleaseFailed, Err: fmt.Errorf("%s %s: %s", name, rel.Status.Phase, orDash(rel.Status.Message))}
	}
	if w := failedWave(rel); w != nil {
		return &ExitError{Code: ExitReleaseFailed, Err: fmt.Errorf("%s: wave %s Failed (%s); it waits for `%s release abort` or `%[4]s release retry`", name, w.Name, w.Message, invokedName())}
	}
	if held := release.HeldBy(rel); held != "" && !release.Final(rel.Status.Phase) {
		// No gate opens it and no time passes it: a CI gate hears it now, not at its timeout.
		return &ExitError{Code: ExitReleaseFailed, Err: fmt.Errorf("%s is held, nothing moves until it is fixed: %s", name, held)}
	}
	return nil
}

// failedWave is a wave that failed and holds the release (automatic rollback off).
func failedWave(rel *rolloutv1alpha1.Release) *rolloutv1alpha1.WaveStatus {
	for i := range rel.Status.Waves {
		if rel.Status.Waves[i].Phase == rolloutv1alpha1.WaveFailed {
			return &rel.Status.Waves[i]
		}
	}
	return nil
}

// over says whether watching can stop: the release finished, holds a failed wave, or is held
// by a problem only a fix ends.
func over(t *releaseTarget) bool {
	return t.release == nil || release.Final(t.release.Status.Phase) || failedWave(t.release) != nil || release.HeldBy(t.release) != ""
}

// withTimeout bounds a wait by --timeout (0: none) and turns running out into ExitTimeout.
func withTimeout(ctx context.Context, timeout time.Duration, run func(ctx context.Context) error) error {
	if timeout <= 0 {
		return run(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := run(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return &ExitError{Code: ExitTimeout, Err: fmt.Errorf("the release did not finish within --timeout %s", timeout)}
	}
	return err
}

func (t *releaseTarget) needRelease() error {
	if t.release == nil {
		return fmt.Errorf("%s has only its first revision: there is no release to act on", t.binding.GetName())
	}
	return nil
}

func newReleaseCommand(g *globals) *cobra.Command {
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
		return findRelease(cmd.Context(), c, args[0], g.templateNamespace())
	}
	sub := func(use, short string, run func(cmd *cobra.Command, t *releaseTarget) error) *cobra.Command {
		c := &cobra.Command{Use: use + " KIND/NAME", Short: short, Args: cobra.ExactArgs(1), ValidArgsFunction: g.completeReleased, RunE: func(cmd *cobra.Command, args []string) error {
			t, err := target(cmd, args)
			if err != nil {
				return err
			}
			return run(cmd, t)
		}}
		return c
	}
	out := g.streams.Out
	relPrint := get.NewGetPrintFlags()
	getRelease := sub("get", "Show the release as a tree: waves, clusters, analysis (-o json|yaml|jsonpath=...: the Release object)", func(cmd *cobra.Command, t *releaseTarget) error {
		if o := *relPrint.OutputFormat; o != "" && o != "wide" {
			p, err := relPrint.ToPrinter()
			if err != nil {
				return fmt.Errorf("-o %q: use json, yaml, name, jsonpath=..., custom-columns=... or go-template=...; without -o the tree", o)
			}
			if err := t.needRelease(); err != nil {
				return err
			}
			rel := t.release.DeepCopy()
			rel.SetGroupVersionKind(rolloutv1alpha1.GroupVersion.WithKind("Release"))
			return p.PrintObj(rel, out)
		}
		if t.pending {
			fmt.Fprintf(out, "generation %d of the template is not recorded as a revision yet; its release starts in a moment (`%s release watch` waits for it). The latest release:\n",
				t.generation, invokedName())
		}
		return printRelease(cmd.Context(), out, t)
	})
	relPrint.AddFlags(getRelease)
	var timeout time.Duration
	waiting := func(use, short string, run func(ctx context.Context, t *releaseTarget) error) *cobra.Command {
		c := &cobra.Command{Use: use + " KIND/NAME", Short: short, Args: cobra.ExactArgs(1), ValidArgsFunction: g.completeReleased, RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			return withTimeout(cmd.Context(), timeout, func(ctx context.Context) error {
				t, err := awaitRelease(ctx, out, c, args[0], g.templateNamespace())
				if err != nil {
					return err
				}
				return run(ctx, t)
			})
		}}
		c.Flags().DurationVar(&timeout, "timeout", 0, fmt.Sprintf("give up after this long (exit code %d); 0 waits until the release ends", ExitTimeout))
		return c
	}
	exitCodes := fmt.Sprintf(`Exit codes: 0 the release succeeded; %d it was rolled back, aborted or superseded, a wave
failed and waits for abort or retry, or the release is held by a problem only a fix ends (a
missing AnalysisTemplate, an invalid header regex); %d --timeout passed first; %d wrong usage; 1 any
other error.`, ExitReleaseFailed, ExitTimeout, ExitUsage)
	watch := waiting("watch", "Show the release tree live until it finishes", func(ctx context.Context, t *releaseTarget) error {
		return watchRelease(ctx, out, t)
	})
	watch.Long = "Show the release tree live until it finishes. A change not recorded yet is waited for.\n\n" + exitCodes
	status := waiting("status", "Wait for the release of the template's latest change and print where it stands, a line per change", func(ctx context.Context, t *releaseTarget) error {
		return releaseStatus(ctx, out, t)
	})
	status.Long = `Wait for the release of the template's latest change, printing a line each time it moves, as
kubectl rollout status does; for CI gates. A change not recorded yet is waited for.

` + exitCodes
	var promoteOpts release.SteerOptions
	steer := func(verb, short string) *cobra.Command {
		return sub(verb, short, func(cmd *cobra.Command, t *releaseTarget) error {
			opts := release.SteerOptions{}
			if verb == "promote" {
				opts = promoteOpts
			}
			return t.steer(cmd.Context(), out, verb, opts)
		})
	}
	promote := steer("promote", "Pass the current wave's gates (approval, bake time, analysis) or the canary pause it stands at; --full releases every remaining wave at once; --override-window passes change windows")
	promote.Flags().BoolVar(&promoteOpts.Full, "full", false, "release every remaining wave at once, skipping gates")
	promote.Flags().BoolVar(&promoteOpts.OverrideWindow, "override-window", false, "pass the change windows that hold the release (those that allow overrides), for an emergency change; needs --reason")
	promote.Flags().StringVar(&promoteOpts.Reason, "reason", "", "why the change cannot wait for the window (with --override-window); kept in the release and in history")
	var toRevision int64
	undo := sub("undo", "Put a previous revision's workload back into the template (a new release carries it); undoing an adoption hands the objects back to unmanaged", func(cmd *cobra.Command, t *releaseTarget) error {
		return undoRelease(cmd.Context(), out, t, toRevision)
	})
	undo.Flags().Int64Var(&toRevision, "to-revision", 0, "revision to go back to (default: before the last release that went through, else the stable one)")
	cmd.AddCommand(getRelease, watch, status,
		steer("pause", "Hold the release where it is"),
		steer("resume", "Go on after a pause"),
		promote,
		steer("abort", "Return every cluster the release updated to the stable revision (hand an adoption's back to unmanaged)"),
		steer("retry", "Start an aborted or rolled-back release again from the wave that failed"),
		undo)
	return cmd
}

// steer changes one of the release's controls, after checking that the change would do
// something: a command that answers "promoted" must have promoted.
func (t *releaseTarget) steer(ctx context.Context, out io.Writer, verb string, opts release.SteerOptions) error {
	if err := t.needRelease(); err != nil {
		return err
	}
	if opts.Reason != "" && !opts.OverrideWindow {
		return fmt.Errorf("--reason goes with --override-window")
	}
	opts.Command = invokedName()
	what, err := release.SteerRelease(ctx, t.c, t.release, verb, opts)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, what)
	return nil
}

func undoRelease(ctx context.Context, out io.Writer, t *releaseTarget, to int64) error {
	revs := t.binding.BindingSpec().Revisions
	if to < 0 {
		return fmt.Errorf("--to-revision %d: give a revision number from 1 (or leave it out to undo the last release)", to)
	}
	if revs == nil {
		r := t.binding.BindingSpec().Resource
		return fmt.Errorf("%s/%s: no revisions are recorded, so there is nothing to undo: its policy has no spec.rollout", strings.ToLower(r.Kind), r.Name)
	}
	if to == 0 {
		if t.release != nil && t.release.Spec.StableRevision == 0 {
			// Before a staged first release there was no revision: the objects ran unmanaged.
			return undoAdoption(ctx, out, t)
		}
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
	old, oldHash, err := revision.Load(ctx, t.c, t.binding, to)
	if err != nil {
		return fmt.Errorf("--to-revision %d: %w (only the newest revisions are kept)", to, err)
	}
	r := t.binding.BindingSpec().Resource
	arg := strings.ToLower(r.Kind) + "/" + r.Name
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(schema.FromAPIVersionAndKind(r.APIVersion, r.Kind))
	if err := t.c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, tmpl); err != nil {
		return err
	}
	in, err := interpreterFor(ctx, t.c, tmpl.GroupVersionKind())
	if err != nil {
		return err
	}
	if revision.WorkloadHash(in, tmpl) == oldHash {
		return fmt.Errorf("%s: the template holds the workload of revision %d already, so undo would change nothing; name an older one with --to-revision (revisions run from 1 to %d)",
			arg, to, revs.Latest)
	}
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
		return fmt.Errorf("--to-revision %d: putting the workload of revision %d back into %s: %w", to, to, arg, err)
	}
	fmt.Fprintf(out, "%s: workload of revision %d put back; a new release carries it\n", arg, to)
	return nil
}

// undoAdoption undoes a staged first release: once it succeeded, its clusters are handed back
// to unmanaged through the template's unmanaged annotation, exactly as `unmanage` does (the objects
// and their pods keep running, `manage` adopts them again). An adoption in progress is aborted
// instead, and one aborted or rolled back has handed its clusters back already.
func undoAdoption(ctx context.Context, out io.Writer, t *releaseTarget) error {
	rel := t.release
	r := rel.Spec.Resource
	arg := strings.ToLower(r.Kind) + "/" + r.Name
	switch rel.Status.Phase {
	case rolloutv1alpha1.ReleaseSucceeded:
	case rolloutv1alpha1.ReleaseAborted, rolloutv1alpha1.ReleaseRolledBack:
		return fmt.Errorf("%s: release %s, which adopted it, is %s and handed its clusters back to unmanaged already; nothing to undo (`%s release retry %[1]s` adopts them again)",
			arg, rel.Name, rel.Status.Phase, invokedName())
	default:
		return fmt.Errorf("%s: release %s is still adopting it wave by wave; `%s release abort %[1]s` hands the clusters it adopted back to unmanaged",
			arg, rel.Name, invokedName())
	}
	var msg string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b := t.binding.DeepCopyObject().(workv1alpha1.Binding)
		if err := t.c.Get(ctx, client.ObjectKeyFromObject(t.binding), b); err != nil {
			return err
		}
		var err error
		msg, err = switchTemplate(ctx, t.c, b, func(bs *workv1alpha1.ResourceBindingSpec) (string, error) {
			var managed []string
			for _, c := range bs.Clusters {
				if !slices.Contains(bs.UnmanagedClusters, c.Name) {
					managed = append(managed, c.Name)
				}
			}
			if len(managed) == 0 {
				return "", fmt.Errorf("every cluster is unmanaged already (%s); nothing to undo", strings.Join(bs.UnmanagedClusters, ", "))
			}
			return unmanageClusters(bs, managed)
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: handing the adoption back: %w", arg, err)
	}
	fmt.Fprintf(out, "%s: adoption by release %s undone: %s; the objects and their pods keep running (`%s manage %[1]s` adopts them again)\n",
		arg, rel.Name, msg, invokedName())
	return nil
}

var phaseSymbols = map[string]string{
	"Succeeded": "✔", "Healthy": "✔", "Successful": "✔",
	"Progressing": "◐", "Updating": "◐", "Baking": "◐", "Analyzing": "◐", "Running": "◐",
	"Paused": "॥", "WaitingForApproval": "॥",
	"Pending": "○",
	"Failed":  "✖", "Degraded": "✖", "Error": "✖", "Inconclusive": "?",
	"Aborted": "↺", "RolledBack": "↺", "Superseded": "↷", "Left": "⇥",
}

func symbol(phase string) string {
	if s, ok := phaseSymbols[phase]; ok {
		return s
	}
	return "·"
}

func printRelease(ctx context.Context, out io.Writer, t *releaseTarget) error {
	if t.release == nil {
		revs := t.binding.BindingSpec().Revisions
		fmt.Fprintf(out, "%s: revision %d runs everywhere; no release yet\n", t.binding.GetName(), revs.Stable)
		return nil
	}
	rel := t.release
	r := rel.Spec.Resource
	from := fmt.Sprintf("revision %d", rel.Spec.StableRevision)
	if rel.Spec.StableRevision == 0 {
		from = "unmanaged" // a staged first release adopts what runs
	}
	fmt.Fprintf(out, "%s Release %s  %s %s/%s  %s → revision %d  %s", symbol(string(rel.Status.Phase)), rel.Name, r.Kind, r.Namespace, r.Name,
		from, rel.Spec.Revision, orDash(string(rel.Status.Phase)))
	if rel.Spec.Paused {
		fmt.Fprint(out, " (paused)")
	}
	fmt.Fprintln(out)
	if rel.Status.Message != "" {
		fmt.Fprintf(out, "│  %s\n", rel.Status.Message)
	}
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
		fmt.Fprintln(out, strings.TrimRight(fmt.Sprintf("%s %s wave %s  %s  %s", branch, symbol(string(w.Phase)), w.Name, w.Phase, waveText(rel, i, members)), " "))
		for j, cl := range w.Clusters {
			cb := "├─"
			if j == len(w.Clusters)-1 && w.AnalysisRun == "" {
				cb = "└─"
			}
			cs, reported := members[cl.Name]
			phase, why := t.clusterState(i, cl, cs, reported)
			fmt.Fprintln(out, strings.TrimRight(fmt.Sprintf("%s%s %s %s  %s  %s%s", indent, cb, symbol(phase), cl.Name, phase, t.workload(ctx, cl.Name, cs, reported), why), " "))
		}
		if w.AnalysisRun != "" {
			run := &rolloutv1alpha1.AnalysisRun{}
			phase, msg := "", ""
			if err := t.c.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: w.AnalysisRun}, run); err == nil {
				phase, msg = string(run.Status.Phase), run.Status.Message
			}
			fmt.Fprintf(out, "%s└─ %s analysis %s  %s  %s\n", indent, symbol(phase), w.AnalysisRun, orDash(phase), msg)
			for _, v := range compareVerdicts(run) {
				fmt.Fprintf(out, "%s   %s\n", indent, v)
			}
		}
	}
	printTraffic(out, rel, t.binding.BindingSpec().Revisions)
	return nil
}

// printTraffic shows the split each cluster of a routed or blue-green release runs, or what it
// waits for.
func printTraffic(out io.Writer, rel *rolloutv1alpha1.Release, revs *workv1alpha1.Revisions) {
	if revs == nil || revs.Traffic == nil {
		return
	}
	tt := revs.Traffic
	var via []string
	if tt.HTTPRoute != "" {
		via = append(via, "HTTPRoute "+tt.HTTPRoute)
	}
	if tt.VirtualService != "" {
		via = append(via, "VirtualService "+tt.VirtualService)
	}
	if tt.BlueGreen() {
		via = append(via, "active Service "+tt.ActiveService, "preview Service "+tt.PreviewService)
	}
	fmt.Fprintf(out, "traffic (%s):\n", strings.Join(via, ", "))
	for _, w := range rel.Status.Waves {
		for _, cl := range w.Clusters {
			// The release's record says whether the routes there carry the split; the
			// binding's pins only say what the release set.
			text := cl.Traffic
			if text == "" {
				text = release.TrafficText(revs, cl.Name)
			}
			fmt.Fprintf(out, "   %-12s %s\n", cl.Name, text)
		}
	}
}

// compareVerdicts are the last verdicts of a run's compare metrics: the canary against its
// baseline, in the words the analysis controller recorded.
func compareVerdicts(run *rolloutv1alpha1.AnalysisRun) []string {
	var out []string
	for _, m := range run.Spec.Metrics {
		if m.Compare == nil {
			continue
		}
		for _, r := range run.Status.MetricResults {
			if r.Name != m.Name || len(r.Measurements) == 0 {
				continue
			}
			last := r.Measurements[len(r.Measurements)-1]
			out = append(out, fmt.Sprintf("%s compare %s  %s  %s", symbol(string(last.Phase)), m.Name, last.Phase, last.Message))
		}
	}
	return out
}

// waveText is a wave's message, led by the canary step it stands at as people count steps
// ("step 2/4 setWeight 40%"). The controller's own messages count steps from 0 ("step 1
// pause: ..."); that prefix gives way to the label so the line says the step once.
//
// The controller's count of healthy clusters is recounted from the live status the cluster
// lines show, for the same reason as their words (see clusterState).
func waveText(rel *rolloutv1alpha1.Release, i int, members map[string]workv1alpha1.ClusterStatus) string {
	ws := rel.Status.Waves[i]
	var healthy, of int
	var rev int64
	if n, _ := fmt.Sscanf(ws.Message, "%d of %d clusters run revision %d healthy", &healthy, &of, &rev); n == 3 && !release.Final(rel.Status.Phase) {
		healthy = 0
		for _, cl := range ws.Clusters {
			if cs := members[cl.Name]; cs.Applied && cs.Revision == rev && cs.Health == workv1alpha1.HealthHealthy {
				healthy++
			}
		}
		ws.Message = fmt.Sprintf("%d of %d clusters run revision %d healthy", healthy, of, rev)
	}
	steps := revision.WaveSteps(rel, ws.Name)
	if len(steps) == 0 || ws.Phase == rolloutv1alpha1.WavePending || ws.Phase == rolloutv1alpha1.WaveSucceeded || i != int(rel.Status.CurrentWave) {
		return ws.Message
	}
	k := int(ws.CurrentStep)
	if k >= len(steps) {
		return strings.TrimSuffix(fmt.Sprintf("canary steps %d/%d done; %s", len(steps), len(steps), ws.Message), "; ")
	}
	msg := ws.Message
	if rest, ok := strings.CutPrefix(msg, revision.StepLabel(steps, k)+": "); ok {
		msg = rest
	} else if rest, ok := strings.CutPrefix(msg, fmt.Sprintf("step %d", k)); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, ":")) {
		_, msg, _ = strings.Cut(rest, ": ") // written by an earlier version: 0-based, without the label
	}
	if msg == "" {
		return revision.StepLabel(steps, k)
	}
	return revision.StepLabel(steps, k) + ": " + msg
}

// clusterState is the phase the tree shows for one cluster of wave i and why it is there. While
// the release runs both come from the binding's live status and pins, the same reading the
// workload column shows, so the text never contradicts the figures beside it (the release's
// own cluster messages date from its last reconcile). A finished release keeps its verdicts.
func (t *releaseTarget) clusterState(i int, cl rolloutv1alpha1.ClusterRelease, cs workv1alpha1.ClusterStatus, reported bool) (string, string) {
	rel, revs := t.release, t.binding.BindingSpec().Revisions
	staged := rel.Spec.StableRevision == 0
	pinned := revs.RevisionFor(cl.Name)
	if cl.Phase == rolloutv1alpha1.ClusterLeft {
		return string(cl.Phase), "left the release: " + cl.Message
	}
	if cl.Phase == rolloutv1alpha1.ClusterRolledBack {
		switch {
		case staged && cs.Applied:
			return string(cl.Phase), "handing back to unmanaged"
		case staged:
			return string(cl.Phase), "handed back to unmanaged: Flotilla no longer writes there, the object and its pods keep running"
		case cs.Applied && cs.Revision == rel.Spec.StableRevision:
			return string(cl.Phase), fmt.Sprintf("back on revision %d", rel.Spec.StableRevision)
		}
		return string(cl.Phase), fmt.Sprintf("returning to revision %d (now: %s)", rel.Spec.StableRevision, now(cs, reported))
	}
	if release.Final(rel.Status.Phase) {
		if staged && pinned == 0 && !cs.Applied {
			return string(cl.Phase), "not adopted: unmanaged"
		}
		return string(cl.Phase), ""
	}
	if pinned != rel.Spec.Revision && (release.HeldByWindow(cl.Message) || release.HeldByDependencies(cl.Message)) {
		return string(rolloutv1alpha1.ClusterPending), cl.Message // the controller's reading of the windows and dependencies
	}
	if pinned != rel.Spec.Revision {
		cur := int(rel.Status.CurrentWave)
		inSteps := i == cur && int(rel.Status.Waves[i].CurrentStep) < len(revision.WaveSteps(rel, rel.Status.Waves[i].Name))
		keeps := fmt.Sprintf("keeps revision %d", pinned)
		if staged {
			keeps = "stays unmanaged"
		}
		switch {
		case i > cur && staged:
			return string(rolloutv1alpha1.ClusterPending), "not reached yet: unmanaged until its wave"
		case i > cur:
			return string(rolloutv1alpha1.ClusterPending), fmt.Sprintf("waits for its wave; %s until then", keeps)
		case inSteps:
			if c, ok := revs.CanaryFor(cl.Name); ok {
				return string(rolloutv1alpha1.ClusterUpdating), fmt.Sprintf("a canary of revision %d runs beside the primary, which %s until the steps pass", c.Revision, keeps)
			}
			return string(rolloutv1alpha1.ClusterPending), keeps + " until the wave's canary steps pass"
		case i == cur:
			return string(rolloutv1alpha1.ClusterPending), "waits for a free slot (maxUnavailable)"
		}
		return string(rolloutv1alpha1.ClusterPending), fmt.Sprintf("joined after its wave: takes revision %d at the next reconcile", rel.Spec.Revision)
	}
	running := reported && cs.Applied && cs.Revision == rel.Spec.Revision
	switch {
	case running && cs.Health == workv1alpha1.HealthHealthy:
		return string(rolloutv1alpha1.ClusterHealthy), ""
	case running && cs.Health == workv1alpha1.HealthDegraded:
		return string(rolloutv1alpha1.ClusterDegraded), orDash(cs.Message)
	}
	return string(rolloutv1alpha1.ClusterUpdating), fmt.Sprintf("waiting for revision %d to run healthy (now: %s)", rel.Spec.Revision, now(cs, reported))
}

// now says what a cluster runs, in the words of the waiting message.
func now(cs workv1alpha1.ClusterStatus, reported bool) string {
	switch {
	case !reported:
		return "no status yet"
	case !cs.Applied:
		return "not applied yet"
	}
	return fmt.Sprintf("revision %d, %s", cs.Revision, orDash(string(cs.Health)))
}

// workload says what the cluster's member object runs: its revision and images, health and
// replicas, and its canary beside it.
func (t *releaseTarget) workload(ctx context.Context, cluster string, cs workv1alpha1.ClusterStatus, reported bool) string {
	revs := t.binding.BindingSpec().Revisions
	placed := slices.ContainsFunc(t.binding.BindingSpec().Clusters, func(tc workv1alpha1.TargetCluster) bool { return tc.Name == cluster })
	switch {
	case !reported && !placed:
		return "[not placed]  "
	case !reported:
		return "[no status yet]  "
	case !cs.Applied && t.release.Spec.StableRevision == 0 && revs.RevisionFor(cluster) == 0:
		return "[unmanaged]  "
	}
	out := fmt.Sprintf("[%s rev %d", strings.ToLower(t.release.Spec.Resource.Kind), cs.Revision)
	if img := t.imagesOf(ctx, cs.Revision); img != "" {
		out += " " + img
	}
	out += " " + orDash(string(cs.Health))
	if cs.Status != nil {
		var st struct {
			Replicas          *int64 `json:"replicas"`
			AvailableReplicas int64  `json:"availableReplicas"`
		}
		if json.Unmarshal(cs.Status.Raw, &st) == nil && st.Replicas != nil {
			out += fmt.Sprintf(" %d/%d available", st.AvailableReplicas, *st.Replicas)
		}
	}
	if c, ok := revs.CanaryFor(cluster); ok {
		out += fmt.Sprintf("; canary %d× rev %d", c.Replicas, c.Revision)
		if img := t.imagesOf(ctx, c.Revision); img != "" {
			out += " " + img
		}
		out += " " + orDash(string(cs.CanaryHealth))
		if cs.CanaryAvailableReplicas != nil {
			out += fmt.Sprintf(" %d/%d available", *cs.CanaryAvailableReplicas, c.Replicas)
		}
	}
	return out + "]  "
}

// imagesOf lists the container images of a revision as recorded (before overrides), "" when
// the revision is not kept or its kind has no pod template.
func (t *releaseTarget) imagesOf(ctx context.Context, rev int64) string {
	if rev == 0 {
		return ""
	}
	if img, ok := t.images[rev]; ok {
		return img
	}
	img := ""
	if u, _, err := revision.Load(ctx, t.c, t.binding, rev); err == nil {
		img = strings.Join(interpret.Images(u), ",")
	}
	if t.images == nil {
		t.images = map[int64]string{}
	}
	t.images[rev] = img
	return img
}

// watchRelease redraws the tree in place on a terminal; elsewhere (a log, a pipe) it prints
// each new state once, under a rule.
func watchRelease(ctx context.Context, out io.Writer, t *releaseTarget) error {
	f, isFile := terminal(out)
	tty := isFile && term.IsTerminal(int(f.Fd()))
	var last string
	lines := 0
	for {
		var buf strings.Builder
		if err := printRelease(ctx, &buf, t); err != nil {
			return err
		}
		if s := buf.String(); s != last {
			switch {
			case tty && lines > 0:
				fmt.Fprintf(raw(out), "\033[%dA\033[J", lines) // up over the last frame, clear to the end
			case last != "":
				fmt.Fprintln(out, strings.Repeat("─", 60))
			}
			fmt.Fprint(out, s)
			last, lines = s, strings.Count(s, "\n")
		}
		if over(t) {
			if t.release == nil {
				return nil
			}
			return outcome(t.release)
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

// releaseStatus prints one line each time the release moves, then its end.
func releaseStatus(ctx context.Context, out io.Writer, t *releaseTarget) error {
	if t.release == nil {
		fmt.Fprintf(out, "%s: revision %d runs everywhere; no release\n", t.binding.GetName(), t.binding.BindingSpec().Revisions.Stable)
		return nil
	}
	var last string
	for {
		rel := t.release
		line := fmt.Sprintf("release/%s revision %d: %s", rel.Name, rel.Spec.Revision, orDash(string(rel.Status.Phase)))
		if rel.Status.Wave != "" {
			line += ", wave " + rel.Status.Wave
		}
		if i := int(rel.Status.CurrentWave); i < len(rel.Status.Waves) && !release.Final(rel.Status.Phase) {
			members := map[string]workv1alpha1.ClusterStatus{}
			for _, cs := range t.binding.BindingStatus().Clusters {
				members[cs.Cluster] = cs
			}
			if msg := waveText(rel, i, members); msg != "" {
				line += ": " + msg
			}
		} else if rel.Status.Message != "" {
			line += ": " + rel.Status.Message
		}
		if line != last {
			fmt.Fprintln(out, line)
			last = line
		}
		if over(t) {
			return outcome(rel)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		if err := t.c.Get(ctx, client.ObjectKeyFromObject(t.release), t.release); err != nil {
			return err
		}
		_ = t.c.Get(ctx, client.ObjectKeyFromObject(t.binding), t.binding)
	}
}
