package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/rest"
	"k8s.io/kubectl/pkg/cmd/get"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/internal/history"
	"github.com/flotilla-dev/flotilla/internal/inventory"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// inventoryClient talks to the inventory API with the control-plane kubeconfig's own
// credentials (client certificate or bearer token) and CA: the API answers as that user.
func (g *globals) inventoryClient(urlFlag string) (*http.Client, string, error) {
	cfg, err := g.controlPlaneConfig()
	if err != nil {
		return nil, "", err
	}
	base, err := g.inventoryURL(urlFlag)
	if err != nil {
		return nil, "", err
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, "", err
	}
	return &http.Client{Transport: rt, Timeout: 30 * time.Second}, base, nil
}

// inventoryURL is --inventory-url, else $FLOTILLA_INVENTORY_URL, else the local fleet's.
func (g *globals) inventoryURL(urlFlag string) (string, error) {
	base := urlFlag
	if base == "" {
		base = os.Getenv("FLOTILLA_INVENTORY_URL")
	}
	if base == "" {
		if _, err := os.Stat(filepath.Join(g.stateDir, "state.json")); err == nil {
			lf, err := localfleet.Open(localfleet.Options{StateDir: g.stateDir})
			if err == nil {
				base = lf.InventoryURL()
			}
		}
	}
	if base == "" {
		return "", fmt.Errorf("where is the inventory API? give --inventory-url https://HOST:PORT (the controller-manager's --inventory-bind-address) or set FLOTILLA_INVENTORY_URL")
	}
	return strings.TrimSuffix(base, "/"), nil
}

// getJSON reads one API answer, turning an error body into an error naming its parameter.
func getJSON(c *http.Client, u string, into any) error {
	resp, err := c.Get(u)
	if err != nil {
		return fmt.Errorf("inventory API: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(body, &e) == nil && e.Message != "" {
			return fmt.Errorf("inventory API %s: %s", resp.Status, e.Message)
		}
		return fmt.Errorf("inventory API %s", resp.Status)
	}
	return json.Unmarshal(body, into)
}

