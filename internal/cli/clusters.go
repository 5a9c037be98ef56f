package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/agent"
	"github.com/flotilla-dev/flotilla/internal/install"
	"github.com/flotilla-dev/flotilla/internal/pull"
	"github.com/flotilla-dev/flotilla/internal/registration"
)

func newJoinCommand(g *globals) *cobra.Command {
	var o registration.JoinOptions
	var memberKubeconfig, credentials, mode string
	var labels []string
	var bootstrapTTL time.Duration
	var manifest agentManifestFlags
	cmd := &cobra.Command{
		Use:   "join NAME --member-kubeconfig FILE | join NAME --mode Pull",
		Short: "Register a member cluster: create Flotilla's identity in it, then store a token of that identity and the Cluster",
		Long: `Register a member cluster: check that it answers, create Flotilla's identity in it, then store
a token of that identity and the Cluster.

By default (--credentials service-account) the member kubeconfig, an admin's, is used once:
join applies Namespace flotilla-system, ServiceAccount flotilla-system/flotilla-agent,
ClusterRole flotilla:agent and ClusterRoleBinding flotilla:agent in the member, requests a
token of the ServiceAccount (--token-ttl; the controller-manager renews it with a third of its
life left) and stores only the member's server, CA and that token. If a step fails, what join
created in the member is removed again. unjoin removes the identity.

--credentials as-given stores the member kubeconfig itself, for an identity made beforehand.
--dry-run prints what would be created, in the member and the control plane, and writes nothing.

--member-kubeconfig and --member-context name the member; --kubeconfig and --context name the
control plane, as in every other command.

--mode Pull joins a member the control plane cannot (or must not) reach, such as an edge
cluster behind NAT: no kubeconfig is given or stored. join writes the Cluster and prints a
bootstrap token on stdout (the instructions go to stderr) that registers the member's agent
once, within --bootstrap-token-ttl. The agent (flotilla-agent, or flotilla agent) dials the
controller-manager's --agent-bind-address, makes its own key, gets a client certificate that
names this cluster only, and from then on pulls and applies the cluster's Works. Run join
--mode Pull again for a new token (an agent that lost its state, or a token that expired).`,
		Example: fmt.Sprintf(`  %[1]s join east-1 --member-kubeconfig ~/.kube/east-1.yaml --label region=us-east --label env=prod
  %[1]s join edge-7 --member-kubeconfig ~/.kube/config --member-context edge-7 --dry-run
  %[1]s join west-2 --member-kubeconfig west-2-flotilla.yaml --credentials as-given
  %[1]s join store-42 --mode Pull --label region=eu-west --label tier=edge > store-42.token`, invokedName()),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			switch clusterv1alpha1.SyncMode(mode) {
			case clusterv1alpha1.SyncModePush:
			case clusterv1alpha1.SyncModePull:
				if memberKubeconfig != "" || o.Context != "" {
					return usageError(cmd, fmt.Errorf("--member-kubeconfig and --member-context are for Push members: the control plane holds no credentials to a Pull member (its agent dials in)"))
				}
				return joinPull(cmd, g, o, labels, bootstrapTTL, manifest)
			default:
				return usageError(cmd, fmt.Errorf("--mode %q: use Push (the control plane applies to the member) or Pull (an agent in the member dials in)", mode))
			}
			if memberKubeconfig == "" {
				return usageError(cmd, fmt.Errorf("--member-kubeconfig is required: the member's kubeconfig file (--kubeconfig names the control plane's)"))
			}
			kc, err := clientcmd.LoadFromFile(memberKubeconfig)
			if err != nil {
				return fmt.Errorf("--member-kubeconfig %s: not a valid kubeconfig: %w", memberKubeconfig, err)
			}
			// Checked here so the message names this command's flag.
			if _, ok := kc.Contexts[o.Context]; o.Context != "" && !ok {
				return fmt.Errorf("--member-context %q is not in the member's kubeconfig %s (contexts: %v)", o.Context, memberKubeconfig, slices.Sorted(maps.Keys(kc.Contexts)))
			}
			o.Kubeconfig = kc
			o.Warn, o.Out = g.streams.ErrOut, g.streams.Out
			o.Credentials = registration.CredentialsMode(credentials)
			if o.Labels, err = parseLabels(labels); err != nil {
				return err
			}
			c, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			cl, err := registration.Join(cmd.Context(), c, o)
			if err != nil || o.DryRun {
				return err
			}
			fmt.Fprintf(g.streams.Out, "cluster/%s joined (endpoint %s)\n", cl.Name, cl.Spec.Endpoint)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&memberKubeconfig, "member-kubeconfig", "", "kubeconfig file of the member cluster (required)")
	fs.StringVar(&o.Context, "member-context", "", "context of the member in its kubeconfig (default: its current context)")
	// The name join gave the control plane's kubeconfig before --kubeconfig meant it everywhere.
	fs.StringVar(g.kube.KubeConfig, "control-plane-kubeconfig", "", "kubeconfig of the control plane")
	_ = fs.MarkDeprecated("control-plane-kubeconfig", "use --kubeconfig, which names the control plane in every command")
	fs.StringArrayVarP(&labels, "label", "l", nil, "label of the Cluster as key=value; repeatable")
	fs.StringVar(&o.Description, "description", "", "what the cluster is for (spec.description)")
	fs.StringVar(&o.ShortName, "short-name", "", "short name for tables and dashboards, unique in the fleet (a DNS label)")
	fs.StringVar(&o.Environment, "environment", "", "stage the cluster serves, such as prod, staging or edge (a DNS label)")
	fs.BoolVar(&o.Overwrite, "overwrite", false, "replace the endpoint, credentials and labels of an already joined cluster")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Second, "how long to wait for the member to answer")
	fs.StringVar(&credentials, "credentials", string(registration.CredentialsServiceAccount), "what is stored for the member: service-account (create Flotilla's ServiceAccount in the member with the kubeconfig given, store only its token) or as-given (store the kubeconfig given, for an identity you made)")
	fs.DurationVar(&o.TokenTTL, "token-ttl", registration.DefaultTokenTTL, "life of the ServiceAccount token asked for (at least 10m; the member's API server may change it); the controller-manager renews it")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print what would be created in the member and the control plane; write nothing")
	fs.StringVar(&mode, "mode", string(clusterv1alpha1.SyncModePush), "Push (the control plane reaches the member with the kubeconfig given) or Pull (an agent in the member dials in; prints its bootstrap token)")
	fs.DurationVar(&bootstrapTTL, "bootstrap-token-ttl", pull.DefaultTokenTTL, "with --mode Pull: how long the printed token can register the agent (once)")
	fs.BoolVar(&manifest.print, "agent-manifest", false, "with --mode Pull: print, instead of the token alone, the YAML that runs the agent in the member (namespace, rights, token, Deployment) to kubectl apply there")
	fs.StringVar(&manifest.controlPlane, "control-plane-url", "", "with --agent-manifest: the agent endpoint as the member reaches it, https://HOST:PORT")
	fs.StringVar(&manifest.caFile, "agent-ca-file", "", "with --agent-manifest: CA of the agent endpoint's serving certificate (default: the image's system roots)")
	fs.StringVar(&manifest.image, "agent-image", strings.Replace(install.DefaultImage(install.Version()), install.ImageRepository, agent.ImageRepository, 1), "with --agent-manifest: the agent's image")
	fs.StringSliceVar(&o.AllowExecPlugins, "allow-exec-plugin", nil, "exec credential plugin (command name) the kubeconfig may use; refused by default, since it runs on the controller-manager's host (the controller-manager needs the same --allow-exec-plugin)")
	return cmd
}

