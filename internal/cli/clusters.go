package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
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
			o.Warn = g.streams.ErrOut
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
	fs.StringVar(&o.Description, "description", "", "what the cluster is for (spec.description)")
	fs.StringVar(&o.ShortName, "short-name", "", "short name for tables and dashboards, unique in the fleet (a DNS label)")
	fs.StringVar(&o.Environment, "environment", "", "stage the cluster serves, such as prod, staging or edge (a DNS label)")
	fs.BoolVar(&o.Overwrite, "overwrite", false, "replace the endpoint, credentials and labels of an already joined cluster")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Second, "how long to wait for the member to answer")
	fs.StringSliceVar(&o.AllowExecPlugins, "allow-exec-plugin", nil, "exec credential plugin (command name) the kubeconfig may use; refused by default, since it runs on the controller-manager's host (the controller-manager needs the same --allow-exec-plugin)")
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
	var objects string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "unjoin NAME",
		Short: "Remove a member cluster: drain its Works, delete its Cluster and credentials; its objects stay unless --objects says otherwise",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			policy := clusterv1alpha1.ClusterDeletionPolicy(objects)
			switch policy {
			case "", clusterv1alpha1.ClusterDeletionOrphan, clusterv1alpha1.ClusterDeletionDelete, clusterv1alpha1.ClusterDeletionRelease:
			default:
				return fmt.Errorf("--objects %q: use Orphan (leave the member's objects running), Delete (remove them) or Release (hand them back to unmanaged)", objects)
			}
			if wait < 0 {
				return fmt.Errorf("--wait %s: give a duration of 0 or more", wait)
			}
			c, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			if err := registration.Unjoin(cmd.Context(), c, args[0], registration.UnjoinOptions{Objects: policy, Wait: wait, Progress: g.streams.Out}); err != nil {
				return err
			}
			fmt.Fprintf(g.streams.Out, "cluster/%s unjoined\n", args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&objects, "objects", "", "what happens to Flotilla's objects in the member: Orphan (default: left running), Delete, or Release (handed back to unmanaged); sets the Cluster's deletionPolicy")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for the cluster's Works to drain; 0 returns at once")
	return cmd
}

// getResource is a kind `flotilla get` knows.
type getResource struct {
	gv         schema.GroupVersion
	resource   string
	kind       string
	namespaced bool
}

var getResources = map[string]getResource{}

func init() {
	cluster := getResource{clusterv1alpha1.GroupVersion, "clusters", "Cluster", false}
	binding := getResource{workv1alpha1.GroupVersion, "resourcebindings", "ResourceBinding", true}
	clusterBinding := getResource{workv1alpha1.GroupVersion, "clusterresourcebindings", "ClusterResourceBinding", false}
	work := getResource{workv1alpha1.GroupVersion, "works", "Work", true}
	for _, n := range []string{"clusters", "cluster"} {
		getResources[n] = cluster
	}
	for _, n := range []string{"bindings", "binding", "resourcebindings", "resourcebinding", "rb"} {
		getResources[n] = binding
	}
	for _, n := range []string{"clusterbindings", "clusterbinding", "clusterresourcebindings", "clusterresourcebinding", "crb"} {
		getResources[n] = clusterBinding
	}
	for _, n := range []string{"works", "work"} {
		getResources[n] = work
	}
}

