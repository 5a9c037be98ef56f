package cli

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/inventory"
)

// argoApplication is the part of Argo CD's Application (argoproj.io/v1alpha1) an export fills.
type argoApplication struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   argoMetadata      `json:"metadata"`
	Spec       argoApplicationSp `json:"spec"`
}

type argoMetadata struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels,omitempty"`
}

type argoApplicationSp struct {
	Project     string          `json:"project"`
	Source      argoSource      `json:"source"`
	Destination argoDestination `json:"destination"`
}

type argoSource struct {
	RepoURL        string `json:"repoURL"`
	TargetRevision string `json:"targetRevision"`
	Path           string `json:"path"`
}

type argoDestination struct {
	Server    string `json:"server"`
	Namespace string `json:"namespace"`
}

func newExportCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "export", Short: "Export the fleet's state for other tools"}
	var cluster, argoNS, project, server, invURL string
	var all bool
	argocd := &cobra.Command{
		Use:   "argocd --cluster C",
		Short: "Argo CD Applications for every git application placed on a cluster, pinned to the commit in force there (for an Argo CD in that cluster that pulls)",
		Example: fmt.Sprintf(`  %[1]s export argocd --cluster edge-17 > apps.yaml
  %[1]s export argocd --cluster edge-17 -n shop --argocd-namespace argocd`, invokedName()),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cluster == "" {
				return fmt.Errorf("--cluster: name the cluster whose Argo CD will pull")
			}
			c, base, err := g.inventoryClient(invURL)
			if err != nil {
				return err
			}
			q := url.Values{"cluster": {cluster}}
			if ns := g.namespaceGiven(); ns != "" && !all {
				q.Set("namespace", ns)
			}
			var out struct {
				Items []inventory.Workload `json:"items"`
			}
			if err := getJSON(c, base+"/api/v1/applications?"+q.Encode(), &out); err != nil {
				return err
			}
			kc, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			// A team user may not read Clusters; then the inventory's answer alone tells.
			if err := kc.Get(cmd.Context(), client.ObjectKey{Name: cluster}, &clusterv1alpha1.Cluster{}); apierrors.IsNotFound(err) {
				return fmt.Errorf("--cluster %s: no such cluster is joined (`%s get clusters` lists them)", cluster, invokedName())
			}
			type key struct{ ns, app string }
			commits := map[key]string{}
			var order []key
			for _, w := range out.Items {
				if w.Application == "" {
					continue
				}
				k := key{w.Namespace, w.Application}
				if _, seen := commits[k]; !seen {
					order = append(order, k)
					commits[k] = ""
				}
				for _, p := range w.Clusters {
					if p.Cluster == cluster && p.Commit != "" {
						commits[k] = p.Commit
					}
				}
			}
			slices.SortFunc(order, func(a, b key) int { return strings.Compare(a.ns+"/"+a.app, b.ns+"/"+b.app) })
			docs := 0
			for _, k := range order {
				app := &appsv1alpha1.Application{}
				if err := kc.Get(cmd.Context(), client.ObjectKey{Namespace: k.ns, Name: k.app}, app); err != nil {
					return fmt.Errorf("reading Application %s/%s: %w", k.ns, k.app, err)
				}
				gs := app.Spec.Source.Git
				if gs == nil {
					fmt.Fprintf(g.streams.ErrOut, "# skipped %s/%s: its manifests are inline, Argo CD pulls from git only\n", k.ns, k.app)
					continue
				}
				rev := commits[k]
				if rev == "" {
					rev = app.Status.Commit // no history yet: the commit in force fleet-wide
				}
				name := k.ns + "." + k.app // a namespace holds no dots: shop/a-x and shop-a/x never meet
				if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
					return fmt.Errorf("Argo CD Application name %q: %s", name, strings.Join(errs, "; "))
				}
				path := gs.Path
				if path == "" {
					path = "."
				}
				a := argoApplication{APIVersion: "argoproj.io/v1alpha1", Kind: "Application",
					Metadata: argoMetadata{Name: name, Namespace: argoNS, Labels: map[string]string{"apps.flotilla.dev/application": k.app, "apps.flotilla.dev/team": k.ns}},
					Spec: argoApplicationSp{Project: project,
						Source:      argoSource{RepoURL: gs.RepoURL, TargetRevision: rev, Path: path},
						Destination: argoDestination{Server: server, Namespace: k.ns}}}
				b, err := yaml.Marshal(a)
				if err != nil {
					return err
				}
				fmt.Fprintf(g.streams.Out, "---\n%s", b)
				docs++
			}
			if docs == 0 {
				fmt.Fprintf(g.streams.ErrOut, "# no git application runs on %s\n", cluster)
			}
			return nil
		},
	}
	f := argocd.Flags()
	f.StringVar(&cluster, "cluster", "", "the cluster whose own Argo CD pulls")
	f.BoolVarP(&all, "all-namespaces", "A", false, "every team you may read, whatever -n or the kubeconfig context says (the default when neither names a namespace)")
	f.StringVar(&argoNS, "argocd-namespace", "argocd", "namespace of the Argo CD Applications")
	f.StringVar(&project, "project", "default", "Argo CD project")
	f.StringVar(&server, "destination-server", "https://kubernetes.default.svc", "destination of the Applications: the cluster Argo CD runs in")
	f.StringVar(&invURL, "inventory-url", "", "the inventory API (default: $FLOTILLA_INVENTORY_URL, else the local fleet's)")
	cmd.AddCommand(argocd)
	return cmd
}
