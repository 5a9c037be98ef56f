package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/rest"
	"k8s.io/kubectl/pkg/cmd/get"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/inventory"
)

// getResource is a kind `flotilla get` knows.
type getResource struct {
	gv         schema.GroupVersion
	resource   string
	kind       string
	namespaced bool
}

var getResources = map[string]getResource{}

// getFlags are kubectl's flags for reading a kind, the same on every listing command: -o from
// kubectl's PrintFlags (json, yaml, name, wide, jsonpath=, custom-columns=, go-template=), -l,
// -A and -w.
type getFlags struct {
	print    *get.PrintFlags
	selector string
	all      bool
	watch    bool
	timeout  time.Duration
}

func newGetFlags() *getFlags { return &getFlags{print: get.NewGetPrintFlags()} }

// add puts the flags on cmd; namespaced kinds take -A.
func (f *getFlags) add(cmd *cobra.Command, namespaced bool) {
	f.print.AddFlags(cmd)
	fs := cmd.Flags()
	fs.StringVarP(&f.selector, "selector", "l", "", "label selector, e.g. team=shop,tier!=edge")
	if namespaced {
		fs.BoolVarP(&f.all, "all-namespaces", "A", false, "every namespace (those you may read when you may not list them all)")
	}
	fs.BoolVarP(&f.watch, "watch", "w", false, "after listing, print each change as it happens, until interrupted or --timeout")
	fs.DurationVar(&f.timeout, "timeout", 0, "with -w: stop watching after this long (exit 0); 0 watches until interrupted")
}

// human: the table (ours), not a format of the objects.
func (f *getFlags) human() bool {
	o := *f.print.OutputFormat
	return o == "" || o == "wide"
}

func (f *getFlags) printer() (printers.ResourcePrinter, error) {
	p, err := f.print.ToPrinter()
	if err != nil {
		return nil, fmt.Errorf("-o %q: use one of %s", *f.print.OutputFormat, strings.Join(f.print.AllowedFormats(), ", "))
	}
	if by := f.sortBy(); by != "" {
		p = &get.SortingPrinter{SortField: by, Delegate: p, Decoder: unstructured.UnstructuredJSONScheme}
	}
	return p, nil
}

func (f *getFlags) sortBy() string {
	if by := f.print.HumanReadableFlags.SortBy; by != nil {
		return *by
	}
	return ""
}

// scope is the namespace a listing of res reads, "" for every namespace: none for a
// cluster-scoped kind, every one with -A, else -n or the kubeconfig context's. A namespace
// holds at most one Team, so teams are listed from every namespace unless -n names one.
func (g *globals) scope(res getResource, all bool) string {
	switch {
	case !res.namespaced, all:
		return ""
	case res.kind == "Team" && !g.namespaceFlagSet():
		return ""
	}
	return g.namespace()
}

// get prints one object (name) or a list of res as f says, then its changes with -w.
func (g *globals) get(ctx context.Context, res getResource, f *getFlags, name string) error {
	if _, err := labels.Parse(f.selector); err != nil {
		return fmt.Errorf("-l %q: %w", f.selector, err)
	}
	if name != "" && f.all {
		return fmt.Errorf("-A with a name: an object is read from one namespace; give -n instead")
	}
	return g.getIn(ctx, res, f, g.scope(res, f.all), name)
}