func newHistoryCommand(g *globals) *cobra.Command {
	var (
		app, cluster, cause, since, until, invURL string
		all                                       bool
		limit                                     int
		watch                                     bool
	)
	pf := get.NewGetPrintFlags()
	cmd := &cobra.Command{
		Use:   "history",
		Short: "What changed in the fleet, in order: per application, cluster or team, with causes and actors (the inventory API, as you)",
		Example: fmt.Sprintf(`  %[1]s history --app app1 -n shop --since 24h
  %[1]s history --cluster east --since 12h -o wide
  %[1]s history -w`, invokedName()),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			team := ""
			if !all {
				team = g.namespaceGiven()
			}
			if team != "" {
				if errs := validation.IsDNS1123Label(team); len(errs) > 0 {
					return fmt.Errorf("-n %q: a team is its namespace, so a DNS label (lower-case letters, digits and '-'): %s", team, strings.Join(errs, "; "))
				}
			}
			c, base, err := g.inventoryClient(invURL)
			if err != nil {
				return err
			}
			q := url.Values{}
			for k, v := range map[string]string{"application": app, "cluster": cluster, "team": team, "cause": cause, "since": since, "until": until} {
				if v != "" {
					q.Set(k, v)
				}
			}
			q.Set("limit", fmt.Sprint(limit))
			output := *pf.OutputFormat
			p, err := pf.ToPrinter()
			if err != nil || output == "name" {
				return fmt.Errorf("-o %q: use wide, json, yaml, jsonpath=..., custom-columns=... or go-template=...", output)
			}
			var page inventory.HistoryPage
			if err := getJSON(c, base+"/api/v1/history?"+q.Encode(), &page); err != nil {
				return err
			}
			switch output {
			case "json", "yaml":
				return printData(g.streams.Out, output, page)
			case "", "wide":
			default:
				// The other printers read the records as objects: a list, or one per line with -w.
				records, err := historyObjects(page.Items)
				if err != nil {
					return err
				}
				if !watch {
					return p.PrintObj(records, g.streams.Out)
				}
				p = printEach{p}
			}
			items := slices.Clone(page.Items)
			slices.Reverse(items) // oldest first, as a log reads
			tw := tabwriter.NewWriter(g.streams.Out, 0, 4, 2, ' ', 0)
			header := "TIME\tTEAM\tAPP\tOBJECT\tCLUSTER\tREVISION\tCAUSE\tOUTCOME\tDETAIL"
			if output == "wide" {
				header += "\tIMAGES\tCOMMIT\tACTOR"
			}
			if (output == "" || output == "wide") && !*pf.NoHeaders {
				fmt.Fprintln(tw, header)
			}
			seen := map[string]bool{}
			print := func(items []inventory.HistoryItem) {
				for _, it := range items {
					if seen[it.ID] {
						continue
					}
					seen[it.ID] = true
					if output != "" && output != "wide" {
						if records, err := historyObjects([]inventory.HistoryItem{it}); err == nil {
							_ = p.PrintObj(records, g.streams.Out)
						}
						continue
					}
					line := fmt.Sprintf("%s\t%s\t%s\t%s/%s\t%s\t%s\t%s\t%s\t%s", it.Time.Local().Format("2006-01-02 15:04:05"), orDash(it.Team), orDash(it.Application),
						strings.ToLower(it.Kind), it.Name, it.Cluster, revisions(it), it.Cause, it.Outcome, orDash(it.CauseDetail))
					if output == "wide" {
						line += fmt.Sprintf("\t%s\t%s\t%s", orDash(strings.Join(it.Images, ",")), orDash(shortCommit(it.Commit)), orDash(it.Actor))
					}
					fmt.Fprintln(tw, line)
				}
				_ = tw.Flush()
			}
			print(items)
			if len(items) == 0 && !watch {
				fmt.Fprintln(g.streams.Out, "No history found.")
			}
			for watch {
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(2 * time.Second):
				}
				q.Set("since", "10m")
				if err := getJSON(c, base+"/api/v1/history?"+q.Encode(), &page); err != nil {
					return err
				}
				items := slices.Clone(page.Items)
				slices.Reverse(items)
				print(items)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "one application")
	f.StringVar(&cluster, "cluster", "", "one cluster")
	f.BoolVarP(&all, "all-namespaces", "A", false, "every team you may read, whatever -n or the kubeconfig context says (the default when neither names a namespace)")
	f.StringVar(&cause, "cause", "", "one cause: "+strings.Join(history.Causes, ", "))
	f.StringVar(&since, "since", "", "from this time (RFC 3339) or this long ago (24h)")
	f.StringVar(&until, "until", "", "up to this time (RFC 3339) or this long ago")
	f.IntVar(&limit, "limit", 100, "records (1-1000)")
	f.BoolVarP(&watch, "watch", "w", false, "keep printing new records")
	pf.AddFlags(cmd)
	f.StringVar(&invURL, "inventory-url", "", "the inventory API (default: $FLOTILLA_INVENTORY_URL, else the local fleet's)")
	return cmd
}

