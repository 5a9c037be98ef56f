package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/demo"
)

func newDemoCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "On the running local fleet: release a bad version that analysis rolls back by itself, then a good one that reaches every wave",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), g)
		},
	}
}

type demoResult struct {
	image   string
	release string
	phase   rolloutv1alpha1.ReleasePhase
	took    time.Duration
	message string
}

func runDemo(ctx context.Context, g *globals) error {
	out := g.streams.Out
	lf, err := g.openInitializedFleet()
	if err != nil {
		return err
	}
	c, err := g.controlPlaneClientFor(lf)
	if err != nil {
		return err
	}
	members := map[string]kubernetes.Interface{}
	for _, m := range lf.Fleet().Names() {
		cfg, err := lf.RESTConfig(m)
		if err != nil {
			return err
		}
		if members[m], err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
	}
	promBinary, err := demo.FindPrometheus(ctx, out)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	traffic := &demo.Traffic{Members: members, Namespace: demo.Namespace, Name: demo.App, RequestsPerTick: 20}
	target, err := traffic.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		return err
	}
	prom, err := demo.StartPrometheus(ctx, promBinary, filepath.Join(lf.StateDir(), "demo", "prometheus"), target)
	if err != nil {
		return err
	}
	defer prom.Stop()
	fmt.Fprintf(out, "traffic simulator on %s (errors: 30%% for an image tagged bad, else 1%%), scraped every second by Prometheus at %s\n", target, prom.URL)

	// A fresh start: a shop left by an earlier run goes first.
	if err := removeDemoApp(ctx, c); err != nil {
		return err
	}
	if err := demo.Apply(ctx, c, prom.URL); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n== 1/3  shop %s everywhere (its first revision needs no release)\n", demo.GoodImage)
	if err := waitImages(ctx, members, demo.GoodImage, 3*time.Minute); err != nil {
		return err
	}
	fmt.Fprintln(out, "   east, west and europe run it")

	var results []demoResult
	for i, step := range []struct{ image, expect string }{
		{demo.BadImage, "analysis sees the error rate jump in the canary wave and rolls it back by itself"},
		{demo.BetterImage, "analysis passes in each wave, and the version reaches every cluster"},
	} {
		fmt.Fprintf(out, "\n== %d/3  release %s: %s\n", i+2, step.image, step.expect)
		start := time.Now()
		if err := demo.SetImage(ctx, c, step.image); err != nil {
			return err
		}
		t, err := waitForRelease(ctx, c, int64(i+2))
		if err != nil {
			return err
		}
		// The demo expects the bad version's rollback: the outcome is in the summary, not an error.
		var exit *ExitError
		if err := watchRelease(ctx, out, t); err != nil && !errors.As(err, &exit) {
			return err
		}
		results = append(results, demoResult{image: step.image, release: t.release.Name, phase: t.release.Status.Phase, took: time.Since(start), message: t.release.Status.Message})
		if t.release.Status.Phase == rolloutv1alpha1.ReleaseRolledBack {
			// Back on stable; the next analysis must not see this version's errors in its window.
			fmt.Fprintln(out, "   waiting for east to run the stable version again and its error rate to settle...")
			if err := waitImages(ctx, members, demo.GoodImage, time.Minute); err != nil {
				return err
			}
			time.Sleep(6 * time.Second)
		}
	}
	return demoSummary(ctx, out, members, results)
}

func removeDemoApp(ctx context.Context, c client.Client) error {
	d := &appsv1.Deployment{}
	err := c.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: demo.App}, d)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.Delete(ctx, d); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		b := &workv1alpha1.ResourceBinding{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: demo.App + "-deployment"}, b); apierrors.IsNotFound(err) {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("the previous demo's shop was not removed in 2 minutes")
}

func waitImages(ctx context.Context, members map[string]kubernetes.Interface, image string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		all := true
		for _, cs := range members {
			d, err := cs.AppsV1().Deployments(demo.Namespace).Get(ctx, demo.App, metav1.GetOptions{})
			if err != nil || d.Spec.Template.Spec.Containers[0].Image != image || d.Status.AvailableReplicas != *d.Spec.Replicas {
				all = false
			}
		}
		if all {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("%s not running in every member after %s", image, limit)
}

func waitForRelease(ctx context.Context, c client.Client, revision int64) (*releaseTarget, error) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		t, err := findRelease(ctx, c, "deployment/"+demo.App, demo.Namespace)
		if err == nil && t.release != nil && t.release.Spec.Revision == revision {
			return t, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("no release of revision %d within a minute", revision)
}

func demoSummary(ctx context.Context, out io.Writer, members map[string]kubernetes.Interface, results []demoResult) error {
	fmt.Fprintln(out, "\n== summary")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VERSION\tRELEASE\tOUTCOME\tTOOK\tWHY")
	for _, r := range results {
		fmt.Fprintf(tw, "  %s\t%s\t%s %s\t%s\t%s\n", r.image, r.release, symbol(string(r.phase)), r.phase, r.took.Round(time.Second), r.message)
	}
	_ = tw.Flush()
	var now []string
	for _, name := range sortedKeys(members) {
		d, err := members[name].AppsV1().Deployments(demo.Namespace).Get(ctx, demo.App, metav1.GetOptions{})
		if err == nil {
			now = append(now, fmt.Sprintf("%s=%s", name, d.Spec.Template.Spec.Containers[0].Image))
		}
	}
	fmt.Fprintf(out, "  members now run: %s\n", strings.Join(now, ", "))
	if len(results) != 2 || results[0].phase != rolloutv1alpha1.ReleaseRolledBack || results[1].phase != rolloutv1alpha1.ReleaseSucceeded {
		return fmt.Errorf("the demo did not end as it should: the bad version rolled back and the good one succeeded")
	}
	fmt.Fprintln(out, "  the bad version never left the canary wave; the good one runs everywhere")
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
