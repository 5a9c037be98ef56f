package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/inventory"
)

// Given web on east, west and europe released in waves [east] then [west, europe], a platform
// deny window over region=us-west and a team's own window over its Application, both opening
// this minute for 2 minutes: an image change goes through east and europe and waits before
// west, saying which window and until when, and a pushed commit of the frozen Application
// waits with the commit in force kept; both go on once the windows close. A second change
// during an incident freeze passes west with `flotilla release promote --override-window
// --reason`, and west's history names the window, the reason and the user who overrode it.
func TestChangeWindowsHoldReleasesAndSyncs(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "windows"
	git := startGitServer(t)
	repo := git.newRepo("windows-apps.git")
	first := repo.commit("frozen v1", map[string]*string{"app/deploy.yaml": text(appDeployment("frozen", "registry.example/frozen:1"))})
	createTeam(t, g, ns, "--contributor", "windows-devs", "--repository", "http://"+git.addr+"/*")
	oncallConfig, err := fleet.UserKubeconfig("", "oncall", "windows-devs")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	oncall := clientFor(t, oncallConfig)

	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
		Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west", "europe"}},
			ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{Type: policyv1alpha1.ReplicaSchedulingDuplicated}},
		Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
			{Name: "first", ClusterNames: []string{"east"}}, {Name: "second", ClusterNames: []string{"west", "europe"}}}},
	}}
	web := webDeployment(ns, 1)
	createAll(t, g, policy, web)
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "frozen", Labels: map[string]string{"freeze": "yes"}},
		Spec: appsv1alpha1.ApplicationSpec{Source: appsv1alpha1.ApplicationSource{Git: &appsv1alpha1.GitSource{
			RepoURL: git.url("windows-apps.git"), Revision: "main", Path: "app", Interval: &metav1.Duration{Duration: time.Hour}}}}}
	target := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "east"}, Spec: appsv1alpha1.TargetSpec{
		AppSelector:     policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"freeze": "yes"}},
		ClusterSelector: policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "us-east"}}}}
	g.Eventually(func() error { return oncall.Create(ctx, app) }).Should(gomega.Succeed())
	g.Expect(oncall.Create(ctx, target)).To(gomega.Succeed())
	for _, cl := range []string{"east", "west", "europe"} {
		g.Eventually(func() string { return memberImage(t, cl, ns, "web") }).Should(gomega.Equal("registry.example/web:1"), cl)
	}
	g.Eventually(func() string { return memberImage(t, "east", ns, "frozen") }).Should(gomega.Equal("registry.example/frozen:1"))

	// Both windows open this minute, for 2 minutes.
	now := time.Now().UTC()
	if now.Second() > 45 { // the windows must be written in the minute they open
		time.Sleep(time.Duration(61-now.Second()) * time.Second)
		now = time.Now().UTC()
	}
	closes := now.Truncate(time.Minute).Add(2 * time.Minute)
	until := closes.Format("2006-01-02 15:04:05 UTC")
	thisMinute := fmt.Sprintf("%d %d * * *", now.Minute(), now.Hour())
	freeze := &rolloutv1alpha1.ClusterChangeWindow{ObjectMeta: metav1.ObjectMeta{Name: "e2e-west-freeze"}, Spec: rolloutv1alpha1.ChangeWindowSpec{
		Kind: rolloutv1alpha1.WindowDeny, Schedule: thisMinute, Duration: "2m", Description: "regional maintenance",
		ClusterSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "us-west"}}}}
	createAll(t, g, freeze)
	// The team freezes its own Application: contributors write ChangeWindows in their namespace.
	teamWindow := &rolloutv1alpha1.ChangeWindow{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-freeze"}, Spec: rolloutv1alpha1.ChangeWindowSpec{
		Kind: rolloutv1alpha1.WindowDeny, Schedule: thisMinute, Duration: "2m",
		ApplicationSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"freeze": "yes"}}}}
	g.Expect(oncall.Create(ctx, teamWindow)).To(gomega.Succeed())

	setImage(t, g, web, "registry.example/web:2")
	second := repo.commit("frozen v2", map[string]*string{"app/deploy.yaml": text(appDeployment("frozen", "registry.example/frozen:2"))})
	hook, err := http.Post("http://"+fleet.ManagerMetricsAddress()+"/hooks/git", "application/json",
		bytes.NewReader(fmt.Appendf(nil, `{"repository":{"clone_url":%q}}`, git.url("windows-apps.git"))))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_ = hook.Body.Close()

	rel := "web-deployment-r2"
	westMessage := func(rel string) func() string {
		return func() string {
			if cr := clusterInWave(ns, rel, 1, "west"); cr != nil {
				return cr.Message
			}
			return ""
		}
	}
	g.Eventually(westMessage(rel)).Should(gomega.Equal("held by change window e2e-west-freeze until "+until), func() string { return releaseDump(ns, rel) })
	g.Eventually(func() string { return memberImage(t, "europe", ns, "web") }).Should(gomega.Equal("registry.example/web:2"), "europe, in west's wave, is not held")
	g.Expect(memberImage(t, "east", ns, "web")).To(gomega.Equal("registry.example/web:2"))
	g.Expect(memberImage(t, "west", ns, "web")).To(gomega.Equal("registry.example/web:1"))
	g.Expect(getRelease(ns, rel).Status.Message).To(gomega.HavePrefix("held: wave 2/2 (second)"))
	g.Eventually(appCondition(ns, "frozen", appsv1alpha1.ConditionReconciling)).Should(gomega.Equal(
		fmt.Sprintf("True/HeldByWindow: commit %s waits: held by change window %s/app-freeze until %s; %s stays in force (annotation %s: REASON applies it now)",
			second[:12], ns, until, first[:12], rolloutv1alpha1.OverrideWindowAnnotation)))
	g.Expect(memberImage(t, "east", ns, "frozen")).To(gomega.Equal("registry.example/frozen:1"))
	out, err := flotilla("windows", "--cluster", "west", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(gomega.ContainSubstring("e2e-west-freeze"), gomega.ContainSubstring("open until "+closes.Format("2006-01-02 15:04 UTC")),
		gomega.ContainSubstring(ns+"/app-freeze"), gomega.ContainSubstring("clusters region=us-west")))
	t.Logf("flotilla windows --cluster west:\n%s", out)
	out, err = flotilla("windows", "--cluster", "east", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).NotTo(gomega.ContainSubstring("e2e-west-freeze"), "the freeze does not select east")
	// A team member sees the platform's windows and the team's, though not the Clusters.
	out, err = flotilla("windows", "--cluster", "west", "-n", ns, "--kubeconfig", oncallConfig)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(gomega.ContainSubstring("e2e-west-freeze"), gomega.ContainSubstring(ns+"/app-freeze"),
		gomega.ContainSubstring("you may not read Clusters, so every window is listed")))

	// The windows close: both go on by themselves.
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).WithTimeout(closes.Sub(time.Now())+time.Minute).
		Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded), func() string { return releaseDump(ns, rel) })
	g.Expect(getRelease(ns, rel).Status.CompletedAt.Time).To(gomega.BeTemporally(">=", closes.Add(-time.Second)), "west waited for the window")
	g.Expect(memberImage(t, "west", ns, "web")).To(gomega.Equal("registry.example/web:2"))
	g.Eventually(func() string { return getApp(ns, "frozen").Status.Commit }).WithTimeout(time.Minute).Should(gomega.Equal(second))
	g.Eventually(func() string { return memberImage(t, "east", ns, "frozen") }).Should(gomega.Equal("registry.example/frozen:2"))
	// The frozen Application has no rollout: its change still has a revision number in history,
	// the template's generation.
	g.Eventually(func() []string {
		var lines []string
		for _, it := range historyOf(t, inventoryAs(t, ""), url.Values{"team": {ns}, "application": {"frozen"}}) {
			lines = append(lines, fmt.Sprintf("%s %d->%d %s %s: %s", it.Cluster, it.FromRevision, it.ToRevision, it.Cause, it.Outcome, it.CauseDetail))
		}
		return lines
	}).Should(gomega.ContainElement(gomega.HavePrefix("east 1->2 apply healthy: generation 2 of the template applied as it is")))
	t.Logf("windows closed at %s; release %s completed at %s", closes.Format(time.TimeOnly), rel, getRelease(ns, rel).Status.CompletedAt.UTC().Format(time.TimeOnly))

	// An incident freeze over us-west; an emergency fix passes it by override, with a reason.
	incident := &rolloutv1alpha1.ClusterChangeWindow{ObjectMeta: metav1.ObjectMeta{Name: "e2e-west-incident"}, Spec: rolloutv1alpha1.ChangeWindowSpec{
		Kind: rolloutv1alpha1.WindowDeny, Schedule: "* * * * *", Duration: "1h",
		ClusterSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "us-west"}}}}
	createAll(t, g, incident)
	setImage(t, g, web, "registry.example/web:3")
	rel = "web-deployment-r3"
	g.Eventually(westMessage(rel)).Should(gomega.HavePrefix("held by change window e2e-west-incident until "))
	_, err = flotilla("release", "promote", "deployment/web", "-n", ns, "--override-window", "--kubeconfig", oncallConfig)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("--override-window needs --reason TEXT")))
	out, err = flotilla("release", "promote", "deployment/web", "-n", ns, "--override-window", "--reason", "CVE-2026-1234 hotfix", "--kubeconfig", oncallConfig)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("passes the change windows that hold it"))
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded), func() string { return releaseDump(ns, rel) })
	g.Expect(memberImage(t, "west", ns, "web")).To(gomega.Equal("registry.example/web:3"))
	g.Expect(getRelease(ns, rel).Status.OverriddenWindows).To(gomega.Equal([]string{"e2e-west-incident"}))
	admin := inventoryAs(t, "")
	var west3 inventory.HistoryItem
	g.Eventually(func() string {
		for _, it := range historyOf(t, admin, url.Values{"team": {ns}, "cluster": {"west"}, "kind": {"Deployment"}, "name": {"web"}}) {
			if it.ToRevision == 3 && it.Cause == "release" {
				west3 = it
				return it.CauseDetail + " by " + it.Actor
			}
		}
		return ""
	}).Should(gomega.Equal("release web-deployment-r3 wave 2/2 (second), past change window e2e-west-incident by override: CVE-2026-1234 hotfix by oncall"))
	g.Expect(strings.Join(west3.Images, ",")).To(gomega.Equal("registry.example/web:3"))
}