func newWhereCommand(g *globals) *cobra.Command {
	var output, invURL string
	cmd := &cobra.Command{
		Use:   "where app/NAME|KIND/NAME",
		Short: "Where an application or template runs: per cluster its revision, health, since when, images, commit and why (the inventory API, as you)",
		Example: fmt.Sprintf(`  %[1]s where app/app1 -n shop
  %[1]s where deployment/web -n shop -o json`, invokedName()),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, ok := strings.Cut(args[0], "/")
			if !ok || name == "" {
				return fmt.Errorf("%q: give app/NAME or KIND/NAME, e.g. app/shop-web or deployment/web", args[0])
			}
			c, base, err := g.inventoryClient(invURL)
			if err != nil {
				return err
			}
			q := url.Values{}
			q.Set("namespace", g.namespace())
			switch strings.ToLower(kind) {
			case "app", "application", "applications":
				q.Set("application", name)
			default:
				k, err := kindOf(kind)
				if err != nil {
					return err
				}
				q.Set("kind", k)
				q.Set("name", name)
			}
			var out struct {
				Items []inventory.Workload `json:"items"`
			}
			if err := getJSON(c, base+"/api/v1/applications?"+q.Encode(), &out); err != nil {
				return err
			}
			switch output {
			case "json", "yaml":
				return printData(g.streams.Out, output, out)
			case "":
			default:
				return fmt.Errorf("-o %q: use json or yaml", output)
			}
			if len(out.Items) == 0 {
				return fmt.Errorf("%s not found in namespace %s (or not placed anywhere yet)", args[0], q.Get("namespace"))
			}
			tw := tabwriter.NewWriter(g.streams.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "OBJECT\tCLUSTER\tREVISION\tHEALTH\tSINCE\tIMAGES\tCOMMIT\tWHY")
			for _, w := range out.Items {
				why := w.Policy
				if len(w.TargetPolicies) > 0 {
					why = "TargetPolicy " + strings.Join(w.TargetPolicies, ", ") + " (" + w.Policy + ")"
				}
				for _, p := range w.Clusters {
					since := "-"
					if p.Since != nil {
						since = p.Since.Local().Format("2006-01-02 15:04:05")
					}
					fmt.Fprintf(tw, "%s/%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", strings.ToLower(w.Kind), w.Name, p.Cluster, p.Revision, orDash(p.Health), since,
						orDash(strings.Join(p.Images, ",")), orDash(shortCommit(w.Commit)), why)
				}
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	cmd.Flags().StringVar(&invURL, "inventory-url", "", "the inventory API (default: $FLOTILLA_INVENTORY_URL, else the local fleet's)")
	return cmd
}

// kindOf turns a kubectl-style kind (deployment, deploy, Deployment) into the Kind.
func kindOf(s string) (string, error) {
	known := map[string]string{"deployment": "Deployment", "deploy": "Deployment", "statefulset": "StatefulSet", "sts": "StatefulSet",
		"daemonset": "DaemonSet", "ds": "DaemonSet", "service": "Service", "svc": "Service", "configmap": "ConfigMap", "cm": "ConfigMap",
		"secret": "Secret", "job": "Job", "cronjob": "CronJob", "rollout": "Rollout",
		"deployments": "Deployment", "statefulsets": "StatefulSet", "daemonsets": "DaemonSet", "services": "Service", "configmaps": "ConfigMap",
		"secrets": "Secret", "jobs": "Job", "cronjobs": "CronJob", "rollouts": "Rollout"}
	if k, ok := known[strings.ToLower(s)]; ok {
		return k, nil
	}
	if s != "" && s[0] >= 'A' && s[0] <= 'Z' {
		return s, nil
	}
	return "", fmt.Errorf("kind %q: give it as the API names it, e.g. Deployment", s)
}

func revisions(it inventory.HistoryItem) string {
	switch {
	case it.FromRevision == 0 && it.ToRevision == 0:
		return "-" // a kind whose revisions are not tracked (no rollout)
	case it.Outcome == "removed":
		return fmt.Sprintf("%d -> -", it.FromRevision)
	case it.FromRevision == 0:
		return fmt.Sprintf("- -> %d", it.ToRevision)
	}
	return fmt.Sprintf("%d -> %d", it.FromRevision, it.ToRevision)
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// historyObjects are history records as a list of objects, for the printers of -o jsonpath,
// custom-columns and go-template.
func historyObjects(items []inventory.HistoryItem) (*unstructured.UnstructuredList, error) {
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
	for _, it := range items {
		data, err := json.Marshal(it)
		if err != nil {
			return nil, err
		}
		obj := map[string]any{}
		if err := json.Unmarshal(data, &obj); err != nil {
			return nil, err
		}
		list.Items = append(list.Items, unstructured.Unstructured{Object: obj})
	}
	return list, nil
}

// printEach prints the items of a list one by one, as watching does.
type printEach struct{ printers.ResourcePrinter }

func (p printEach) PrintObj(obj runtime.Object, w io.Writer) error {
	list, ok := obj.(*unstructured.UnstructuredList)
	if !ok {
		return p.ResourcePrinter.PrintObj(obj, w)
	}
	for i := range list.Items {
		if err := p.ResourcePrinter.PrintObj(&list.Items[i], w); err != nil {
			return err
		}
	}
	return nil
}

func printData(out io.Writer, format string, v any) error {
	if format == "json" {
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(b))
		return err
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}

func newWhatIfCommand(g *globals) *cobra.Command {
	var file, output, invURL string
	cmd := &cobra.Command{
		Use:   "what-if -f FILE",
		Short: "Preview what a changed Cluster, PropagationPolicy, ClusterPropagationPolicy, TargetPolicy or ClusterTargetPolicy would move, writing nothing (the inventory API, as you)",
		Long: `Preview what a changed object would move, writing nothing: the inventory API schedules the
templates it concerns as the control plane would and shows, per template, the clusters added and
removed and the replicas moved. You must be allowed to make the change.

It takes a Cluster, a PropagationPolicy or ClusterPropagationPolicy, or a TargetPolicy or
ClusterTargetPolicy. For a target policy, each Application it selects before or after the change
is placed anew; an application left without placement (no target policy, policies that disagree,
no cluster) is shown with the reason in place of its clusters.`,
		Example: fmt.Sprintf(`  %[1]s what-if -f cluster-west-relabelled.yaml
  kubectl get propagationpolicy web -n shop -o yaml | edit... | %[1]s what-if -f -
  kubectl get targetpolicy web -n shop -o yaml | edit... | %[1]s what-if -f -`, invokedName()),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return fmt.Errorf("-f FILE: the changed object as YAML (- for stdin)")
			}
			var body []byte
			var err error
			if file == "-" {
				body, err = io.ReadAll(g.streams.In)
			} else {
				body, err = os.ReadFile(file)
			}
			if err != nil {
				return err
			}
			c, base, err := g.inventoryClient(invURL)
			if err != nil {
				return err
			}
			resp, err := c.Post(base+"/api/v1/what-if", "application/yaml", strings.NewReader(string(body)))
			if err != nil {
				return fmt.Errorf("inventory API: %w", err)
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				var e struct {
					Message string `json:"message"`
				}
				_ = json.Unmarshal(raw, &e)
				return fmt.Errorf("what-if %s: %s", resp.Status, e.Message)
			}
			var out inventory.WhatIf
			if err := json.Unmarshal(raw, &out); err != nil {
				return err
			}
			if output == "json" || output == "yaml" {
				return printData(g.streams.Out, output, out)
			}
			fmt.Fprintf(g.streams.Out, "%s would change %d placements (%d unchanged); releases started: %d\n", out.Object, len(out.Changes), out.Unchanged, out.Releases)
			tw := tabwriter.NewWriter(g.streams.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "OBJECT\tADDED\tREMOVED\tREPLICAS MOVED\tAFTER")
			for _, ch := range out.Changes {
				after := ch.Error
				if after == "" {
					var parts []string
					for _, t := range ch.After {
						parts = append(parts, fmt.Sprintf("%s:%d", t.Name, t.Replicas))
					}
					after = orDash(strings.Join(parts, " "))
				}
				fmt.Fprintf(tw, "%s/%s/%s\t%s\t%s\t%d\t%s\n", ch.Namespace, strings.ToLower(ch.Kind), ch.Name, orDash(strings.Join(ch.Added, ",")), orDash(strings.Join(ch.Removed, ",")), ch.ReplicasMoved, after)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(g.streams.Out, out.Note)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "the changed object (YAML or JSON; - for stdin)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	cmd.Flags().StringVar(&invURL, "inventory-url", "", "the inventory API (default: $FLOTILLA_INVENTORY_URL, else the local fleet's)")
	return cmd
}
