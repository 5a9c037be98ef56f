package e2e

// The hostile-tenant suite: each test is an attack a team's contributor (or a careless
// platform setting) tried, written from their side, and what Flotilla answers. docs/security.md
// maps every input surface and attack class to the test that covers it;
// config/security.TestSecurityMatrixHasNoEmptyCell keeps that table and these names in step.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis"
	"github.com/flotilla-dev/flotilla/internal/release"
)

// hostileTeam makes a team with `flotilla team create` and returns a client of one of its
// contributors.
func hostileTeam(t *testing.T, g gomega.Gomega, ns, user string, extra ...string) client.Client {
	t.Helper()
	out, err := flotilla(append([]string{"team", "create", ns, "--contributor", ns + "-devs", "--kubeconfig", fleet.Kubeconfig("")}, extra...)...)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	t.Cleanup(func() {
		_ = cp.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	g.Eventually(func() bool {
		team := &tenancyv1alpha1.Team{}
		return cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: tenancyv1alpha1.TeamName}, team) == nil &&
			meta.IsStatusConditionTrue(team.Status.Conditions, tenancyv1alpha1.ConditionReady)
	}).Should(gomega.BeTrue())
	return userClient(t, "", user, ns+"-devs")
}

func inlineApp(ns, name string, labels map[string]string, manifests ...string) *appsv1alpha1.Application {
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1alpha1.ApplicationSpec{Source: appsv1alpha1.ApplicationSource{Inline: &appsv1alpha1.InlineSource{}}}}
	for _, m := range manifests {
		app.Spec.Source.Inline.Manifests = append(app.Spec.Source.Inline.Manifests, appsv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(m)}})
	}
	return app
}

