package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
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
			kind, name, ok := strings.Cut(args[0], "/")
			if !ok || kind == "" || name == "" {
				return fmt.Errorf("%q: write KIND/NAME, for example deployment/web", args[0])
			}
			c, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			if namespace == "" {
				namespace = "default"
			}
			b := &workv1alpha1.ResourceBinding{}
			key := client.ObjectKey{Namespace: namespace, Name: detector.BindingName(kind, name)}
			if err := c.Get(cmd.Context(), key, b); err != nil {
				return fmt.Errorf("no binding for %s in namespace %s (is a propagation policy selecting it?): %w", args[0], namespace, err)
			}
			return describeBinding(cmd.Context(), c, g.streams.Out, b)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the template (default: default)")
	return cmd
}

func describeBinding(_ context.Context, _ client.Client, out io.Writer, b *workv1alpha1.ResourceBinding) error {
	r := b.Spec.Resource
	fmt.Fprintf(out, "Template:   %s %s/%s (%s)\n", r.Kind, r.Namespace, r.Name, r.APIVersion)
	fmt.Fprintf(out, "Binding:    %s/%s\n", b.Namespace, b.Name)
	policy := b.Spec.PolicyRef.Kind + " " + b.Spec.PolicyRef.Name
	if b.Spec.PolicyRef.Namespace != "" {
		policy = b.Spec.PolicyRef.Kind + " " + b.Spec.PolicyRef.Namespace + "/" + b.Spec.PolicyRef.Name
	}
	fmt.Fprintf(out, "Policy:     %s (deletion %s, conflicts %s)\n", policy, b.Spec.DeletionPolicy, b.Spec.ConflictResolution)
	fmt.Fprintf(out, "Replicas:   %d\n", b.Spec.Replicas)
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
	fmt.Fprintln(tw, "  CLUSTER\tREPLICAS\tAPPLIED\tHEALTH\tLAST ERROR")
	for _, t := range b.Spec.Clusters {
		s := status[t.Name]
		fmt.Fprintf(tw, "  %s\t%d\t%v\t%s\t%s\n", t.Name, t.Replicas, s.Applied, orDash(string(s.Health)), orDash(s.Message))
	}
	if len(b.Spec.Clusters) == 0 {
		fmt.Fprintln(tw, "  (none)\t\t\t\t")
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
