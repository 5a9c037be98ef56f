package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// syncSwitch is one of the commands that change how Flotilla writes to members.
type syncSwitch struct {
	use, short, long string
	apply            func(spec *workv1alpha1.ResourceBindingSpec, clusters []string) (string, error)
}

// placedOn refuses --cluster names the template is not placed on: a typo must not quietly
// change nothing, or take a cluster out of placement.
func placedOn(s *workv1alpha1.ResourceBindingSpec, clusters []string) error {
	for _, c := range clusters {
		if !slices.ContainsFunc(s.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == c }) {
			var placed []string
			for _, t := range s.Clusters {
				placed = append(placed, t.Name)
			}
			return fmt.Errorf("--cluster %s: the template is not placed there (placed on: %s)", c, strings.Join(placed, ", "))
		}
	}
	return nil
}

var syncSwitches = []syncSwitch{
	{
		use:   "suspend KIND/NAME",
		short: "Stop Flotilla's writes to members for a template (all clusters, or --cluster ones) without deleting anything",
		long: `Suspends Flotilla's writes: nothing is applied, pruned or deleted in the members, and
status keeps being reported. Without --cluster every cluster is suspended.`,
		apply: func(s *workv1alpha1.ResourceBindingSpec, clusters []string) (string, error) {
			if err := placedOn(s, clusters); err != nil {
				return "", err
			}
			if s.Suspend == nil {
				s.Suspend = &workv1alpha1.Suspension{}
			}
			if len(clusters) == 0 {
				s.Suspend.Dispatching = true
				return "suspended in every cluster", nil
			}
			for _, c := range clusters {
				if !slices.Contains(s.Suspend.Clusters, c) {
					s.Suspend.Clusters = append(s.Suspend.Clusters, c)
				}
			}
			slices.Sort(s.Suspend.Clusters)
			return "suspended in " + strings.Join(clusters, ", "), nil
		},
	},
	{
		use:   "unsuspend KIND/NAME",
		short: "Resume Flotilla's writes to members for a template (all clusters, or --cluster ones)",
		apply: func(s *workv1alpha1.ResourceBindingSpec, clusters []string) (string, error) {
			if s.Suspend == nil {
				return "not suspended", nil
			}
			if len(clusters) == 0 {
				s.Suspend = nil
				return "writes resumed in every cluster", nil
			}
			if s.Suspend.Dispatching {
				return "", fmt.Errorf("every cluster is suspended; run unsuspend without --cluster to resume them all")
			}
			s.Suspend.Clusters = slices.DeleteFunc(s.Suspend.Clusters, func(c string) bool { return slices.Contains(clusters, c) })
			if len(s.Suspend.Clusters) == 0 {
				s.Suspend = nil
			}
			return "writes resumed in " + strings.Join(clusters, ", "), nil
		},
	},
	{
		use:   "unmanage KIND/NAME",
		short: "Hand a template's member objects back to unmanaged (all clusters, or --cluster ones), leaving them and their pods running",
		long: `Removes Flotilla's label, annotations and field manager from the member objects and
stops placing the template there; the objects, their specs and their pods are untouched.
Without --cluster every cluster the template is placed on is handed back.`,
		apply: unmanageClusters,
	},
	{
		use:   "manage KIND/NAME",
		short: "Take a template's unmanaged clusters (all, or --cluster ones) back under Flotilla: the inverse of unmanage",
		long: `Places the template again in clusters it was handed back in. The objects there carry no
Flotilla marks any more: with the policy's conflictResolution Overwrite they are adopted in
place (no pod restart while the spec matches); with Abort the Work reports the conflict and
nothing is overwritten. Without --cluster every unmanaged cluster is taken back.`,
		apply: func(s *workv1alpha1.ResourceBindingSpec, clusters []string) (string, error) {
			if len(s.UnmanagedClusters) == 0 {
				return "", fmt.Errorf("no cluster is unmanaged; there is nothing to take back")
			}
			for _, c := range clusters {
				if !slices.Contains(s.UnmanagedClusters, c) {
					return "", fmt.Errorf("--cluster %s: the template is not unmanaged there (unmanaged in: %s)", c, strings.Join(s.UnmanagedClusters, ", "))
				}
			}
			if len(clusters) == 0 {
				clusters = slices.Clone(s.UnmanagedClusters)
			}
			s.UnmanagedClusters = slices.DeleteFunc(s.UnmanagedClusters, func(c string) bool { return slices.Contains(clusters, c) })
			if len(s.UnmanagedClusters) == 0 {
				s.UnmanagedClusters = nil
			}
			msg := "managed again in " + strings.Join(clusters, ", ")
			if s.ConflictResolution != "Overwrite" {
				msg += "; the policy's conflictResolution is Abort, so objects still there are reported as conflicts, not taken over (set conflictResolution: Overwrite to adopt them)"
			}
			return msg, nil
		},
	},
}

