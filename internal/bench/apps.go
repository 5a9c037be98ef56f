package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// AppsOptions size the applications bench.
type AppsOptions struct {
	Apps int // Applications, one Deployment (0 replicas) each, from one git repository
}

const appsNS = "bench-apps"

// Apps serves one git repository of o.Apps application directories over git's smart HTTP on
// 127.0.0.1, makes a Team, the Applications (labelled tier=bench) and a TargetPolicy sending
// them to clusters labelled bench-target=true (all members but the last), and prints:
// the time until every application runs in its members; the time from relabelling the last
// member to every binding placed there and every member object applied; and the time from a
// push announced by webhook to the first member apply of the changed application.
func Apps(ctx context.Context, lf *localfleet.LocalFleet, o AppsOptions, out io.Writer) error {
	if o.Apps < 1 {
		return fmt.Errorf("--apps %d: give at least 1", o.Apps)
	}
	gitBin, err := exec.LookPath("git")
	if err != nil {
		return fmt.Errorf("the applications bench serves a git repository with the git binary (Debian package git): %w", err)
	}
	cpCfg, err := lf.RESTConfig("")
	if err != nil {
		return err
	}
	cpCfg = rest.CopyConfig(cpCfg)
	cpCfg.QPS, cpCfg.Burst = 500, 1000
	cp, err := client.New(cpCfg, client.Options{Scheme: kube.Scheme})
	if err != nil {
		return err
	}
	members := slices.Sorted(slices.Values(lf.Fleet().Names()))
	memberCS := map[string]kubernetes.Interface{}
	for _, m := range members {
		cfg, err := lf.RESTConfig(m)
		if err != nil {
			return err
		}
		if memberCS[m], err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
	}
	targets, late := members[:len(members)-1], members[len(members)-1]

	// The repository.
	root, err := os.MkdirTemp("", "flotilla-bench-git-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	work := filepath.Join(root, "work")
	bare := filepath.Join(root, "apps.git")
	git := func(dir string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, gitBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com", "GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com")
		b, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %v: %v: %s", args, err, b)
		}
		return string(bytes.TrimSpace(b)), nil
	}
	writeApp := func(i int, image string) error {
		dir := filepath.Join(work, "apps", appName(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "deploy.yaml"), fmt.Appendf(nil, benchAppYAML, appName(i), image), 0o644)
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	for _, step := range [][]string{{"init", "-q", "--bare", "-b", "main", bare}} {
		if _, err := git(root, step...); err != nil {
			return err
		}
	}
	for i := range o.Apps {
		if err := writeApp(i, "registry.example/app:1"); err != nil {
			return err
		}
	}
	for _, step := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "apps"}, {"remote", "add", "origin", bare}, {"push", "-q", "origin", "main"}} {
		if _, err := git(work, step...); err != nil {
			return err
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: &cgi.Handler{Path: gitBin, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	repoURL := "http://" + l.Addr().String() + "/apps.git"
	fmt.Fprintf(out, "== applications: %d apps from one git repository, onto %v, then %s\n", o.Apps, targets, late)

	// Team, target policy, cluster labels, applications.
	if err := cp.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appsNS}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	team := &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: appsNS, Name: tenancyv1alpha1.TeamName},
		Spec: tenancyv1alpha1.TeamSpec{Contributors: []string{"bench-apps-devs"}, Repositories: []string{"http://" + l.Addr().String() + "/*"}}}
	if err := cp.Create(ctx, team); err != nil {
		return err
	}
	if err := labelClusters(ctx, cp, targets, "true"); err != nil {
		return err
	}
	tp := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: appsNS, Name: "bench"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:     policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"tier": "bench"}},
		ClusterSelector: policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"bench-target": "true"}},
	}}
	if err := cp.Create(ctx, tp); err != nil {
		return err
	}
	start := time.Now()
	if err := forEachParallel(o.Apps, 16, func(i int) error {
		return cp.Create(ctx, &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: appsNS, Name: appName(i), Labels: map[string]string{"tier": "bench"}},
			Spec: appsv1alpha1.ApplicationSpec{Source: appsv1alpha1.ApplicationSource{Git: &appsv1alpha1.GitSource{
				RepoURL: repoURL, Revision: "main", Path: "apps/" + appName(i), Interval: &metav1.Duration{Duration: time.Hour}}}}})
	}); err != nil {
		return err
	}
	if err := waitMembers(ctx, memberCS, targets, o.Apps, "registry.example/app:1", 15*time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(out, "applications created to all running in %v:  %7.1fs  (%d member objects)\n", targets, time.Since(start).Seconds(), o.Apps*len(targets))

	// Relabel the last member: every binding re-placed, every member object applied.
	start = time.Now()
	if err := labelClusters(ctx, cp, []string{late}, "true"); err != nil {
		return err
	}
	if err := waitFor(ctx, 15*time.Minute, func() (bool, error) {
		var bl workv1alpha1.ResourceBindingList
		if err := cp.List(ctx, &bl, client.InNamespace(appsNS)); err != nil {
			return false, err
		}
		n := 0
		for _, b := range bl.Items {
			if slices.ContainsFunc(b.Spec.Clusters, func(c workv1alpha1.TargetCluster) bool { return c.Name == late }) {
				n++
			}
		}
		return n >= o.Apps, nil
	}); err != nil {
		return fmt.Errorf("waiting for the bindings to be re-placed: %w", err)
	}
	fmt.Fprintf(out, "relabel %s to every binding re-placed:      %7.1fs\n", late, time.Since(start).Seconds())
	if err := waitMembers(ctx, memberCS, []string{late}, o.Apps, "registry.example/app:1", 15*time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(out, "relabel %s to every member object applied:  %7.1fs\n", late, time.Since(start).Seconds())

	// A push, announced by webhook, to the first member apply.
	if err := writeApp(0, "registry.example/app:2"); err != nil {
		return err
	}
	for _, step := range [][]string{{"commit", "-q", "-am", "app 0 v2"}, {"push", "-q", "origin", "main"}} {
		if _, err := git(work, step...); err != nil {
			return err
		}
	}
	start = time.Now()
	resp, err := http.Post("http://"+lf.ManagerMetricsAddress()+"/hooks/git", "application/json",
		bytes.NewReader(fmt.Appendf(nil, `{"repository":{"clone_url":%q}}`, repoURL)))
	if err != nil {
		return fmt.Errorf("posting the push webhook: %w", err)
	}
	_ = resp.Body.Close()
	if err := waitFor(ctx, 5*time.Minute, func() (bool, error) {
		for _, m := range members {
			d, err := memberCS[m].AppsV1().Deployments(appsNS).Get(ctx, appName(0), metav1.GetOptions{})
			if err == nil && d.Spec.Template.Spec.Containers[0].Image == "registry.example/app:2" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return fmt.Errorf("waiting for the pushed change in a member: %w", err)
	}
	fmt.Fprintf(out, "push (webhook) to the first member apply:   %7.2fs\n", time.Since(start).Seconds())
	return nil
}

const benchAppYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 0
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
      - name: main
        image: %[2]s
`

func appName(i int) string { return fmt.Sprintf("app-%04d", i) }

func labelClusters(ctx context.Context, cp client.Client, names []string, value string) error {
	for _, n := range names {
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{"bench-target":%q}}}`, value)
		if err := cp.Patch(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: n}}, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			return fmt.Errorf("labelling cluster %s: %w", n, err)
		}
	}
	return nil
}

// waitMembers waits until every member named holds n bench Deployments with image.
func waitMembers(ctx context.Context, cs map[string]kubernetes.Interface, names []string, n int, image string, timeout time.Duration) error {
	return waitFor(ctx, timeout, func() (bool, error) {
		for _, m := range names {
			l, err := cs[m].AppsV1().Deployments(appsNS).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			if countImage(l.Items, image) < n {
				return false, nil
			}
		}
		return true, nil
	})
}

func countImage(ds []appsv1.Deployment, image string) int {
	n := 0
	for _, d := range ds {
		if len(d.Spec.Template.Spec.Containers) > 0 && d.Spec.Template.Spec.Containers[0].Image == image {
			n++
		}
	}
	return n
}

// waitFor polls done every 250ms until it says true, fails, or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
