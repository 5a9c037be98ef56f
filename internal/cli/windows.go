package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/changewindow"
)

func newWindowsCommand(g *globals) *cobra.Command {
	var all bool
	var cluster string
	cmd := &cobra.Command{
		Use:   "windows",
		Short: "List the change windows: which are open now and until when, and when each opens next",
		Long: `List the platform's ClusterChangeWindows and the namespace's ChangeWindows (-A: every
namespace you may read), each with whether it is open now and until when, its next opening, and
what it selects. While a Deny window is open, or outside every Allow window that selects it, no
release starts a wave or a canary step in a selected cluster and no Application render applies;
failover, drift correction and rollback still run. --cluster shows only the windows that select
that cluster.`,
		Example: fmt.Sprintf(`  %[1]s windows -n shop
  %[1]s windows -A --cluster west-1`, invokedName()),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			var clusterLabels map[string]string
			clusterNote := ""
			if cluster != "" {
				cl := &clusterv1alpha1.Cluster{}
				switch err := c.Get(cmd.Context(), client.ObjectKey{Name: cluster}, cl); {
				case apierrors.IsForbidden(err):
					// A team may not read Clusters: it sees every window rather than none.
					clusterNote = fmt.Sprintf("--cluster %s: you may not read Clusters, so every window is listed, whichever clusters it selects", cluster)
				case err != nil:
					return fmt.Errorf("--cluster %s: %w", cluster, err)
				default:
					clusterLabels = cl.Labels
					if clusterLabels == nil {
						clusterLabels = map[string]string{}
					}
				}
			}
			ns := g.namespace()
			if all {
				ns = ""
			}
			windows, bad, note, err := readWindows(cmd, c, ns, all)
			if err != nil {
				return err
			}
			if clusterNote != "" {
				note = strings.TrimSpace(note + "\n" + clusterNote)
			}
			return printWindows(g.streams.Out, windows, bad, note, clusterLabels, time.Now())
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list the ChangeWindows of every namespace, with the platform's")
	cmd.Flags().StringVar(&cluster, "cluster", "", "only the windows that select this member cluster")
	return cmd
}

// readWindows reads the windows a user may read; a platform's windows the user may not list are
// said in note rather than failing the listing of the team's own.
func readWindows(cmd *cobra.Command, c client.Client, ns string, all bool) ([]*changewindow.Window, []error, string, error) {
	windows, bad, err := changewindow.List(cmd.Context(), c, ns, all || ns != "")
	if err == nil || !apierrors.IsForbidden(err) {
		return windows, bad, "", err
	}
	// No right to the platform's windows: list the namespace's alone.
	var list rolloutv1alpha1.ChangeWindowList
	if err := c.List(cmd.Context(), &list, client.InNamespace(ns)); err != nil {
		return nil, nil, "", err
	}
	for _, w := range list.Items {
		parsed, perr := changewindow.New(w.Namespace, w.Name, w.Spec)
		if perr != nil {
			bad = append(bad, fmt.Errorf("ChangeWindow %s/%s: %w", w.Namespace, w.Name, perr))
			continue
		}
		windows = append(windows, parsed)
	}
	return windows, bad, "you may not list ClusterChangeWindows: the platform's windows are not shown", nil
}

func printWindows(out io.Writer, windows []*changewindow.Window, bad []error, note string, clusterLabels map[string]string, now time.Time) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tNOW\tNEXT\tSCHEDULE\tSELECTS\tOVERRIDE")
	rows := 0
	for _, w := range windows {
		if clusterLabels != nil && !w.SelectsCluster(clusterLabels) {
			continue
		}
		state := "closed"
		if open, closes := w.OpenAt(now); open {
			state = "open until " + closes.UTC().Format("2006-01-02 15:04 UTC")
		}
		next := "-"
		if opens, closes := w.NextOpen(now); !opens.IsZero() {
			next = opens.UTC().Format("2006-01-02 15:04") + " - " + closes.UTC().Format("2006-01-02 15:04 UTC")
		}
		schedule := w.Spec.Schedule + " for " + w.Spec.Duration
		if w.Spec.TimeZone != "" {
			schedule += " (" + w.Spec.TimeZone + ")"
		}
		override := "allowed"
		if !w.Overridable() {
			override = "no (hard freeze)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", w.Name, w.Spec.Kind, state, next, schedule, windowScope(w), override)
		rows++
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rows == 0 {
		fmt.Fprintln(out, "no change window selects this; releases and syncs run whenever their templates change")
	}
	for _, err := range bad {
		fmt.Fprintf(out, "not in force (it does not parse): %v\n", err)
	}
	if note != "" {
		fmt.Fprintln(out, note)
	}
	return nil
}

// windowScope says in a few words what a window selects.
func windowScope(w *changewindow.Window) string {
	var parts []string
	if w.Spec.ClusterSelector != nil {
		parts = append(parts, "clusters "+selectorText(w.Spec.ClusterSelector))
	} else {
		parts = append(parts, "every cluster")
	}
	switch {
	case w.Namespace != "":
		parts = append(parts, "namespace "+w.Namespace)
	case len(w.Spec.Namespaces) > 0:
		parts = append(parts, "namespaces "+strings.Join(w.Spec.Namespaces, ","))
	}
	if w.Spec.WorkloadSelector != nil {
		parts = append(parts, "templates "+selectorText(w.Spec.WorkloadSelector))
	}
	if w.Spec.ApplicationSelector != nil {
		parts = append(parts, "applications "+selectorText(w.Spec.ApplicationSelector))
	}
	return strings.Join(parts, "; ")
}

func selectorText(s *policyv1alpha1.LabelSelector) string {
	text := metav1.FormatLabelSelector(s.AsMetav1())
	if text == "<none>" {
		return "(all)"
	}
	return text
}