// getIn is get in namespace ns ("" for every one).
func (g *globals) getIn(ctx context.Context, res getResource, f *getFlags, ns, name string) error {
	if f.timeout < 0 {
		return fmt.Errorf("--timeout %s: give 0 (no limit) or more", f.timeout)
	}
	if res.namespaced && ns == "" {
		if err := f.print.EnsureWithNamespace(); err != nil {
			return err
		}
	}
	p, err := f.printer()
	if err != nil {
		return err
	}
	cfg, err := g.controlPlaneConfig()
	if err != nil {
		return err
	}
	out := g.streams.Out
	var rv string
	var columns []metav1.TableColumnDefinition
	headerShown := false
	if f.human() {
		table, err := g.readTable(ctx, cfg, res, tableRequest{ns: ns, name: name, selector: f.selector, full: f.sortBy() != ""})
		if err != nil {
			return err
		}
		rv, columns = table.ResourceVersion, table.ColumnDefinitions
		if obj, ok := rowObject(table); ok && rv == "" { // the Table of one object
			rv = obj.GetResourceVersion()
		}
		headerShown = len(table.Rows) > 0
		if len(table.Rows) == 0 && !f.watch {
			if ns != "" {
				fmt.Fprintf(out, "No %s found in %s namespace.\n", res.resource, ns)
			} else {
				fmt.Fprintf(out, "No %s found.\n", res.resource)
			}
		} else if err := p.PrintObj(table, out); err != nil {
			return err
		}
	} else {
		obj, err := g.readObjects(ctx, res, ns, name, f.selector)
		if err != nil {
			return err
		}
		rv = obj.(metav1.Common).GetResourceVersion()
		if list, ok := obj.(*unstructured.UnstructuredList); ok && f.watch {
			// Watching prints objects one by one, the listed ones too, as kubectl does: a
			// jsonpath reads the same from every line.
			for i := range list.Items {
				if err := p.PrintObj(&list.Items[i], out); err != nil {
					return err
				}
			}
		} else if err := p.PrintObj(obj, out); err != nil {
			return err
		}
	}
	if !f.watch {
		return nil
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	rows := p
	if f.human() {
		// Rows go on under the list's header, as kubectl prints them.
		*f.print.NoHeaders = true
		if rows, err = f.printer(); err != nil {
			return err
		}
	}
	return watchResource(ctx, cfg, res, ns, name, f.selector, rv, f.human(), func(raw json.RawMessage) error {
		if f.human() {
			table := &metav1.Table{}
			if err := json.Unmarshal(raw, table); err != nil {
				return fmt.Errorf("decoding a %s watch event: %w", res.resource, err)
			}
			if len(table.ColumnDefinitions) == 0 {
				table.ColumnDefinitions = columns // the server sends them with the first event only
			}
			columns = table.ColumnDefinitions
			withRowObjects(table)
			showNoClusters(table)
			if !headerShown {
				headerShown = true
				return p.PrintObj(table, out)
			}
			return rows.PrintObj(table, out)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("decoding a %s watch event: %w", res.resource, err)
		}
		return p.PrintObj(obj, out)
	})
}

// restClientFor talks to res's API group; table asks for the server's Table (its printer
// columns, the ones kubectl shows).
func restClientFor(cfg *rest.Config, res getResource) (*rest.RESTClient, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &res.gv
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = tableSerializer()
	return rest.RESTClientFor(cfg)
}

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// tableRequest is what a Table is asked for: one object (name) or those selector selects, in
// ns ("" every namespace); full rows carry whole objects (for --sort-by), else their metadata.
type tableRequest struct {
	ns, name, selector string
	full               bool
}

// readTable reads the server's Table of one object (name) or of those selector selects, in ns
// or, when ns is "", in every namespace: those the user may read when it may not list them all.
func (g *globals) readTable(ctx context.Context, cfg *rest.Config, res getResource, r tableRequest) (*metav1.Table, error) {
	table, err := fetchTable(ctx, cfg, res, r)
	if !apierrors.IsForbidden(err) || !res.namespaced || r.ns != "" {
		return table, err
	}
	merged := &metav1.Table{}
	err = g.eachReadableNamespace(ctx, res, err, func(ns string) error {
		in := r
		in.ns = ns
		t, err := fetchTable(ctx, cfg, res, in)
		if err == nil {
			merged.ColumnDefinitions = t.ColumnDefinitions
			merged.Rows = append(merged.Rows, t.Rows...)
		}
		return err
	})
	return merged, err
}

func fetchTable(ctx context.Context, cfg *rest.Config, res getResource, r tableRequest) (*metav1.Table, error) {
	rc, err := restClientFor(cfg, res)
	if err != nil {
		return nil, err
	}
	req := rc.Get().Resource(res.resource)
	if res.namespaced && r.ns != "" {
		req = req.Namespace(r.ns)
	}
	if r.name != "" {
		req = req.Name(r.name)
	}
	if r.selector != "" {
		req = req.Param("labelSelector", r.selector)
	}
	include := "Metadata"
	if r.full {
		include = "Object"
	}
	result := req.SetHeader("Accept", tableAccept).Param("includeObject", include).Do(ctx)
	raw, err := result.Raw()
	if err != nil {
		// A refusal comes as a Status the table serializer cannot decode ("unknown"): its
		// message says what was refused and to whom.
		var code int
		result.StatusCode(&code)
		if st := (&metav1.Status{}); json.Unmarshal(raw, st) == nil && st.Message != "" {
			st.Code = int32(code)
			return nil, fmt.Errorf("listing %s: %w", res.resource, &apierrors.StatusError{ErrStatus: *st})
		}
		return nil, fmt.Errorf("listing %s: %w", res.resource, err)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(raw, table); err != nil {
		return nil, fmt.Errorf("decoding the %s table: %w", res.resource, err)
	}
	withRowObjects(table)
	showNoClusters(table)
	return table, nil
}

// rowObject is the object of a Table's only row.
func rowObject(table *metav1.Table) (*unstructured.Unstructured, bool) {
	if len(table.Rows) != 1 {
		return nil, false
	}
	obj, ok := table.Rows[0].Object.Object.(*unstructured.Unstructured)
	return obj, ok
}

// showNoClusters writes <none>, as kubectl does for an absent value, in an empty Clusters
// cell: a blank there is easily read as the row's neighbour or as "everywhere", and an
// Application that runs nowhere (refused, or not targeted) must say so.
func showNoClusters(table *metav1.Table) {
	for c, col := range table.ColumnDefinitions {
		if col.Name != "Clusters" {
			continue
		}
		for i := range table.Rows {
			if cells := table.Rows[i].Cells; c < len(cells) && (cells[c] == nil || cells[c] == "") {
				cells[c] = "<none>"
			}
		}
	}
}

// withRowObjects decodes each row's object: the printer reads its namespace (and labels for
// --show-labels) from the object's metadata, --sort-by any field of it.
func withRowObjects(table *metav1.Table) {
	for i := range table.Rows {
		obj := &unstructured.Unstructured{}
		if len(table.Rows[i].Object.Raw) > 0 && json.Unmarshal(table.Rows[i].Object.Raw, &obj.Object) == nil {
			table.Rows[i].Object.Object = obj
		}
	}
}

// readObjects reads one object (name) or the list of those selector selects, as the API
// serves them, for the printers of -o json, yaml, name, jsonpath and the like.
func (g *globals) readObjects(ctx context.Context, res getResource, ns, name, selector string) (runtime.Object, error) {
	c, err := g.controlPlaneClient()
	if err != nil {
		return nil, err
	}
	if name != "" {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(res.gv.WithKind(res.kind))
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			return nil, err
		}
		return obj, nil
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("-l %q: %w", selector, err)
	}
	list := func(ns string) (*unstructured.UnstructuredList, error) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(res.gv.WithKind(res.kind + "List"))
		opts := []client.ListOption{client.MatchingLabelsSelector{Selector: sel}}
		if ns != "" {
			opts = append(opts, client.InNamespace(ns))
		}
		if err := c.List(ctx, l, opts...); err != nil {
			return nil, fmt.Errorf("listing %s: %w", res.resource, err)
		}
		return l, nil
	}
	all, err := list(ns)
	if !apierrors.IsForbidden(err) || !res.namespaced || ns != "" {
		return all, err
	}
	all = &unstructured.UnstructuredList{}
	all.SetGroupVersionKind(res.gv.WithKind(res.kind + "List"))
	err = g.eachReadableNamespace(ctx, res, err, func(ns string) error {
		l, err := list(ns)
		if err == nil {
			all.Items = append(all.Items, l.Items...)
		}
		return err
	})
	return all, err
}

