package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/registration"
)

func newJoinCommand(g *globals) *cobra.Command {
	var o registration.JoinOptions
	var memberKubeconfig string
	var labels []string
	cmd := &cobra.Command{
		Use:   "join NAME --kubeconfig FILE",
		Short: "Register a member cluster: check that it answers, then store its credentials and Cluster",
		Example: fmt.Sprintf(`  %[1]s join east-1 --kubeconfig ~/.kube/east-1.yaml --label region=us-east --label env=prod
  %[1]s join edge-7 --kubeconfig ~/.kube/config --context edge-7`, invokedName()),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if memberKubeconfig == "" {
				return fmt.Errorf("--kubeconfig is required: the member's kubeconfig file")
			}
			kc, err := clientcmd.LoadFromFile(memberKubeconfig)
			if err != nil {
				return fmt.Errorf("--kubeconfig %s: not a valid kubeconfig: %w", memberKubeconfig, err)
			}
			o.Kubeconfig = kc
			if o.Labels, err = parseLabels(labels); err != nil {
				return err
			}
			c, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			cl, err := registration.Join(cmd.Context(), c, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.streams.Out, "cluster/%s joined (endpoint %s)\n", cl.Name, cl.Spec.Endpoint)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&memberKubeconfig, "kubeconfig", "", "kubeconfig file of the member cluster (required)")
	fs.StringVar(&o.Context, "context", "", "context of the member in its kubeconfig (default: its current context)")
	fs.StringArrayVarP(&labels, "label", "l", nil, "label of the Cluster as key=value; repeatable")
	fs.BoolVar(&o.Overwrite, "overwrite", false, "replace the endpoint, credentials and labels of an already joined cluster")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Second, "how long to wait for the member to answer")
	return cmd
}

func parseLabels(pairs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: write labels as key=value, for example region=us-east", p)
		}
		out[k] = v
	}
	return out, nil
}

func newUnjoinCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "unjoin NAME",
		Short: "Remove a member cluster's Cluster and credentials; nothing in the member is touched",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			if err := registration.Unjoin(cmd.Context(), c, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.streams.Out, "cluster/%s unjoined\n", args[0])
			return nil
		},
	}
}

func newGetCommand(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "get clusters [NAME]",
		Short: "List member clusters as kubectl does (-o wide|json|yaml|name)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch args[0] {
			case "clusters", "cluster", "clusters.cluster.flotilla.dev":
			default:
				return fmt.Errorf("unknown resource %q: flotilla get knows clusters", args[0])
			}
			cfg, err := g.controlPlaneConfig()
			if err != nil {
				return err
			}
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			switch output {
			case "", "wide":
				if name != "" {
					return fmt.Errorf("a table of one cluster: use -o yaml, or omit the name")
				}
				return printClusterTable(cmd.Context(), cfg, g.streams.Out, output == "wide")
			case "json", "yaml", "name":
				return printClusters(cmd.Context(), g, name, output)
			default:
				return fmt.Errorf("-o %q: use wide, json, yaml or name", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json, yaml or name")
	return cmd
}

// printClusterTable asks the API server for its Table of clusters, so the columns are exactly
// the CRD's printer columns that kubectl shows.
func printClusterTable(ctx context.Context, cfg *rest.Config, out io.Writer, wide bool) error {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &schema.GroupVersion{Group: clusterv1alpha1.GroupVersion.Group, Version: clusterv1alpha1.GroupVersion.Version}
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = tableSerializer()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return err
	}
	raw, err := rc.Get().Resource("clusters").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		Param("includeObject", "None").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("listing clusters: %w", err)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(raw, table); err != nil {
		return fmt.Errorf("decoding the cluster table: %w", err)
	}
	if len(table.Rows) == 0 {
		fmt.Fprintln(out, "No clusters joined.")
		return nil
	}
	return printers.NewTablePrinter(printers.PrintOptions{Wide: wide}).PrintObj(table, out)
}

func printClusters(ctx context.Context, g *globals, name, output string) error {
	c, err := g.controlPlaneClient()
	if err != nil {
		return err
	}
	list := &clusterv1alpha1.ClusterList{}
	if name != "" {
		cl := &clusterv1alpha1.Cluster{}
		if err := c.Get(ctx, clientKey(name), cl); err != nil {
			return err
		}
		list.Items = []clusterv1alpha1.Cluster{*cl}
	} else if err := c.List(ctx, list); err != nil {
		return err
	}
	out := g.streams.Out
	for i := range list.Items {
		list.Items[i].APIVersion = clusterv1alpha1.GroupVersion.String()
		list.Items[i].Kind = "Cluster"
		list.Items[i].ManagedFields = nil
	}
	switch output {
	case "name":
		for _, cl := range list.Items {
			fmt.Fprintf(out, "cluster.cluster.flotilla.dev/%s\n", cl.Name)
		}
		return nil
	}
	var obj any = list
	if name != "" {
		obj = list.Items[0]
	} else {
		list.APIVersion, list.Kind = clusterv1alpha1.GroupVersion.String(), "ClusterList"
	}
	if output == "json" {
		data, err := json.MarshalIndent(obj, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(data))
		return err
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = out.Write(data)
	return err
}
