package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/execute"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/release"
	"github.com/flotilla-dev/flotilla/internal/revision"
)

func newDescribeCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe KIND/NAME",
		Short: "Show where a template runs: per-cluster placement, replicas, health, the policy that placed it and the last error",
		Example: fmt.Sprintf(`  %[1]s describe deployment/web -n shop
  %[1]s describe configmap/settings -n store`, invokedName()),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := templateArg(args[0])
			if err != nil {
				return err
			}
			c, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			b, err := findBinding(cmd.Context(), c, kind, name, g.templateNamespace())
			if err != nil {
				return err
			}
			return describeBinding(cmd.Context(), c, g.streams.Out, b)
		},
	}
	return cmd
}

// templateArg splits a KIND/NAME argument naming a template.
func templateArg(arg string) (kind, name string, err error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || kind == "" || name == "" {
		return "", "", fmt.Errorf("%q: write KIND/NAME of the template, for example deployment/web", arg)
	}
	return kind, name, nil
}

// resolveKind turns what kubectl accepts for a kind (deploy, deployments, deployment.apps,
// httproutes.gateway.networking.k8s.io) into the Kind, as bindings are named by it; what it
// cannot resolve is kept as given.
func resolveKind(c client.Client, s string) string {
	resource, group, _ := strings.Cut(strings.ToLower(s), ".")
	if k, err := kindOf(resource); err == nil && k != resource {
		return k
	}
	if c != nil {
		if gvk, err := c.RESTMapper().KindFor(schema.GroupVersionResource{Group: group, Resource: resource}); err == nil {
			return gvk.Kind
		}
	}
	return s
}

// findBinding finds the binding of template KIND/NAME; without a namespace, a cluster-scoped
// template (a Namespace, a ClusterRole) is found too.
func findBinding(ctx context.Context, c client.Client, kind, name, namespace string) (workv1alpha1.Binding, error) {
	kind = resolveKind(c, kind)
	bindingName := names.Binding(kind, name)
	ns := namespace
	if ns == "" {
		ns = "default"
	}
	var b workv1alpha1.Binding = &workv1alpha1.ResourceBinding{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: bindingName}, b)
	if apierrors.IsNotFound(err) && namespace == "" {
		b = &workv1alpha1.ClusterResourceBinding{}
		if cerr := c.Get(ctx, client.ObjectKey{Name: bindingName}, b); cerr == nil {
			err = nil
		}
	}
	if apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("%s/%s in namespace %s: your roles do not let you read it there: %w", kind, name, ns, err)
	}
	if err != nil {
		return nil, fmt.Errorf("no binding for %s/%s in namespace %s (is a propagation policy selecting it?): %w", kind, name, ns, err)
	}
	return b, nil
}