func newSyncCommands(g *globals) []*cobra.Command {
	var cmds []*cobra.Command
	for _, sw := range syncSwitches {
		var clusters []string
		cmd := &cobra.Command{
			Use: sw.use, Short: sw.short, Long: sw.long, Args: cobra.ExactArgs(1),
			Example: fmt.Sprintf("  %s %s deployment/web -n shop --cluster east", invokedName(), strings.Fields(sw.use)[0]),
			RunE: func(cmd *cobra.Command, args []string) error {
				kind, name, err := templateArg(args[0])
				if err != nil {
					return err
				}
				c, err := g.controlPlaneClient()
				if err != nil {
					return err
				}
				msg, err := switchSync(cmd.Context(), c, kind, name, g.templateNamespace(), clusters, sw.apply)
				if err != nil {
					return err
				}
				fmt.Fprintf(g.streams.Out, "%s %s\n", args[0], msg)
				return nil
			},
		}
		cmd.Flags().StringSliceVar(&clusters, "cluster", nil, "only these clusters (repeat or comma-separate)")
		cmds = append(cmds, cmd)
	}
	return cmds
}

// unmanageClusters hands the clusters (every placed one when none is named) back to
// unmanaged; `unmanage` and the undo of an adoption share it.
func unmanageClusters(s *workv1alpha1.ResourceBindingSpec, clusters []string) (string, error) {
	if err := placedOn(s, clusters); err != nil {
		return "", err
	}
	if len(clusters) == 0 {
		for _, t := range s.Clusters {
			clusters = append(clusters, t.Name)
		}
	}
	for _, c := range clusters {
		if !slices.Contains(s.UnmanagedClusters, c) {
			s.UnmanagedClusters = append(s.UnmanagedClusters, c)
		}
	}
	slices.Sort(s.UnmanagedClusters)
	return "handed back to unmanaged in " + strings.Join(clusters, ", "), nil
}

// switchSync changes the switches on the template (its annotations, where users write; the
// detector copies them into the binding) with an optimistic lock, retrying on conflict. The
// binding only checks the clusters named: it says where the template is placed.
func switchSync(ctx context.Context, c client.Client, kind, name, namespace string, clusters []string,
	apply func(*workv1alpha1.ResourceBindingSpec, []string) (string, error)) (string, error) {
	var msg string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := findBinding(ctx, c, kind, name, namespace)
		if err != nil {
			return err
		}
		msg, err = switchTemplate(ctx, c, b, func(spec *workv1alpha1.ResourceBindingSpec) (string, error) { return apply(spec, clusters) })
		return err
	})
	return msg, err
}

// switchTemplate applies change to the switches of a binding's template, read from the
// template's annotations, and writes them back there with an optimistic lock.
func switchTemplate(ctx context.Context, c client.Client, b workv1alpha1.Binding, change func(*workv1alpha1.ResourceBindingSpec) (string, error)) (string, error) {
	r := b.BindingSpec().Resource
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion(r.APIVersion)
	tmpl.SetKind(r.Kind)
	if err := c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, tmpl); err != nil {
		return "", fmt.Errorf("reading template %s %s: %w", r.Kind, r.Name, err)
	}
	spec := b.BindingSpec().DeepCopy()
	spec.Suspend, spec.UnmanagedClusters = workv1alpha1.SwitchesFrom(tmpl.GetAnnotations())
	msg, err := change(spec)
	if err != nil {
		return "", err
	}
	patch := client.MergeFromWithOptions(tmpl.DeepCopy(), client.MergeFromWithOptimisticLock{})
	tmpl.SetAnnotations(workv1alpha1.SetSwitches(tmpl.GetAnnotations(), spec.Suspend, spec.UnmanagedClusters))
	if err := c.Patch(ctx, tmpl, patch); err != nil {
		return "", err
	}
	return msg, nil
}
