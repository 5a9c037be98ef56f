package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"encoding/json"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// gitServer serves bare repositories of one directory over git's smart HTTP protocol (git
// http-backend behind net/http/cgi) on a fixed 127.0.0.1 address, so it can stop and come back.
type gitServer struct {
	t    *testing.T
	root string
	addr string
	srv  *http.Server
}

func startGitServer(t *testing.T) *gitServer {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the git binary is needed to serve repositories (Debian package git): %v", err)
	}
	s := &gitServer{t: t, root: t.TempDir()}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	s.serve(l)
	t.Cleanup(s.stop)
	return s
}

func (s *gitServer) serve(l net.Listener) {
	h := &cgi.Handler{Path: mustLookPath(s.t, "git"), Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + s.root, "GIT_HTTP_EXPORT_ALL=1"}}
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
}

func (s *gitServer) stop() {
	if s.srv != nil {
		_ = s.srv.Close()
		s.srv = nil
	}
}

func (s *gitServer) restart() {
	s.t.Helper()
	var l net.Listener
	var err error
	for range 50 { // the old socket may linger a moment
		if l, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatal(err)
	}
	s.serve(l)
}

func (s *gitServer) url(repo string) string { return "http://" + s.addr + "/" + repo }

func mustLookPath(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// repo is a working copy pushed to a bare repository the server serves.
type repo struct {
	t    *testing.T
	work string
}

func (s *gitServer) newRepo(name string) *repo {
	bare := filepath.Join(s.root, name)
	r := &repo{t: s.t, work: s.t.TempDir()}
	r.git("", "init", "-q", "--bare", "-b", "main", bare)
	r.git(r.work, "init", "-q", "-b", "main")
	r.git(r.work, "remote", "add", "origin", bare)
	return r
}

func (r *repo) git(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com", "GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files (a nil content removes the file), commits and pushes; it returns the SHA.
func (r *repo) commit(msg string, files map[string]*string) string {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.work, name)
		if content == nil {
			_ = os.Remove(p)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(*content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.git(r.work, "add", "-A")
	r.git(r.work, "commit", "-q", "-m", msg)
	r.git(r.work, "push", "-q", "origin", "main")
	return r.git(r.work, "rev-parse", "HEAD")
}

func text(s string) *string { return &s }

func appDeployment(name, image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
      - name: main
        image: %[2]s
`, name, image)
}

func getApp(ns, name string) *appsv1alpha1.Application {
	a := &appsv1alpha1.Application{}
	if err := cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, a); err != nil {
		return nil
	}
	return a
}

// appCondition is "STATUS/REASON: message" of one condition of an Application.
func appCondition(ns, name, typ string) func() string {
	return func() string {
		if a := getApp(ns, name); a != nil {
			if c := meta.FindStatusCondition(a.Status.Conditions, typ); c != nil {
				return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
			}
		}
		return ""
	}
}

// setClusterLabel sets (or, with value "", removes) a label of a Cluster, put back at cleanup.
func setClusterLabel(t *testing.T, g gomega.Gomega, name, key, value string) {
	t.Helper()
	ctx := context.Background()
	cl := &clusterv1alpha1.Cluster{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Name: name}, cl)).To(gomega.Succeed())
	old, had := cl.Labels[key]
	patch := func(v *string) error {
		val := "null"
		if v != nil {
			val = fmt.Sprintf("%q", *v)
		}
		return cp.Patch(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}},
			client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, key, val)))
	}
	var want *string
	if value != "" {
		want = &value
	}
	g.Expect(patch(want)).To(gomega.Succeed())
	t.Cleanup(func() {
		if had {
			_ = patch(&old)
		} else {
			_ = patch(nil)
		}
	})
}

// Applications from a real git server placed by metadata: app1 (common=true) and app2
// (gpu=true) come from one repository; a team's TargetPolicy sends common apps to us-east and
// the platform's ClusterTargetPolicy sends gpu apps to gpu clusters. Relabelling a cluster moves
// app2; a pushed commit (announced by webhook) travels as a Release and prunes a removed file;
// with the git server down nothing is pruned and the condition says why, and it recovers; a
// repository the Team does not list, a broken YAML file, an object for another namespace and a
// cluster-scoped object are refused with conditions naming them; team boundaries hold for
// Applications and TargetPolicies.
func TestApplicationsFromGitPlacedByMetadata(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "squad-c"
	git := startGitServer(t)
	r := git.newRepo("fleet-apps.git")
	first := r.commit("two apps", map[string]*string{
		"apps/app1/deploy.yaml":        text(appDeployment("app1", "registry.example/app1:1")),
		"apps/app1/config.yaml":        text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app1-config\ndata:\n  greeting: hello\n"),
		"apps/app2/kustomization.yaml": text("resources:\n- deploy.yaml\ncommonLabels:\n  tier: gpu\n"),
		"apps/app2/deploy.yaml":        text(appDeployment("app2", "registry.example/app2:1")),
		"broken/bad.yaml":              text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [broken\n"),
		"elsewhere/cm.yaml":            text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sneaky\n  namespace: squad-a\n"),
		"clusterwide/role.yaml":        text("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: sneaky\nrules: []\n"),
	})

	out, err := flotilla("team", "create", ns, "--contributor", "squad-c-devs", "--reader", "squad-c-viewers",
		"--repository", "http://"+git.addr+"/*", "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	t.Cleanup(func() {
		_ = cp.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	setClusterLabel(t, g, "west", "gpu", "true")

	dave := userClient(t, "", "dave", "squad-c-devs")
	erin := userClient(t, "", "erin", "squad-c-viewers")
	bob := userClient(t, "", "bob", "squad-b-devs")
	gitApp := func(name, path string, labels map[string]string) *appsv1alpha1.Application {
		return &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: appsv1alpha1.ApplicationSpec{Description: name, Source: appsv1alpha1.ApplicationSource{Git: &appsv1alpha1.GitSource{
				RepoURL: git.url("fleet-apps.git"), Revision: "main", Path: path, Interval: &metav1.Duration{Duration: time.Hour}}}}}
	}
	app1 := gitApp("app1", "apps/app1", map[string]string{"common": "true"})
	app2 := gitApp("app2", "apps/app2", map[string]string{"gpu": "true"})
	east := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "common-east"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:     policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"common": "true"}},
		ClusterSelector: policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "us-east"}},
		Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
			{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{BakeTime: policyv1alpha1.DurationOf(time.Second)}}}},
	}}
	// The contributor writes Applications and TargetPolicies through the real apiserver.
	g.Eventually(func() error { return dave.Create(ctx, app1.DeepCopy()) }).Should(gomega.Succeed())
	g.Expect(dave.Create(ctx, app2.DeepCopy())).To(gomega.Succeed())
	g.Expect(dave.Create(ctx, east.DeepCopy())).To(gomega.Succeed())
	gpu := &appsv1alpha1.ClusterTargetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "gpu-apps"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:     policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"gpu": "true"}},
		ClusterSelector: policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"gpu": "true"}},
	}}
	forbidden(g, dave.Create(ctx, gpu.DeepCopy()), "")
	createAll(t, g, gpu)

	// Placed by metadata, in the members.
	g.Eventually(appCondition(ns, "app1", appsv1alpha1.ConditionReady)).Should(gomega.HavePrefix("True/Applied: 2 objects applied from commit " + first[:12]))
	g.Expect(getApp(ns, "app1").Status.Commit).To(gomega.Equal(first))
	g.Eventually(func() string { return memberImage(t, "east", ns, "app1") }).Should(gomega.Equal("registry.example/app1:1"))
	g.Eventually(func() string { return memberImage(t, "west", ns, "app2") }).Should(gomega.Equal("registry.example/app2:1"))
	g.Eventually(appCondition(ns, "app2", "Placed")).Should(gomega.Equal("True/Placed: placed on 1 cluster by gpu-apps"))
	for _, c := range []string{"west", "europe"} {
		g.Expect(memberReplicas(t, c, ns, "app1")).To(gomega.Equal(int32(-1)), "app1 runs in us-east only, not %s", c)
	}
	g.Expect(memberReplicas(t, "east", ns, "app2")).To(gomega.Equal(int32(-1)), "app2 runs on gpu clusters only")
	cm := &corev1.ConfigMap{}
	g.Eventually(func() error {
		return memberClient(t, "east").Get(ctx, client.ObjectKey{Namespace: ns, Name: "app1-config"}, cm)
	}).Should(gomega.Succeed())
	tmpl := &appsv1.Deployment{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app2"}, tmpl)).To(gomega.Succeed())
	g.Expect(tmpl.Labels).To(gomega.HaveKeyWithValue(appsv1alpha1.ApplicationLabel, "app2"))
	g.Expect(tmpl.Labels).To(gomega.HaveKeyWithValue("tier", "gpu"), "kustomize rendered the overlay")

	// Inline manifests work the same way, and relabelling an application moves it.
	inline := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello", Labels: map[string]string{"common": "true"}},
		Spec: appsv1alpha1.ApplicationSpec{Source: appsv1alpha1.ApplicationSource{Inline: &appsv1alpha1.InlineSource{Manifests: []appsv1alpha1.Manifest{
			{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"hello"},"data":{"greeting":"hi"}}`)}}}}}}}
	g.Expect(dave.Create(ctx, inline)).To(gomega.Succeed())
	g.Eventually(func() error {
		return memberClient(t, "east").Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, &corev1.ConfigMap{})
	}).Should(gomega.Succeed())
	g.Expect(cp.Patch(ctx, inline, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"common":null,"gpu":"true"}}}`)))).To(gomega.Succeed())
	g.Eventually(func() error {
		return memberClient(t, "west").Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, &corev1.ConfigMap{})
	}).Should(gomega.Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(memberClient(t, "east").Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, &corev1.ConfigMap{}))
	}).Should(gomega.BeTrue(), "relabelled from common to gpu: east lets it go")

	// Two target policies that disagree on replicas: nothing moves, and the condition names both.
	staging := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "common-staging"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:       east.Spec.AppSelector,
		ClusterSelector:   policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"env": "staging"}},
		ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{Type: policyv1alpha1.ReplicaSchedulingDuplicated},
	}}
	divided := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "common-divided"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:       east.Spec.AppSelector,
		ClusterSelector:   east.Spec.ClusterSelector,
		ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{Type: policyv1alpha1.ReplicaSchedulingDivided, DivisionPreference: policyv1alpha1.DivisionAggregated},
	}}
	g.Expect(dave.Create(ctx, divided)).To(gomega.Succeed())
	g.Expect(dave.Create(ctx, staging)).To(gomega.Succeed())
	g.Eventually(appCondition(ns, "app1", "Placed")).Should(gomega.And(gomega.HavePrefix("False/TargetConflict"),
		gomega.ContainSubstring("squad-c/common-divided"), gomega.ContainSubstring("squad-c/common-staging"), gomega.ContainSubstring("spec.replicaScheduling")))
	g.Consistently(func() int32 { return memberReplicas(t, "europe", ns, "app1") }, 3*time.Second).Should(gomega.Equal(int32(-1)), "nothing moves while they disagree")
	g.Expect(dave.Delete(ctx, divided)).To(gomega.Succeed())
	g.Eventually(func() int32 { return memberReplicas(t, "europe", ns, "app1") }).Should(gomega.Equal(int32(1)), "the union of the clusters once they agree")
	g.Expect(memberReplicas(t, "east", ns, "app1")).To(gomega.Equal(int32(1)))
	g.Expect(dave.Delete(ctx, staging)).To(gomega.Succeed())
	g.Eventually(func() int32 { return memberReplicas(t, "europe", ns, "app1") }).Should(gomega.Equal(int32(-1)))

	// Relabelling a cluster moves the placement.
	setClusterLabel(t, g, "europe", "gpu", "true")
	g.Eventually(func() string { return memberImage(t, "europe", ns, "app2") }).Should(gomega.Equal("registry.example/app2:1"))
	setClusterLabel(t, g, "west", "gpu", "")
	g.Eventually(func() int32 { return memberReplicas(t, "west", ns, "app2") }).Should(gomega.Equal(int32(-1)), "west lost its gpu label")

	// A new commit, announced by webhook (the poll interval is an hour), is a release in waves
	// and prunes the file it removed.
	second := r.commit("app1 v2, no config", map[string]*string{
		"apps/app1/deploy.yaml": text(appDeployment("app1", "registry.example/app1:2")),
		"apps/app1/config.yaml": nil,
	})
	hook, err := http.Post("http://"+fleet.ManagerMetricsAddress()+"/hooks/git", "application/json",
		bytes.NewReader(fmt.Appendf(nil, `{"repository":{"clone_url":%q}}`, git.url("fleet-apps.git"))))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_ = hook.Body.Close()
	g.Expect(hook.StatusCode).To(gomega.Equal(http.StatusAccepted))
	g.Eventually(func() string { return getApp(ns, "app1").Status.Commit }).Should(gomega.Equal(second))
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, "app1-deployment-r2") }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	g.Eventually(func() string { return memberImage(t, "east", ns, "app1") }).Should(gomega.Equal("registry.example/app1:2"))
	// The Application wrote its templates: it is the actor of their releases. Their placement
	// is the doing of dave, who wrote the TargetPolicy, not of the Application that copied it
	// into a generated policy, nor of whoever last wrote a Cluster they run on.
	admin := inventoryAs(t, "")
	g.Eventually(func() []string {
		var actors []string
		for _, it := range historyOf(t, admin, url.Values{"team": {ns}, "application": {"app1"}}) {
			if it.Cause == "placement" || it.Cause == "release" {
				actors = append(actors, it.Cluster+" "+it.Cause+" by "+it.Actor)
			}
		}
		return actors
	}).Should(gomega.And(gomega.ContainElement("east release by application squad-c/app1"), gomega.ContainElement("east placement by dave"),
		gomega.HaveEach(gomega.Or(gomega.HaveSuffix("release by application squad-c/app1"), gomega.HaveSuffix("placement by dave")))))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(memberClient(t, "east").Get(ctx, client.ObjectKey{Namespace: ns, Name: "app1-config"}, &corev1.ConfigMap{}))
	}).Should(gomega.BeTrue(), "the removed file's ConfigMap is pruned in the member")
	// History names the target policies the team and the platform wrote, and the Application,
	// as `flotilla where` does, not the PropagationPolicies generated from them.
	g.Eventually(func() []string {
		var causes []string
		for _, it := range historyOf(t, admin, url.Values{"team": {ns}, "cause": {"placement"}}) {
			causes = append(causes, it.Cluster+" "+it.Kind+" "+it.Name+": "+it.CauseDetail)
		}
		return causes
	}).Should(gomega.And(
		gomega.ContainElement(gomega.MatchRegexp(`^east \w+ app1(-config)?: placed by TargetPolicy squad-c/common-east for Application squad-c/app1$`)),
		gomega.ContainElement("europe Deployment app2: placed by ClusterTargetPolicy gpu-apps for Application squad-c/app2"),
		gomega.ContainElement("west Deployment app2: no longer placed on west by ClusterTargetPolicy gpu-apps for Application squad-c/app2")))

	// The git server goes away: nothing is pruned, the condition says why; it comes back.
	git.stop()
	out, err = flotilla("app", "sync", "app1", "-n", ns, "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(appCondition(ns, "app1", appsv1alpha1.ConditionReady)).Should(gomega.And(
		gomega.HavePrefix("False/FetchFailed"), gomega.ContainSubstring("stays in force and nothing is pruned")))
	g.Consistently(func() string { return memberImage(t, "east", ns, "app1") }, 3*time.Second).Should(gomega.Equal("registry.example/app1:2"))
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app1"}, &appsv1.Deployment{})).To(gomega.Succeed())
	git.restart()
	g.Eventually(appCondition(ns, "app1", appsv1alpha1.ConditionReady), 90*time.Second).Should(gomega.HavePrefix("True/Applied"))

	// Export for an Argo CD in east that pulls: app1 pinned to the commit east runs, valid
	// against Argo CD's own Application CRD (server-side dry run in east).
	out, err = flotilla("export", "argocd", "--cluster", "east", "-n", ns, "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(gomega.ContainSubstring("name: squad-c.app1"), gomega.ContainSubstring("targetRevision: "+second),
		gomega.ContainSubstring("path: apps/app1"), gomega.ContainSubstring("repoURL: "+git.url("fleet-apps.git"))))
	g.Expect(out).NotTo(gomega.ContainSubstring("squad-c.app2"), "app2 does not run in east")
	_, err = flotilla("export", "argocd", "--cluster", "edge-17", "-n", ns, "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("--cluster edge-17: no such cluster is joined")))
	crd := argoCDApplicationCRD(t)
	eastClient := memberClient(t, "east")
	g.Expect(client.IgnoreAlreadyExists(eastClient.Create(ctx, crd))).To(gomega.Succeed())
	t.Cleanup(func() { _ = eastClient.Delete(context.Background(), crd) })
	ensureNamespace(t, eastClient, "argocd")
	docs := strings.Split(out, "---\n")
	validated := 0
	for _, doc := range docs {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(gomega.Succeed(), doc)
		g.Eventually(func() error { return eastClient.Create(ctx, u.DeepCopy(), client.DryRunAll) }).Should(gomega.Succeed(), doc)
		validated++
	}
	g.Expect(validated).To(gomega.Equal(1))

	// Bad input: each refused with a condition naming it, nothing applied.
	bad := map[string]string{
		"notallowed":  "spec.source.git.repoURL: http://127.0.0.1:1/other.git is not among the repositories",
		"broken":      "broken/bad.yaml:",
		"elsewhere":   "names namespace squad-a: an Application writes only into its own namespace squad-c",
		"clusterwide": "ClusterRole sneaky is cluster-scoped",
	}
	for name := range bad {
		a := gitApp(name, name, nil)
		if name == "notallowed" {
			// Selected by common-east: refused, it must still not read as running there.
			a.Labels = map[string]string{"common": "true"}
			a.Spec.Source.Git.RepoURL = "http://127.0.0.1:1/other.git"
		}
		g.Expect(dave.Create(ctx, a)).To(gomega.Succeed())
	}
	for name, says := range bad {
		g.Eventually(appCondition(ns, name, appsv1alpha1.ConditionStalled)).Should(gomega.And(gomega.HavePrefix("True/"), gomega.ContainSubstring(says)), name)
	}
	g.Expect(apierrors.IsNotFound(cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ok"}, &corev1.ConfigMap{}))).To(gomega.BeTrue(),
		"the broken render's good document is not applied either")
	g.Expect(apierrors.IsNotFound(cp.Get(ctx, client.ObjectKey{Namespace: "squad-a", Name: "sneaky"}, &corev1.ConfigMap{}))).To(gomega.BeTrue())

	// Team boundaries: another team's contributor neither reads nor writes; the reader reads only.
	forbidden(g, bob.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app1"}, &appsv1alpha1.Application{}), "")
	forbidden(g, bob.List(ctx, &appsv1alpha1.ApplicationList{}, client.InNamespace(ns)), "")
	forbidden(g, bob.Create(ctx, &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "steal"}, Spec: east.Spec}), "")
	g.Expect(erin.List(ctx, &appsv1alpha1.ApplicationList{}, client.InNamespace(ns))).To(gomega.Succeed())
	forbidden(g, erin.Create(ctx, gitApp("readers-app", "apps/app1", nil)), "")

	// The CLI lists with kubectl's conventions; the refused Application lists no clusters,
	// and its Placed condition names those its target policy selects.
	g.Eventually(appCondition(ns, "notallowed", "Placed")).Should(gomega.ContainSubstring("its target policies select east"))
	out, err = flotilla("app", "list", "-n", ns, "-l", "common=true", "-o", "wide", "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(gomega.ContainSubstring("app1"), gomega.Not(gomega.ContainSubstring("app2"))))
	g.Expect(appListRow(out, "app1")).To(gomega.ContainElement(gomega.ContainSubstring("east")), out)
	g.Expect(appListRow(out, "notallowed")).To(gomega.And(gomega.ContainElement("<none>"), gomega.Not(gomega.ContainElement(gomega.ContainSubstring("east")))), out)
	out, err = flotilla("target", "list", "-A", "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("common-east"))

	// The Team narrows its clusters to us-east: gpu clusters are left out, and the Placed
	// condition names them.
	out, err = flotilla("team", "create", ns, "--contributor", "squad-c-devs", "--reader", "squad-c-viewers",
		"--repository", "http://"+git.addr+"/*", "--clusters", "region=us-east", "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(appCondition(ns, "app2", "Placed")).Should(gomega.ContainSubstring("no cluster matches"))
	g.Eventually(appCondition(ns, "app2", "Placed")).Should(gomega.ContainSubstring("left out europe: not among Team squad-c/team's clusters"))
	g.Eventually(func() int32 { return memberReplicas(t, "europe", ns, "app2") }).Should(gomega.Equal(int32(-1)))

	// Deleting an Application removes its templates and, through the placement's deletion
	// policy, its member objects.
	g.Expect(dave.Delete(ctx, app1.DeepCopy())).To(gomega.Succeed())
	g.Eventually(func() int32 { return memberReplicas(t, "east", ns, "app1") }).Should(gomega.Equal(int32(-1)))
}

// appListRow is the fields of the row of `app list` that names the Application name.
func appListRow(out, name string) []string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return f
		}
	}
	return nil
}

// argoCDApplicationCRD is Argo CD's own Application CRD, read from its Go module's zip (the
// module asks for a newer Go than this suite's, so it is not extracted) at the version of the
// gitops-engine the suite's argocd-check is built from.
func argoCDApplicationCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	const module = "github.com/argoproj/argo-cd/v3@v3.6.1"
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, _ := cmd.Output() // the go-version complaint comes with the zip downloaded
	var mod struct{ Zip string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Zip == "" {
		t.Fatalf("go mod download -json %s: %v %s", module, err, out)
	}
	zr, err := zip.OpenReader(mod.Zip)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	f, err := zr.Open(module + "/manifests/crds/application-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}
