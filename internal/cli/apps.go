package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

func init() {
	app := getResource{appsv1alpha1.GroupVersion, "applications", "Application", true}
	tp := getResource{appsv1alpha1.GroupVersion, "targetpolicies", "TargetPolicy", true}
	ctp := getResource{appsv1alpha1.GroupVersion, "clustertargetpolicies", "ClusterTargetPolicy", false}
	for _, n := range []string{"applications", "application", "apps", "app"} {
		getResources[n] = app
	}
	for _, n := range []string{"targetpolicies", "targetpolicy", "targets", "target", "tp"} {
		getResources[n] = tp
	}
	for _, n := range []string{"clustertargetpolicies", "clustertargetpolicy", "clustertargets", "ctp"} {
		getResources[n] = ctp
	}
}

func newAppCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "app",
		Short: "Applications: a team's labelled set of templates, from git or inline",
		Example: fmt.Sprintf(`  %[1]s app create shop-web -n shop --repo https://git.example.com/shop/web.git --revision main --path deploy -l tier=web
  %[1]s app create hello -n shop -f manifests.yaml -l common=true
  %[1]s app list -A -o wide
  %[1]s app get shop-web -n shop -o yaml
  %[1]s app sync shop-web -n shop`, invokedName()),
	}
	var (
		repo, revision, path, secret, description, file string
		interval                                        time.Duration
		labelList, dependsOn                            []string
	)
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create or update an Application from a git directory (--repo) or a manifests file (-f)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lbls, err := parseLabels(labelList)
			if err != nil {
				return err
			}
			app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: g.namespace(), Name: args[0], Labels: lbls}}
			app.Spec.Description = description
			for _, d := range dependsOn {
				ns, name, found := strings.Cut(d, "/")
				if !found {
					ns, name = "", d
				}
				app.Spec.DependsOn = append(app.Spec.DependsOn, appsv1alpha1.ApplicationDependency{Namespace: ns, Name: name})
			}
			switch {
			case repo != "" && file != "":
				return fmt.Errorf("--repo and -f: give one source")
			case repo != "":
				gs := &appsv1alpha1.GitSource{RepoURL: repo, Revision: revision, Path: path}
				if secret != "" {
					gs.SecretRef = &appsv1alpha1.LocalObjectReference{Name: secret}
				}
				if interval > 0 {
					gs.Interval = &metav1.Duration{Duration: interval}
				}
				app.Spec.Source.Git = gs
			case file != "":
				ms, err := readManifests(file)
				if err != nil {
					return err
				}
				app.Spec.Source.Inline = &appsv1alpha1.InlineSource{Manifests: ms}
			default:
				return fmt.Errorf("no source: give --repo URL (with --revision and --path) or -f FILE")
			}
			c, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			return createOrUpdate(cmd, g, c, app, func(cur client.Object) {
				cur.(*appsv1alpha1.Application).Spec = app.Spec
				cur.SetLabels(app.Labels)
			})
		},
	}
	create.Flags().StringVar(&repo, "repo", "", "git repository URL (https://, ssh://, git:// or git@host:path); the Team must list it")
	create.Flags().StringVar(&revision, "revision", "", "branch, tag or full commit SHA (default: the remote's HEAD)")
	create.Flags().StringVar(&path, "path", "", "directory in the repository: plain YAML or a kustomization")
	create.Flags().StringVar(&secret, "secret", "", "Secret in the namespace with username/password, token, or sshPrivateKey/knownHosts")
	create.Flags().DurationVar(&interval, "interval", 0, "poll interval (default 1m, at least 10s)")
	create.Flags().StringVarP(&file, "filename", "f", "", "a YAML file of manifests to carry inline")
	create.Flags().StringVar(&description, "description", "", "what the application is")
	create.Flags().StringSliceVarP(&labelList, "label", "l", nil, "label of the application (its metadata), key=value, repeatable")
	create.Flags().StringSliceVar(&dependsOn, "depends-on", nil, "Applications that must run healthy in a cluster before this one starts there, NAME or NAMESPACE/NAME, repeatable")

	glf := newGetFlags()
	list := &cobra.Command{
		Use: "list", Short: "List Applications as kubectl does (-o, -l, -A, -w as in get)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.get(cmd.Context(), getResources["applications"], glf, "")
		},
	}
	glf.add(list, true)
	one := newGetFlags()
	get := &cobra.Command{
		Use: "get NAME", Short: "Show one Application (-o yaml|json|wide|name|jsonpath=...)", Args: cobra.ExactArgs(1),
		ValidArgsFunction: g.completeNames(getResources["applications"]),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.get(cmd.Context(), getResources["applications"], one, args[0])
		},
	}
	one.add(get, false)
	sync := &cobra.Command{
		Use: "sync NAME", Short: "Fetch the Application's source now instead of at the next poll", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: g.namespace(), Name: args[0]}}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, appsv1alpha1.RequestedAtAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
			if err := c.Patch(cmd.Context(), app, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
				return err
			}
			fmt.Fprintf(g.streams.Out, "application/%s sync requested\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, get, sync)
	return cmd
}

func newTargetCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "target",
		Short: "Target policies: applications selected by label run on clusters selected by label",
		Example: fmt.Sprintf(`  %[1]s target create east -n shop --apps common=true --clusters region=east
  %[1]s target create gpu --cluster-wide --apps gpu=true --clusters gpu=true
  %[1]s target list -A`, invokedName()),
	}
	var (
		apps, clusters string
		clusterWide    bool
	)
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create or update a TargetPolicy (or, with --cluster-wide, a ClusterTargetPolicy)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			appSel, err := policySelector("--apps", apps)
			if err != nil {
				return err
			}
			clusterSel, err := policySelector("--clusters", clusters)
			if err != nil {
				return err
			}
			spec := appsv1alpha1.TargetSpec{AppSelector: *appSel, ClusterSelector: *clusterSel}
			c, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			if clusterWide {
				p := &appsv1alpha1.ClusterTargetPolicy{ObjectMeta: metav1.ObjectMeta{Name: args[0]}, Spec: spec}
				return createOrUpdate(cmd, g, c, p, func(cur client.Object) {
					sp := &cur.(*appsv1alpha1.ClusterTargetPolicy).Spec
					sp.AppSelector, sp.ClusterSelector = spec.AppSelector, spec.ClusterSelector
				})
			}
			p := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: g.namespace(), Name: args[0]}, Spec: spec}
			return createOrUpdate(cmd, g, c, p, func(cur client.Object) {
				sp := &cur.(*appsv1alpha1.TargetPolicy).Spec
				sp.AppSelector, sp.ClusterSelector = spec.AppSelector, spec.ClusterSelector
			})
		},
	}
	create.Flags().StringVar(&apps, "apps", "", "label selector of the Applications, e.g. common=true")
	create.Flags().StringVar(&clusters, "clusters", "", "label selector of the Clusters, e.g. region=east,gpu=true")
	create.Flags().BoolVar(&clusterWide, "cluster-wide", false, "a ClusterTargetPolicy: the platform's, selecting applications of every namespace")
	glf := newGetFlags()
	var wide bool
	list := &cobra.Command{
		Use: "list", Short: "List TargetPolicies (--cluster-wide: ClusterTargetPolicies); -o, -l, -A, -w as in get", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if wide {
				return g.get(cmd.Context(), getResources["clustertargetpolicies"], glf, "")
			}
			return g.get(cmd.Context(), getResources["targetpolicies"], glf, "")
		},
	}
	glf.add(list, true)
	list.Flags().BoolVar(&wide, "cluster-wide", false, "list ClusterTargetPolicies")
	one := newGetFlags()
	var oneWide bool
	get := &cobra.Command{
		Use: "get NAME", Short: "Show one TargetPolicy (--cluster-wide: a ClusterTargetPolicy)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if oneWide {
				return g.get(cmd.Context(), getResources["clustertargetpolicies"], one, args[0])
			}
			return g.get(cmd.Context(), getResources["targetpolicies"], one, args[0])
		},
	}
	one.add(get, false)
	get.Flags().BoolVar(&oneWide, "cluster-wide", false, "a ClusterTargetPolicy")
	cmd.AddCommand(create, list, get)
	return cmd
}

func policySelector(flag, s string) (*policyv1alpha1.LabelSelector, error) {
	if s == "" {
		return nil, fmt.Errorf("%s: give a label selector such as region=east (or key for 'has the label')", flag)
	}
	sel, err := metav1.ParseToLabelSelector(s)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, s, err)
	}
	out := &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{}}
	for k, v := range sel.MatchLabels {
		out.MatchLabels[k] = policyv1alpha1.LabelValue(v)
	}
	for _, e := range sel.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, policyv1alpha1.LabelSelectorRequirement{Key: e.Key, Operator: policyv1alpha1.LabelSelectorOperator(e.Operator), Values: e.Values})
	}
	return out, nil
}

// readManifests reads a multi-document YAML file into inline manifests.
func readManifests(file string) ([]appsv1alpha1.Manifest, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []appsv1alpha1.Manifest
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		d, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		j, err := yaml.YAMLToJSON(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "" {
			continue
		}
		out = append(out, appsv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: j}})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no objects", file)
	}
	return out, nil
}

// createOrUpdate creates obj, or updates the existing one with change.
func createOrUpdate(cmd *cobra.Command, g *globals, c client.Client, obj client.Object, change func(client.Object)) error {
	ctx := cmd.Context()
	kind := fmt.Sprintf("%T", obj)
	kind = kind[len("*v1alpha1."):]
	cur := obj.DeepCopyObject().(client.Object)
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, obj); err != nil {
			return err
		}
		fmt.Fprintf(g.streams.Out, "%s/%s created\n", strings.ToLower(kind), obj.GetName())
	case err != nil:
		return err
	default:
		change(cur)
		if err := c.Update(ctx, cur); err != nil {
			return err
		}
		fmt.Fprintf(g.streams.Out, "%s/%s updated\n", strings.ToLower(kind), obj.GetName())
	}
	return nil
}