// agentManifestFlags ask join --mode Pull for the member's agent YAML.
type agentManifestFlags struct {
	print                       bool
	controlPlane, caFile, image string
}

// joinPull writes a Pull Cluster and prints its bootstrap token alone on stdout, or the YAML
// that runs its agent.
func joinPull(cmd *cobra.Command, g *globals, o registration.JoinOptions, labels []string, ttl time.Duration, m agentManifestFlags) error {
	if o.DryRun {
		return usageError(cmd, fmt.Errorf("--dry-run is for Push members: --mode Pull writes only the Cluster and a token"))
	}
	if ttl < time.Minute || ttl > pull.MaxTokenTTL {
		return usageError(cmd, fmt.Errorf("--bootstrap-token-ttl %s: give between 1m and %s (default %s); the agent registers with the token once, soon after join", ttl, pull.MaxTokenTTL, pull.DefaultTokenTTL))
	}
	var caPEM []byte
	if m.print {
		if !strings.HasPrefix(m.controlPlane, "https://") {
			return usageError(cmd, fmt.Errorf("--control-plane-url %q: give the agent endpoint as the member reaches it, https://HOST:PORT", m.controlPlane))
		}
		if m.caFile != "" {
			var err error
			if caPEM, err = os.ReadFile(m.caFile); err != nil {
				return usageError(cmd, fmt.Errorf("--agent-ca-file: %w", err))
			}
		}
	}
	l, err := parseLabels(labels)
	if err != nil {
		return err
	}
	c, err := g.controlPlaneClient()
	if err != nil {
		return err
	}
	cl, tok, expires, err := registration.JoinPull(cmd.Context(), c, registration.PullJoinOptions{Name: o.Name, Labels: l,
		Description: o.Description, ShortName: o.ShortName, Environment: o.Environment, Overwrite: o.Overwrite, TokenTTL: ttl})
	if err != nil {
		return err
	}
	if m.print {
		yaml, err := agent.Manifest(agent.ManifestOptions{Cluster: cl.Name, ControlPlane: m.controlPlane, Token: tok.String(), Image: m.image, CAPEM: caPEM})
		if err != nil {
			return err
		}
		fmt.Fprintf(g.streams.ErrOut, "cluster/%s joined in Pull mode. The YAML on stdout runs its agent: apply it in the member before %s (its token registers once).\n",
			cl.Name, expires.Format(time.RFC3339))
		_, err = g.streams.Out.Write(yaml)
		return err
	}
	fmt.Fprintf(g.streams.ErrOut, `cluster/%s joined in Pull mode. Its bootstrap token (on stdout) registers one agent once, until %s.
In the member, run the agent with it:
  flotilla-agent --cluster %s --control-plane https://CONTROL-PLANE:AGENT-PORT --ca-file CA.crt \
    --bootstrap-token-file TOKEN-FILE --state-dir /var/lib/flotilla-agent
`, cl.Name, expires.Format(time.RFC3339), cl.Name)
	fmt.Fprintln(g.streams.Out, tok.String())
	return nil
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
		Use:               "unjoin NAME",
		ValidArgsFunction: g.completeNames(getResources["clusters"]),
		Short:             "Remove a member cluster: drain its Works, delete its Cluster and credentials and the identity join made in it; its objects stay unless --objects says otherwise",
		Args:              cobra.ExactArgs(1),
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
			if err := registration.Unjoin(cmd.Context(), c, args[0], registration.UnjoinOptions{Objects: policy, Wait: wait, Progress: g.streams.Out, Warn: g.streams.ErrOut}); err != nil {
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
	f := newGetFlags()
	cmd := &cobra.Command{
		Use:   "get clusters|bindings|clusterbindings|works|teams|applications|targetpolicies|clustertargetpolicies [NAME]",
		Short: "List clusters, bindings, works, teams, applications or target policies as kubectl does (-o wide|json|yaml|name|jsonpath=...|custom-columns=..., -l, -A, -w)",
		Example: fmt.Sprintf(`  %[1]s get clusters -o wide
  %[1]s get bindings -n shop
  %[1]s get bindings -A -l app=web -w
  %[1]s get clusters -o jsonpath='{.items[*].metadata.name}'
  %[1]s get works -A`, invokedName()),
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: g.completeGet,
		RunE: func(cmd *cobra.Command, args []string) error {
			res, ok := getResources[args[0]]
			if !ok {
				return usageError(cmd, fmt.Errorf("unknown resource %q: %s get knows clusters, bindings, clusterbindings, works, teams, applications, targetpolicies and clustertargetpolicies", args[0], invokedName()))
			}
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			if res.kind == "Work" {
				return printWorks(cmd.Context(), g, f, name)
			}
			if res.kind == "Team" && name != "" {
				return g.getTeam(cmd.Context(), f, name)
			}
			return g.get(cmd.Context(), res, f, name)
		},
	}
	f.add(cmd, true)
	return cmd
}

// printWorks lists the Works, one per binding and cluster, from the bindings' status: Works
// live in the controller-manager's memory, and each binding reports its clusters.
func printWorks(ctx context.Context, g *globals, f *getFlags, name string) error {
	if !f.human() {
		output := *f.print.OutputFormat
		return fmt.Errorf("-o %s: Works live in the controller-manager's memory, not in the API; `%s get bindings -o %s` shows each cluster's status", output, invokedName(), output)
	}
	if f.watch {
		return fmt.Errorf("-w: Works live in the controller-manager's memory and cannot be watched; `%s get bindings -w` shows each cluster's status as it changes", invokedName())
	}
	sel, err := labels.Parse(f.selector)
	if err != nil {
		return fmt.Errorf("-l %q: %w", f.selector, err)
	}
	c, err := g.controlPlaneClient()
	if err != nil {
		return err
	}
	namespace := g.scope(getResources["bindings"], f.all)
	var bindings []workv1alpha1.Binding
	rbs := &workv1alpha1.ResourceBindingList{}
	if err := c.List(ctx, rbs, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("listing bindings: %w", err)
	}
	for i := range rbs.Items {
		bindings = append(bindings, &rbs.Items[i])
	}
	if namespace == "" {
		crbs := &workv1alpha1.ClusterResourceBindingList{}
		if err := c.List(ctx, crbs, client.MatchingLabelsSelector{Selector: sel}); err != nil && !apierrors.IsForbidden(err) {
			return fmt.Errorf("listing cluster bindings: %w", err)
		}
		for i := range crbs.Items {
			bindings = append(bindings, &crbs.Items[i])
		}
	}
	tw := tabwriter.NewWriter(g.streams.Out, 0, 4, 3, ' ', 0)
	if !*f.print.NoHeaders {
		fmt.Fprintln(tw, "NAMESPACE\tNAME\tCLUSTER\tAPPLIED\tHEALTH\tBINDING")
	}
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
	table, err := fetchTable(ctx, cfg, getResources["clusters"], tableRequest{})
	if err != nil {
		return err
	}
	if len(table.Rows) == 0 {
		fmt.Fprintln(out, "No clusters found.")
		return nil
	}
	return printers.NewTablePrinter(printers.PrintOptions{Wide: wide}).PrintObj(table, out)
}