func newGetCommand(g *globals) *cobra.Command {
	var output, namespace string
	cmd := &cobra.Command{
		Use:   "get clusters|bindings|clusterbindings|works|teams [NAME]",
		Short: "List clusters, bindings, cluster bindings, works or teams as kubectl does (-o wide|json|yaml|name)",
		Example: fmt.Sprintf(`  %[1]s get clusters -o wide
  %[1]s get bindings -n shop
  %[1]s get works`, invokedName()),
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, ok := getResources[args[0]]
			if !ok {
				return fmt.Errorf("unknown resource %q: flotilla get knows clusters, bindings, clusterbindings, works and teams", args[0])
			}
			cfg, err := g.controlPlaneConfig()
			if err != nil {
				return err
			}
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			if res.kind == "Work" {
				return printWorks(cmd.Context(), g, namespace, name, output)
			}
			switch output {
			case "", "wide":
				if name != "" {
					return fmt.Errorf("a table of one object: use -o yaml, or omit the name")
				}
				return printTable(cmd.Context(), cfg, g.streams.Out, res, namespace, output == "wide")
			case "json", "yaml", "name":
				return printObjects(cmd.Context(), g, res, namespace, name, output)
			default:
				return fmt.Errorf("-o %q: use wide, json, yaml or name", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json, yaml or name")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of bindings, teams, or the bindings of works (default: all namespaces)")
	return cmd
}

// printWorks lists the Works, one per binding and cluster, from the bindings' status: Works
// live in the controller-manager's memory, and each binding reports its clusters.
func printWorks(ctx context.Context, g *globals, namespace, name, output string) error {
	if output != "" && output != "wide" {
		return fmt.Errorf("-o %s: Works live in the controller-manager's memory, not in the API; `flotilla get bindings -o %s` shows each cluster's status", output, output)
	}
	c, err := g.controlPlaneClient()
	if err != nil {
		return err
	}
	var bindings []workv1alpha1.Binding
	rbs := &workv1alpha1.ResourceBindingList{}
	if err := c.List(ctx, rbs, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("listing bindings: %w", err)
	}
	for i := range rbs.Items {
		bindings = append(bindings, &rbs.Items[i])
	}
	if namespace == "" {
		crbs := &workv1alpha1.ClusterResourceBindingList{}
		if err := c.List(ctx, crbs); err != nil && !apierrors.IsForbidden(err) {
			return fmt.Errorf("listing cluster bindings: %w", err)
		}
		for i := range crbs.Items {
			bindings = append(bindings, &crbs.Items[i])
		}
	}
	tw := tabwriter.NewWriter(g.streams.Out, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tCLUSTER\tAPPLIED\tHEALTH\tBINDING")
	rows := 0
	for _, b := range bindings {
		work := workv1alpha1.WorkName(b.GetNamespace(), b.GetName())
		if name != "" && name != work {
			continue
		}
		ref := b.GetName()
		if b.GetNamespace() != "" {
			ref = b.GetNamespace() + "/" + ref
		}
		for _, cs := range b.BindingStatus().Clusters {
			if cs.LastApplied == nil && !cs.Applied && cs.Message == "" {
				continue // no Work there yet
			}
			applied := "False"
			if cs.Applied {
				applied = "True"
			}
			fmt.Fprintf(tw, "flotilla-es-%s\t%s\t%s\t%s\t%s\t%s\n", cs.Cluster, work, cs.Cluster, applied, orDash(string(cs.Health)), ref)
			rows++
		}
	}
	if rows == 0 {
		fmt.Fprintln(g.streams.Out, "No works found.")
		return nil
	}
	return tw.Flush()
}

// printClusterTable prints the clusters as kubectl does.
func printClusterTable(ctx context.Context, cfg *rest.Config, out io.Writer, wide bool) error {
	return printTable(ctx, cfg, out, getResources["clusters"], "", wide)
}

// printTable asks the API server for its Table, so the columns are exactly the CRD's printer
// columns that kubectl shows.
func printTable(ctx context.Context, cfg *rest.Config, out io.Writer, res getResource, namespace string, wide bool) error {
	return printTableSelected(ctx, cfg, out, res, namespace, "", "", wide)
}

// printTableSelected prints one object (name) or those the label selector selects.
func printTableSelected(ctx context.Context, cfg *rest.Config, out io.Writer, res getResource, namespace, name, selector string, wide bool) error {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &res.gv
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = tableSerializer()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return err
	}
	req := rc.Get().Resource(res.resource)
	if res.namespaced && namespace != "" {
		req = req.Namespace(namespace)
	}
	if name != "" {
		req = req.Name(name)
	}
	if selector != "" {
		req = req.Param("labelSelector", selector)
	}
	raw, err := req.SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		Param("includeObject", "Metadata").DoRaw(ctx)
	if err != nil {
		// A refusal comes as a Status the table serializer cannot decode ("unknown"): its
		// message says what was refused and to whom.
		if st := (&metav1.Status{}); json.Unmarshal(raw, st) == nil && st.Message != "" {
			return fmt.Errorf("listing %s: %s", res.resource, st.Message)
		}
		return fmt.Errorf("listing %s: %w", res.resource, err)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(raw, table); err != nil {
		return fmt.Errorf("decoding the %s table: %w", res.resource, err)
	}
	for i := range table.Rows {
		// The printer reads each row's namespace from its object's metadata.
		pom := &metav1.PartialObjectMetadata{}
		if len(table.Rows[i].Object.Raw) > 0 && json.Unmarshal(table.Rows[i].Object.Raw, pom) == nil {
			table.Rows[i].Object.Object = pom
		}
	}
	if len(table.Rows) == 0 {
		if namespace != "" && res.namespaced {
			fmt.Fprintf(out, "No %s found in %s namespace.\n", res.resource, namespace)
			return nil
		}
		fmt.Fprintf(out, "No %s found.\n", res.resource)
		return nil
	}
	return printers.NewTablePrinter(printers.PrintOptions{Wide: wide, WithNamespace: res.namespaced && namespace == ""}).PrintObj(table, out)
}

func printObjects(ctx context.Context, g *globals, res getResource, namespace, name, output string) error {
	return printObjectsSelected(ctx, g, res, namespace, name, "", output)
}

func printObjectsSelected(ctx context.Context, g *globals, res getResource, namespace, name, selector, output string) error {
	c, err := g.controlPlaneClient()
	if err != nil {
		return err
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(res.gv.WithKind(res.kind + "List"))
	if name != "" {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(res.gv.WithKind(res.kind))
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
			return err
		}
		list.Items = []unstructured.Unstructured{*obj}
	} else {
		var opts []client.ListOption
		if namespace != "" {
			opts = append(opts, client.InNamespace(namespace))
		}
		if selector != "" {
			sel, err := labels.Parse(selector)
			if err != nil {
				return fmt.Errorf("-l %q: %w", selector, err)
			}
			opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
		}
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
	}
	out := g.streams.Out
	for i := range list.Items {
		unstructured.RemoveNestedField(list.Items[i].Object, "metadata", "managedFields")
	}
	if output == "name" {
		for _, o := range list.Items {
			fmt.Fprintf(out, "%s.%s/%s\n", strings.ToLower(res.kind), res.gv.Group, o.GetName())
		}
		return nil
	}
	var obj any = list.UnstructuredContent()
	if name != "" {
		obj = list.Items[0].Object
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