func inlineDeployment(name, image string) string {
	return fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%[1]q},"spec":{"replicas":1,"selector":{"matchLabels":{"app":%[1]q}},`+
		`"template":{"metadata":{"labels":{"app":%[1]q}},"spec":{"containers":[{"name":"main","image":%[2]q}]}}}}`, name, image)
}

// Given a platform ClusterAnalysisTemplate whose Job runs on the host network with an argument,
// and a platform ClusterTargetPolicy that places every app labelled platform-edge=true, when a
// tenant labels its Application so the platform policy selects it and gates its own
// TargetPolicy rollout with that platform template and an argument of its choosing, then the
// generated platform policy says the rollout is the team's, the release records the team's
// trust, and the Job is refused by Pod Security as in the team's own policy: no host-network
// Job runs the tenant's argument in a member. The team still steers its own rollout's release.
func TestHostileTenantInheritsNoPlatformTrustThroughATargetPolicy(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "hostile-trust"
	mallory := hostileTeam(t, g, ns, "mallory")

	probe := corev1.PodSpec{HostNetwork: true, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
		Name: "probe", Image: "registry.example/busybox:1", Command: []string{"sh", "-c", "echo {{args.note}} $(id)"}}}}
	jobSpec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{Spec: probe}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	raw, err := json.Marshal(jobSpec)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	hostProbe := &rolloutv1alpha1.ClusterAnalysisTemplate{ObjectMeta: metav1.ObjectMeta{Name: "hostile-host-probe"}, Spec: rolloutv1alpha1.AnalysisTemplateSpec{
		Args: []rolloutv1alpha1.Argument{{Name: "note", Value: ptr.To("platform")}},
		Metrics: []rolloutv1alpha1.Metric{{Name: "host-probe", ConsecutiveErrorLimit: ptr.To[int32](0),
			Provider: rolloutv1alpha1.MetricProvider{Job: &rolloutv1alpha1.JobMetric{Spec: runtime.RawExtension{Raw: raw}}}}},
	}}
	edge := &appsv1alpha1.ClusterTargetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hostile-edge-apps"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:     policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"platform-edge": "true"}},
		ClusterSelector: policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "us-east"}},
	}}
	createAll(t, g, hostProbe, edge)

	// The tenant's part: its own TargetPolicy with a gate on the platform's template.
	gated := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:     policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"platform-edge": "true"}},
		ClusterSelector: policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "us-east"}},
		Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "probed", ClusterNames: []string{"east"},
			Gates: policyv1alpha1.Gates{Analysis: &policyv1alpha1.AnalysisGate{
				Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: hostProbe.Name, ClusterScope: true}},
				Args:      []policyv1alpha1.AnalysisArg{{Name: "note", Value: "ARG"}},
			}}}}},
	}}
	app := inlineApp(ns, "web", map[string]string{"platform-edge": "true"}, inlineDeployment("web", "registry.example/web:1"))
	g.Eventually(func() error { return mallory.Create(ctx, gated.DeepCopy()) }).Should(gomega.Succeed())
	g.Expect(mallory.Create(ctx, app)).To(gomega.Succeed())
	g.Eventually(func() string { return memberImage(t, "east", ns, "web") }).Should(gomega.Equal("registry.example/web:1"))

	generated := &policyv1alpha1.ClusterPropagationPolicy{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Name: "app-" + ns + ".web"}, generated)).To(gomega.Succeed())
	g.Expect(generated.Annotations).To(gomega.HaveKeyWithValue(policyv1alpha1.RolloutWrittenByAnnotation, "TargetPolicy "+ns+"/web"))
	waitFirstRevision(g, ns)

	// When the tenant changes its app, its gate runs.
	g.Eventually(func() error {
		cur := &appsv1alpha1.Application{}
		if err := mallory.Get(ctx, client.ObjectKeyFromObject(app), cur); err != nil {
			return err
		}
		cur.Spec.Source.Inline.Manifests[0].Raw = []byte(inlineDeployment("web", "registry.example/web:2"))
		return mallory.Update(ctx, cur)
	}).Should(gomega.Succeed())
	run := firstWaveRun(g, ns, "web-deployment-r2")

	// Then the release ran with the team's trust, and the Job never reached a member.
	g.Expect(release.PlatformStrategy(getRelease(ns, "web-deployment-r2"))).To(gomega.BeFalse(), "the release records the team's trust")
	probed := metricResult(g, run, "host-probe")
	g.Expect(probed.Measurements).NotTo(gomega.BeEmpty())
	g.Expect(probed.Measurements[len(probed.Measurements)-1].Message).To(gomega.And(
		gomega.ContainSubstring("violates Pod Security"), gomega.ContainSubstring("host namespaces"), gomega.ContainSubstring("no Job was created")))
	jobs := &batchv1.JobList{}
	g.Expect(memberClient(t, "east").List(ctx, jobs, client.InNamespace(ns), client.MatchingLabels{analysis.AnalysisMetricLabel: "host-probe"})).To(gomega.Succeed())
	g.Expect(jobs.Items).To(gomega.BeEmpty(), "no host-network Job ran the tenant's argument")

	// The rollout is the team's, so the team steers it: its switches are not the platform's.
	g.Expect(withoutConflict(func() error {
		r := &rolloutv1alpha1.Release{}
		if err := mallory.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-deployment-r2"}, r); err != nil {
			return err
		}
		r.Spec.Paused = true
		return mallory.Update(ctx, r)
	})).To(gomega.Succeed(), "a team steers the releases of its own rollout")
}

// Given a team allowed https://git.example.com/hostile-b/*, when its contributor names a
// repository outside it through an encoded "..", or writes a password into the URL, then the
// Application stalls without a request, says which field to fix, and never repeats the password.
func TestHostileTenantGitRepoURLSpellingsAreRefused(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "hostile-b"
	mallory := hostileTeam(t, g, ns, "mallory", "--repository", "https://git.example.com/hostile-b/*")
	for name, repo := range map[string]string{
		"encoded":  "https://git.example.com/hostile-b/..%2fhostile-a%2fapp.git",
		"dotdot":   "https://git.example.com/hostile-b/../hostile-a/app.git",
		"password": "https://mallory:s3cret-token@git.example.com/hostile-b/app.git",
	} {
		app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1alpha1.ApplicationSpec{
			Source: appsv1alpha1.ApplicationSource{Git: &appsv1alpha1.GitSource{RepoURL: repo, Revision: "main"}}}}
		g.Eventually(func() error { return mallory.Create(ctx, app) }).Should(gomega.Succeed(), name)
	}
	for _, name := range []string{"encoded", "dotdot", "password"} {
		g.Eventually(appCondition(ns, name, appsv1alpha1.ConditionStalled)).Should(gomega.And(
			gomega.HavePrefix("True/"), gomega.ContainSubstring("spec.source.git.repoURL")), name)
		all := ""
		for _, c := range getApp(ns, name).Status.Conditions {
			all += c.Message + "\n"
		}
		g.Expect(all).NotTo(gomega.ContainSubstring("s3cret-token"), "%s: the password is never repeated", name)
	}
	g.Expect(appCondition(ns, "password", appsv1alpha1.ConditionStalled)()).To(gomega.ContainSubstring("secretRef"))
}

// Given a platform admin who tries to open a team's namespace to everyone, or writes a selector
// or glob that could never mean what it says, then the Team is refused at admission naming the
// field.
func TestHostileTenantCannotWidenATeam(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "hostile-c"
	ensureNamespace(t, cp, ns)
	for _, tc := range []struct {
		spec tenancyv1alpha1.TeamSpec
		says string
	}{
		{tenancyv1alpha1.TeamSpec{Contributors: []string{"system:unauthenticated"}}, "contributors"},
		{tenancyv1alpha1.TeamSpec{Contributors: []string{"system:authenticated"}}, "contributors"},
		{tenancyv1alpha1.TeamSpec{Readers: []string{"system:serviceaccounts"}}, "readers"},
		{tenancyv1alpha1.TeamSpec{Repositories: []string{"https://git.example.com/[team"}}, "repositories"},
		{tenancyv1alpha1.TeamSpec{Clusters: &tenancyv1alpha1.TeamClusters{Selector: policyv1alpha1.LabelSelector{
			MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "region", Operator: "Like", Values: []string{"us"}}}}}}, "operator"},
		{tenancyv1alpha1.TeamSpec{Clusters: &tenancyv1alpha1.TeamClusters{Selector: policyv1alpha1.LabelSelector{
			MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "bad key!", Operator: "Exists"}}}}}, "key"},
	} {
		err := cp.Create(ctx, &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenancyv1alpha1.TeamName}, Spec: tc.spec})
		g.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "%+v: %v", tc.spec, err)
		g.Expect(err.Error()).To(gomega.ContainSubstring(tc.says), "%+v", tc.spec)
	}
}

// Given a platform policy written with a namespace that cannot exist, then it is refused at
// admission naming the field, instead of selecting nothing in silence.
func TestHostileClusterPolicySelectorNamespaceIsValidated(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	cpp := &policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hostile-bad-namespace"}, Spec: policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "Bad_NS!"}},
		Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
	}}
	err := cp.Create(ctx, cpp)
	g.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "%v", err)
	g.Expect(err.Error()).To(gomega.ContainSubstring("namespace"))
}

// Given a tenant scripting the CLI, when it names a team, subcommand or namespace that does not
// exist or cannot exist, then the command fails (non-zero) naming what was wrong, instead of
// printing an empty table or its help and exiting 0.
func TestHostileTenantCLIFailsLoudly(t *testing.T) {
	g := newG(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"team", "get", "nosuch"}, "team nosuch not found"},
		{[]string{"export", "bogus"}, `unknown command "bogus"`},
		{[]string{"history", "-n", "Bad NS!"}, `-n "Bad NS!"`},
		{[]string{"release", "undo", "deployment/web", "-n", "nosuch", "--to-revision", "-1"}, ""},
	} {
		out, err := flotilla(append(tc.args, "--kubeconfig", fleet.Kubeconfig(""))...)
		g.Expect(err).To(gomega.HaveOccurred(), "%s exits non-zero:\n%s", strings.Join(tc.args, " "), out)
		g.Expect(err.Error()).To(gomega.ContainSubstring(tc.says), strings.Join(tc.args, " "))
	}
}

// Given two teams, when one tries to freeze or thaw the other (a platform-wide window, a window
// in the other's namespace or naming it, reading or deleting the other's windows), then each is
// refused; its own always-open window holds only its own releases; and a platform hard freeze
// over its namespace holds its release whatever override it writes, a reason with terminal
// escapes included.
func TestHostileTenantCannotFreezeOrThawOtherTeams(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	victim := hostileTeam(t, g, "hostile-w1", "victor")
	mallory := hostileTeam(t, g, "hostile-w2", "mallory")
	always := rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowDeny, Schedule: "* * * * *", Duration: "1h"}
	forbidden(g, mallory.Create(ctx, &rolloutv1alpha1.ClusterChangeWindow{ObjectMeta: metav1.ObjectMeta{Name: "hostile-freeze-all"}, Spec: always}), "")
	forbidden(g, mallory.Create(ctx, &rolloutv1alpha1.ChangeWindow{ObjectMeta: metav1.ObjectMeta{Namespace: "hostile-w1", Name: "freeze"}, Spec: always}), "")
	naming := always
	naming.Namespaces = []string{"hostile-w1"}
	err := mallory.Create(ctx, &rolloutv1alpha1.ChangeWindow{ObjectMeta: metav1.ObjectMeta{Namespace: "hostile-w2", Name: "reach"}, Spec: naming})
	g.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "%v", err)
	g.Expect(err.Error()).To(gomega.ContainSubstring("spec.namespaces"))
	victimWindow := &rolloutv1alpha1.ChangeWindow{ObjectMeta: metav1.ObjectMeta{Namespace: "hostile-w1", Name: "nights"},
		Spec: rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowAllow, Schedule: "0 22 * * *", Duration: "6h"}}
	g.Expect(victim.Create(ctx, victimWindow)).To(gomega.Succeed())
	forbidden(g, mallory.List(ctx, &rolloutv1alpha1.ChangeWindowList{}, client.InNamespace("hostile-w1")), "")
	forbidden(g, mallory.Delete(ctx, victimWindow), "")
	g.Expect(victim.Delete(ctx, victimWindow)).To(gomega.Succeed())
	g.Expect(mallory.Create(ctx, &rolloutv1alpha1.ChangeWindow{ObjectMeta: metav1.ObjectMeta{Namespace: "hostile-w2", Name: "own"}, Spec: always})).To(gomega.Succeed())

	// Mallory's own window holds the victim's release in no cluster.
	release := func(c client.Client, ns string) *appsv1.Deployment {
		policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
			Rollout:           &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "only", ClusterNames: []string{"east"}}}}}}
		web := webDeployment(ns, 1)
		g.Expect(c.Create(ctx, policy)).To(gomega.Succeed())
		g.Expect(c.Create(ctx, web)).To(gomega.Succeed())
		g.Eventually(func() string { return memberImage(t, "east", ns, "web") }).Should(gomega.Equal("registry.example/web:1"))
		return web
	}
	victimWeb := release(victim, "hostile-w1")
	setImage(t, g, victimWeb, "registry.example/web:2")
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase("hostile-w1", "web-deployment-r2") }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))

	// A platform hard freeze over hostile-w2: its own release stays held whatever it writes.
	createAll(t, g, &rolloutv1alpha1.ClusterChangeWindow{ObjectMeta: metav1.ObjectMeta{Name: "hostile-w2-hard-freeze"}, Spec: rolloutv1alpha1.ChangeWindowSpec{
		Kind: rolloutv1alpha1.WindowDeny, Schedule: "* * * * *", Duration: "1h", Namespaces: []string{"hostile-w2"}, Overridable: ptr.To(false)}})
	g.Expect(mallory.Delete(ctx, &rolloutv1alpha1.ChangeWindow{ObjectMeta: metav1.ObjectMeta{Namespace: "hostile-w2", Name: "own"}})).To(gomega.Succeed())
	malloryWeb := release(mallory, "hostile-w2")
	setImage(t, g, malloryWeb, "registry.example/web:2")
	rel := "web-deployment-r2"
	message := func() string {
		if r := getRelease("hostile-w2", rel); r != nil {
			return r.Status.Message
		}
		return ""
	}
	g.Eventually(message).Should(gomega.ContainSubstring("hostile-w2-hard-freeze"))
	path, err := fleet.UserKubeconfig("", "mallory", "hostile-w2-devs")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = flotilla("release", "promote", "deployment/web", "-n", "hostile-w2", "--override-window", "--reason", "trust me", "--kubeconfig", path)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("hard freeze")))
	r := getRelease("hostile-w2", rel)
	r.Spec.WindowOverride = &rolloutv1alpha1.WindowOverride{Reason: "\x1b[2Jall clear"}
	err = mallory.Update(ctx, r)
	g.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "a reason with terminal escapes: %v", err)
	g.Expect(err.Error()).To(gomega.ContainSubstring("control characters"))
	r = getRelease("hostile-w2", rel)
	r.Spec.WindowOverride = &rolloutv1alpha1.WindowOverride{Reason: "written by hand"}
	g.Expect(mallory.Update(ctx, r)).To(gomega.Succeed(), "the override is a switch the team may write")
	g.Consistently(func() string { return memberImage(t, "east", "hostile-w2", "web") }, 5*time.Second).Should(gomega.Equal("registry.example/web:1"))
	g.Expect(message()).To(gomega.ContainSubstring("no override"))
}