func describeBinding(ctx context.Context, c client.Client, out io.Writer, binding workv1alpha1.Binding) error {
	b := struct {
		Spec   *workv1alpha1.ResourceBindingSpec
		Status *workv1alpha1.ResourceBindingStatus
	}{binding.BindingSpec(), binding.BindingStatus()}
	adoption, err := readAdoption(ctx, c, binding)
	if err != nil {
		return err
	}
	r := b.Spec.Resource
	if r.Namespace == "" {
		fmt.Fprintf(out, "Template:   %s %s (%s)\n", r.Kind, r.Name, r.APIVersion)
		fmt.Fprintf(out, "Binding:    ClusterResourceBinding %s\n", binding.GetName())
	} else {
		fmt.Fprintf(out, "Template:   %s %s/%s (%s)\n", r.Kind, r.Namespace, r.Name, r.APIVersion)
		fmt.Fprintf(out, "Binding:    ResourceBinding %s/%s\n", binding.GetNamespace(), binding.GetName())
	}
	policy := b.Spec.PolicyRef.Kind + " " + b.Spec.PolicyRef.Name
	if b.Spec.PolicyRef.Namespace != "" {
		policy = b.Spec.PolicyRef.Kind + " " + b.Spec.PolicyRef.Namespace + "/" + b.Spec.PolicyRef.Name
	}
	fmt.Fprintf(out, "Policy:     %s (deletion %s, conflicts %s)\n", policy, b.Spec.DeletionPolicy, b.Spec.ConflictResolution)
	fmt.Fprintf(out, "Replicas:   %d\n", b.Spec.Replicas)
	if b.Spec.Group != "" {
		fmt.Fprintf(out, "Group:      %s (scheduled together)\n", b.Spec.Group)
	}
	if deps := dependsOnNames(b.Spec.DependsOn); deps != "" {
		fmt.Fprintf(out, "Depends on: %s\n", deps)
	}
	status := map[string]workv1alpha1.ClusterStatus{}
	for _, s := range b.Status.Clusters {
		status[s.Cluster] = s
	}
	conditions := []string{workv1alpha1.ConditionScheduled, workv1alpha1.ConditionApplied, workv1alpha1.ConditionHealthy}
	if adoption == nil {
		fmt.Fprintf(out, "Health:     %s\n", orDash(string(b.Status.Health)))
	} else {
		// The binding's own health and Applied count the clusters not adopted as waiting;
		// here only the adopted ones count, and the adoption says where it stands.
		fmt.Fprintf(out, "Health:     %s\n", adoption.health(status))
		fmt.Fprintf(out, "Adoption:   %s\n", adoption.summary(r))
		conditions = conditions[:1]
	}
	for _, t := range conditions {
		if c := meta.FindStatusCondition(b.Status.Conditions, t); c != nil {
			fmt.Fprintf(out, "%-11s %s (%s) %s\n", t+":", c.Status, c.Reason, c.Message)
		}
	}
	fmt.Fprintln(out, "\nClusters:")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLUSTER\tREPLICAS\tAPPLIED\tHEALTH\tSYNC\tLAST ERROR")
	for _, t := range b.Spec.Clusters {
		if slices.Contains(b.Spec.UnmanagedClusters, t.Name) {
			continue
		}
		s := status[t.Name]
		sync := "managed"
		if adoption != nil {
			sync = adoption.state[t.Name]
		}
		switch {
		case b.Spec.Suspended(t.Name):
			sync = "suspended"
		case s.Lost:
			sync = "lost"
		}
		if adoption != nil && !adoption.managed(t.Name) {
			// No Work: Flotilla neither writes nor reads there, so it has no status to show.
			fmt.Fprintf(tw, "  %s\t%d\t-\t-\t%s\t-\n", t.Name, t.Replicas, sync)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%v\t%s\t%s\t%s\n", t.Name, renderedReplicas(s, t), s.Applied, orDash(string(s.Health)), sync, orDash(s.Message))
	}
	for _, t := range b.Spec.GracefulEvictionTasks {
		fmt.Fprintf(tw, "  %s\t%d\t-\t-\tevicting (%s, purge %s)\t%s\n", t.Cluster, t.Replicas, t.Reason, t.PurgeMode, t.Message)
	}
	for _, name := range b.Spec.UnmanagedClusters {
		fmt.Fprintf(tw, "  %s\t-\t-\t-\tunmanaged\thanded back: Flotilla no longer writes here\n", name)
	}
	if len(b.Spec.Clusters)+len(b.Spec.GracefulEvictionTasks)+len(b.Spec.UnmanagedClusters) == 0 {
		fmt.Fprintln(tw, "  (none)\t\t\t\t\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range b.Status.Clusters {
		if s.WaitingFor != "" && s.WaitingSince != nil {
			fmt.Fprintf(out, "Waiting in %s since %s (%s) for: %s\n", s.Cluster, s.WaitingSince.UTC().Format(time.RFC3339),
				time.Since(s.WaitingSince.Time).Round(time.Second), s.WaitingFor)
		}
	}
	if s := b.Spec.Suspend; s != nil && s.Dispatching {
		fmt.Fprintln(out, "\nSuspended:  every cluster (flotilla unsuspend to resume)")
	}
	for _, f := range b.Spec.FailedClusters {
		fmt.Fprintf(out, "Failed over from %s at %s: %s\n", f.Cluster, f.Time.UTC().Format(time.RFC3339), f.Message)
	}
	if err := describeNotPlaced(ctx, c, out, binding); err != nil {
		return err
	}
	describeDrift(out, b.Spec, b.Status)
	return nil
}

// dependsOnNames lists a binding's dependencies as the user named them.
func dependsOnNames(deps []policyv1alpha1.DependencySelector) string {
	var out []string
	for _, d := range deps {
		ref := d.Name
		if d.Name == "" {
			sel, _ := metav1.LabelSelectorAsSelector(d.LabelSelector.AsMetav1())
			ref = "{" + sel.String() + "}"
		}
		out = append(out, fmt.Sprintf("%s %s/%s", d.Kind, d.Namespace, ref))
	}
	return strings.Join(out, ", ")
}

// describeDrift shows the drift mode and, per cluster, what was changed by hand: put back
// (Correct) or left as it is (Report).
func describeDrift(out io.Writer, spec *workv1alpha1.ResourceBindingSpec, status *workv1alpha1.ResourceBindingStatus) {
	mode := workv1alpha1.DriftCorrect
	if d := spec.DriftCorrection; d != nil && d.Mode != "" {
		mode = d.Mode
	}
	header := "\nDrift:      " + mode
	if d := spec.DriftCorrection; d != nil && len(d.IgnoreFields) > 0 {
		header += " (ignoring " + strings.Join(d.IgnoreFields, ", ") + ")"
	}
	fmt.Fprintln(out, header)
	if c := meta.FindStatusCondition(status.Conditions, workv1alpha1.ConditionDrifted); c != nil && c.Status == "True" {
		fmt.Fprintf(out, "Drifted:    True (%s) %s\n", c.Reason, c.Message)
	}
	for _, s := range status.Clusters {
		if s.Drift == nil {
			continue
		}
		line := fmt.Sprintf("  %s: %d corrected", s.Cluster, s.Drift.Corrections)
		if t := s.Drift.LastCorrectionTime; t != nil {
			line += ", last at " + t.UTC().Format(time.RFC3339)
		}
		if len(s.Drift.Objects) > 0 {
			line += "; " + execute.DescribeDrift(s.Drift.Objects)
		}
		fmt.Fprintln(out, line)
	}
}

// Adoption states of a cluster under a staged first release.
const (
	adoptionAdopted     = "adopted"
	adoptionAdopting    = "adopting"
	adoptionNotReached  = "not reached yet (unmanaged)"
	adoptionHandingBack = "handing back"
	adoptionHandedBack  = "handed back (unmanaged)"
	adoptionNotAdopted  = "not adopted (unmanaged)"
)

// adoption is what a staged first release (rollout.stageFirstRevision) has done in each
// cluster, read from the binding's revision pins and the Works: a cluster whose pin is not set
// has no Work, so Flotilla has not adopted its object (or has handed it back).
type adoption struct {
	release *rolloutv1alpha1.Release // nil while the recorder creates it
	state   map[string]string
	order   []string
}

// renderedReplicas is what the cluster is given: the scheduler's share, or what an override
// made of it, as last applied there.
func renderedReplicas(s workv1alpha1.ClusterStatus, t workv1alpha1.TargetCluster) string {
	if !s.Suspended && s.LastApplied != nil && s.LastApplied.Replicas != nil && *s.LastApplied.Replicas != int64(t.Replicas) {
		return fmt.Sprintf("%d (override; scheduled %d)", *s.LastApplied.Replicas, t.Replicas)
	}
	return strconv.Itoa(int(t.Replicas))
}

// readAdoption returns the adoption in progress or stopped, nil when the template has a stable
// revision (adopted, or never staged).
func readAdoption(ctx context.Context, c client.Client, b workv1alpha1.Binding) (*adoption, error) {
	revs := b.BindingSpec().Revisions
	if revs == nil || revs.Stable != 0 {
		return nil, nil
	}
	a := &adoption{state: map[string]string{}, release: &rolloutv1alpha1.Release{}}
	if err := c.Get(ctx, client.ObjectKey{Namespace: revision.Namespace(b), Name: revision.ReleaseName(b, revs.Latest)}, a.release); apierrors.IsNotFound(err) {
		a.release = nil
	} else if err != nil {
		return nil, err
	}
	// A cluster whose status keeps a lastApplied record has a Work (in the controller-manager)
	// that applied there.
	managed := map[string]bool{}
	for _, cs := range b.BindingStatus().Clusters {
		managed[cs.Cluster] = cs.LastApplied != nil
	}
	stopped := a.release != nil && (a.release.Status.Phase == rolloutv1alpha1.ReleaseAborted || a.release.Status.Phase == rolloutv1alpha1.ReleaseRolledBack)
	for _, t := range b.BindingSpec().Clusters {
		pinned := revs.RevisionFor(t.Name) != 0
		var st string
		switch {
		case pinned && managed[t.Name]:
			st = adoptionAdopted
		case pinned:
			st = adoptionAdopting
		case managed[t.Name]:
			st = adoptionHandingBack // its Work goes with the release policy: the object stays
		case stopped && slices.Contains(a.release.Status.UpdatedClusters, t.Name):
			st = adoptionHandedBack
		case stopped:
			st = adoptionNotAdopted
		default:
			st = adoptionNotReached
		}
		a.state[t.Name] = st
		a.order = append(a.order, t.Name)
	}
	return a, nil
}

// managed says whether Flotilla writes to the cluster's object.
func (a *adoption) managed(cluster string) bool {
	st := a.state[cluster]
	return st == adoptionAdopted || st == adoptionAdopting || st == adoptionHandingBack
}

// in lists the clusters in one of the states.
func (a *adoption) in(states ...string) []string {
	var out []string
	for _, cl := range a.order {
		if slices.Contains(states, a.state[cl]) {
			out = append(out, cl)
		}
	}
	return out
}

// health is the worst health of the adopted clusters; the others report none.
func (a *adoption) health(status map[string]workv1alpha1.ClusterStatus) string {
	adopted := a.in(adoptionAdopted, adoptionAdopting)
	if len(adopted) == 0 {
		return "- (Flotilla manages no cluster of it yet)"
	}
	rank := map[workv1alpha1.Health]int{workv1alpha1.HealthHealthy: 0, workv1alpha1.HealthProgressing: 1, workv1alpha1.HealthUnknown: 2, workv1alpha1.HealthDegraded: 3}
	worst := workv1alpha1.HealthHealthy
	for _, cl := range adopted {
		h := status[cl].Health
		if h == "" {
			h = workv1alpha1.HealthUnknown
		}
		if rank[h] > rank[worst] {
			worst = h
		}
	}
	return fmt.Sprintf("%s (of the %d adopted of %d clusters)", worst, len(adopted), len(a.order))
}

// summary says where the adoption stands and what to do next.
func (a *adoption) summary(r workv1alpha1.ObjectReference) string {
	arg := strings.ToLower(r.Kind) + "/" + r.Name
	if a.release == nil {
		return "staged (rollout.stageFirstRevision): its first release is being created; no cluster adopted yet"
	}
	rel := a.release
	switch rel.Status.Phase {
	case rolloutv1alpha1.ReleaseAborted, rolloutv1alpha1.ReleaseRolledBack:
		back := a.in(adoptionHandedBack, adoptionHandingBack)
		msg := fmt.Sprintf("release %s %s: ", rel.Name, rel.Status.Phase)
		if len(back) > 0 {
			msg += "handed back to unmanaged in " + strings.Join(back, ", ") + ", objects and pods left running"
		} else {
			msg += "no cluster had been adopted"
		}
		return msg + fmt.Sprintf("; Flotilla writes nowhere (`%s release retry %s` adopts again)", invokedName(), arg)
	}
	adopted := a.in(adoptionAdopted)
	wave := rel.Status.Wave
	if wave == "" {
		wave = release.WaveName(rel)
	}
	msg := fmt.Sprintf("staged by release %s (%s, wave %s): %d of %d clusters adopted", rel.Name, orDash(string(rel.Status.Phase)), wave, len(adopted), len(a.order))
	if rest := a.in(adoptionNotReached); len(rest) > 0 {
		msg += "; not reached yet: " + strings.Join(rest, ", ")
	}
	return msg + fmt.Sprintf(" (`%s release get %s` shows the waves)", invokedName(), arg)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// describeNotPlaced names the fleet's clusters the template does not run on for a reason
// other than the policy's selection (evicted, failed over, tainted, not Ready), each with that
// reason, and counts the rest.
func describeNotPlaced(ctx context.Context, c client.Client, out io.Writer, b workv1alpha1.Binding) error {
	clusters := &clusterv1alpha1.ClusterList{}
	if err := c.List(ctx, clusters); err != nil {
		if apierrors.IsForbidden(err) {
			return nil // a tenant may not list the fleet; the placed clusters are shown above
		}
		return err
	}
	bs := b.BindingSpec()
	var lines []string
	unselected := 0
	for _, cl := range clusters.Items {
		if slices.ContainsFunc(bs.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == cl.Name }) ||
			slices.Contains(bs.UnmanagedClusters, cl.Name) {
			continue
		}
		if _, evicting := bs.EvictionFor(cl.Name); evicting {
			continue // shown as evicting above
		}
		why := release.WhyNotPlaced(ctx, c, b, cl.Name)
		if strings.HasPrefix(why, "no longer placed") {
			unselected++
			continue
		}
		lines = append(lines, fmt.Sprintf("  %s: %s", cl.Name, why))
	}
	if len(lines) == 0 && unselected == 0 {
		return nil
	}
	fmt.Fprintln(out, "\nNot placed:")
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	if unselected > 0 {
		fmt.Fprintf(out, "  %d other cluster(s): not selected by the policy (its affinity, spread or replica division)\n", unselected)
	}
	return nil
}