// eachReadableNamespace runs read in each namespace the user may read res in, after it was
// refused (denied) listing res in every namespace at once. It finds the namespaces it can (the
// Namespaces, else the Teams, else the kubeconfig contexts' namespaces), skips those where
// read is refused too, and says on stderr that it listed only those.
func (g *globals) eachReadableNamespace(ctx context.Context, res getResource, denied error, read func(ns string) error) error {
	candidates := g.visibleNamespaces(ctx)
	var listed, skipped []string
	for _, ns := range candidates {
		err := read(ns)
		switch {
		case apierrors.IsForbidden(err):
			skipped = append(skipped, ns)
		case err != nil:
			return err
		default:
			listed = append(listed, ns)
		}
	}
	if len(listed) == 0 {
		return fmt.Errorf("%w; and no namespace you may see lets you read them (give -n NAMESPACE)", denied)
	}
	msg := fmt.Sprintf("you may not list %s in every namespace: listed only %s, the namespaces you may read them in", res.resource, strings.Join(listed, ", "))
	if len(skipped) > 0 {
		msg += fmt.Sprintf(" (skipped, forbidden: %s)", strings.Join(skipped, ", "))
	}
	fmt.Fprintf(g.streams.ErrOut, "warning: %s\n", msg)
	return nil
}

