package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/detector"
)

func newDescribeCommand(g *globals) *cobra.Command {
	var namespace string
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
			b, err := findBinding(cmd.Context(), c, kind, name, namespace)
			if err != nil {
				return err
			}
			return describeBinding(cmd.Context(), c, g.streams.Out, b)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the template (default: default)")
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

// findBinding finds the binding of template KIND/NAME; without a namespace, a cluster-scoped
// template (a Namespace, a ClusterRole) is found too.
func findBinding(ctx context.Context, c client.Client, kind, name, namespace string) (workv1alpha1.Binding, error) {
	bindingName := detector.BindingName(kind, name)
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
	if err != nil {
		return nil, fmt.Errorf("no binding for %s/%s in namespace %s (is a propagation policy selecting it?): %w", kind, name, ns, err)
	}
	return b, nil
}

func describeBinding(_ context.Context, _ client.Client, out io.Writer, binding workv1alpha1.Binding) error {
	b := struct {
		Spec   *workv1alpha1.ResourceBindingSpec
		Status *workv1alpha1.ResourceBindingStatus
	}{binding.BindingSpec(), binding.BindingStatus()}
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
	fmt.Fprintf(out, "Health:     %s\n", orDash(string(b.Status.Health)))
	for _, t := range []string{workv1alpha1.ConditionScheduled, workv1alpha1.ConditionApplied, workv1alpha1.ConditionHealthy} {
		if c := meta.FindStatusCondition(b.Status.Conditions, t); c != nil {
			fmt.Fprintf(out, "%-11s %s (%s) %s\n", t+":", c.Status, c.Reason, c.Message)
		}
	}
	fmt.Fprintln(out, "\nClusters:")
	status := map[string]workv1alpha1.ClusterStatus{}
	for _, s := range b.Status.Clusters {
		status[s.Cluster] = s
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLUSTER\tREPLICAS\tAPPLIED\tHEALTH\tSYNC\tLAST ERROR")
	for _, t := range b.Spec.Clusters {
		if slices.Contains(b.Spec.UnmanagedClusters, t.Name) {
			continue
		}
		s := status[t.Name]
		sync := "managed"
		switch {
		case b.Spec.Suspended(t.Name):
			sync = "suspended"
		case s.Lost:
			sync = "lost"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%v\t%s\t%s\t%s\n", t.Name, t.Replicas, s.Applied, orDash(string(s.Health)), sync, orDash(s.Message))
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
	if s := b.Spec.Suspend; s != nil && s.Dispatching {
		fmt.Fprintln(out, "\nSuspended:  every cluster (flotilla unsuspend to resume)")
	}
	for _, f := range b.Spec.FailedClusters {
		fmt.Fprintf(out, "Failed over from %s at %s: %s\n", f.Cluster, f.Time.UTC().Format(time.RFC3339), f.Message)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