// visibleNamespaces are the namespaces the user can name: every Namespace when it may list
// them, else those of the Teams it may list, of the workloads the inventory API shows it, of
// its kubeconfig contexts, and -n.
func (g *globals) visibleNamespaces(ctx context.Context) []string {
	var out []string
	if c, err := g.controlPlaneClient(); err == nil {
		nss := &corev1.NamespaceList{}
		if c.List(ctx, nss) == nil {
			for _, n := range nss.Items {
				out = append(out, n.Name)
			}
			return out
		}
		teams := &tenancyv1alpha1.TeamList{}
		if c.List(ctx, teams) == nil {
			for _, t := range teams.Items {
				out = append(out, t.Namespace)
			}
		}
	}
	// The inventory API answers with the workloads of every team the user may read.
	if hc, base, err := g.inventoryClient(""); err == nil {
		hc.Timeout = 5 * time.Second
		var placed struct {
			Items []inventory.Workload `json:"items"`
		}
		if getJSON(hc, base+"/api/v1/applications", &placed) == nil {
			for _, w := range placed.Items {
				if w.Namespace != "" {
					out = append(out, w.Namespace)
				}
			}
		}
	}
	if raw, err := g.configFlags().ToRawKubeConfigLoader().RawConfig(); err == nil {
		for _, c := range raw.Contexts {
			if c.Namespace != "" {
				out = append(out, c.Namespace)
			}
		}
	}
	out = append(out, g.namespace())
	slices.Sort(out)
	return slices.Compact(out)
}

// watchResource calls each with every change of one object (name) or of those selector
// selects, from resourceVersion rv, until ctx ends (then nil). A watch the server closes (its
// timeout) is opened again from the last change seen.
func watchResource(ctx context.Context, cfg *rest.Config, res getResource, ns, name, selector, rv string, table bool, each func(json.RawMessage) error) error {
	rc, err := restClientFor(cfg, res)
	if err != nil {
		return err
	}
	for {
		req := rc.Get().Resource(res.resource).Param("watch", "true")
		if res.namespaced && ns != "" {
			req = req.Namespace(ns)
		}
		if name != "" {
			req = req.Param("fieldSelector", "metadata.name="+name)
		}
		if selector != "" {
			req = req.Param("labelSelector", selector)
		}
		if rv != "" {
			req = req.Param("resourceVersion", rv)
		}
		if table {
			req = req.SetHeader("Accept", tableAccept).Param("includeObject", "Metadata")
		} else {
			req = req.SetHeader("Accept", "application/json")
		}
		stream, err := req.Stream(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("watching %s: %w", res.resource, err)
		}
		rv, err = readWatch(stream, rv, each)
		stream.Close()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readWatch reads watch events until the stream ends, returning the last resourceVersion seen.
func readWatch(stream io.Reader, rv string, each func(json.RawMessage) error) (string, error) {
	dec := json.NewDecoder(stream)
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return rv, nil
			}
			return rv, err
		}
		switch ev.Type {
		case "ERROR":
			st := &metav1.Status{}
			_ = json.Unmarshal(ev.Object, st)
			return rv, fmt.Errorf("watch: %s", orDash(st.Message))
		case "BOOKMARK":
		default:
			if err := each(ev.Object); err != nil {
				return rv, err
			}
		}
		// An object carries its resourceVersion; a Table row carries its object's.
		type versioned struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		var seen struct {
			versioned
			Rows []struct {
				Object versioned `json:"object"`
			} `json:"rows"`
		}
		if json.Unmarshal(ev.Object, &seen) == nil {
			for _, r := range seen.Rows {
				if v := r.Object.Metadata.ResourceVersion; v != "" {
					rv = v
				}
			}
			if v := seen.Metadata.ResourceVersion; v != "" {
				rv = v
			}
		}
	}
}
