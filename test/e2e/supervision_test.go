package e2e

import (
	"context"
	"net/http"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

const managerName = "flotilla-controller-manager"

// component is what `flotilla status` knows of one process of the test fleet.
func component(t *testing.T, name string) localfleet.ComponentStatus {
	t.Helper()
	for _, s := range fleet.Status() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no component %s in the fleet", name)
	return localfleet.ComponentStatus{}
}

// runningPID is the component's pid while it runs under its supervisor, else 0.
func runningPID(t *testing.T, name string) int {
	if s := component(t, name); s.Running && s.Supervised {
		return s.PID
	}
	return 0
}

func allMembersReady(t *testing.T, g gomega.Gomega) {
	t.Helper()
	for _, name := range fleet.Fleet().Names() {
		g.Eventually(func() metav1.ConditionStatus { return readyStatus(t, name) }).WithTimeout(3*time.Minute).
			Should(gomega.Equal(metav1.ConditionTrue), "cluster %s", name)
	}
}

// propagates checks the fleet still delivers: a ConfigMap created now reaches every member.
func propagates(t *testing.T, g gomega.Gomega, ns, name string, timeout time.Duration) {
	t.Helper()
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: name}},
		},
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"after": "restart"}}
	g.Eventually(func() error { return client.IgnoreAlreadyExists(cp.Create(context.Background(), policy)) }).WithTimeout(timeout).Should(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), policy) })
	g.Eventually(func() error { return client.IgnoreAlreadyExists(cp.Create(context.Background(), cm)) }).WithTimeout(timeout).Should(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), cm) })
	for _, cluster := range fleet.Fleet().Names() {
		g.Eventually(func() bool { return existsIn(t, cluster, cm) }).WithTimeout(timeout).Should(gomega.BeTrue(), "%s/%s in %s", ns, name, cluster)
	}
}

// Given a running fleet, when the controller-manager and east's kube-scheduler are killed with
// SIGKILL, then their supervisors start both again with new pids, `flotilla status` shows the
// restart and how they exited, and the fleet goes on delivering and scheduling.
func TestKilledComponentsAreRestarted(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	allMembersReady(t, g)
	victims := []string{managerName, "east-kube-scheduler"}
	before := map[string]localfleet.ComponentStatus{}
	for _, name := range victims {
		s := component(t, name)
		g.Expect(s.Running && s.Supervised).To(gomega.BeTrue(), "%s runs under a supervisor", name)
		before[name] = s
	}

	killed := time.Now()
	for _, name := range victims {
		g.Expect(syscall.Kill(before[name].PID, syscall.SIGKILL)).To(gomega.Succeed())
	}

	for _, name := range victims {
		g.Eventually(func() int { return runningPID(t, name) }).
			Should(gomega.And(gomega.Not(gomega.BeZero()), gomega.Not(gomega.Equal(before[name].PID))), "%s comes back with a new pid", name)
		t.Logf("%s back as pid %d %.1fs after the kill", name, runningPID(t, name), time.Since(killed).Seconds())
		s := component(t, name)
		g.Expect(s.Restarts).To(gomega.Equal(before[name].Restarts+1), name)
		g.Expect(s.LastExit).To(gomega.Equal("signal: killed"), name)
	}
	out, err := flotilla("status")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.MatchRegexp(`(?m)^east-kube-scheduler\s+east\s+\d+\s+\d+Mi\s+running\s+\d+\s+signal: killed, \S+ ago`))
	g.Expect(out).To(gomega.MatchRegexp(`(?m)^` + regexp.QuoteMeta(managerName) + `\s+flotilla\s+\d+\s+\d+Mi\s+running\s+\d+\s+signal: killed`))
	// The manager came back with the settings it was started with, and status says them.
	g.Expect(out).To(gomega.MatchRegexp(`(?m)^controller-manager settings: .*--probe-period=` + regexp.QuoteMeta(probePeriod.String()) +
		`.*--failover-grace-period=` + regexp.QuoteMeta(failoverGrace.String())))
	g.Eventually(func() int {
		_, code := get(t, "http://"+fleet.ManagerHealthAddress()+"/readyz")
		return code
	}).Should(gomega.Equal(http.StatusOK))
	t.Logf("controller-manager ready %.1fs after the kill", time.Since(killed).Seconds())

	// The restarted manager delivers, and east's restarted scheduler places the pods.
	propagates(t, g, "supervised", "after-kill", 90*time.Second)
	dep := webDeployment("supervised", 2)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "supervised"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
		},
	}
	createAll(t, g, policy, dep)
	g.Eventually(func() int32 {
		d := &appsv1.Deployment{}
		if err := memberClient(t, "east").Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
			return -1
		}
		return d.Status.AvailableReplicas
	}).Should(gomega.Equal(int32(2)), "east's pods are scheduled and run")
}

// Given a running fleet, when etcd stops answering for 30 seconds (SIGSTOP: connections stay
// open and every request hangs, as when its disk or host stalls) and then resumes, then without
// any command the controller-manager, which loses its leadership and exits, is started again by
// its supervisor, re-elects, and a template created afterwards reaches every member.
func TestControlPlaneOutageIsSurvivedWithoutACommand(t *testing.T) {
	g := newG(t)
	allMembersReady(t, g)
	etcd := runningPID(t, "etcd")
	g.Expect(etcd).NotTo(gomega.BeZero())
	managerBefore := component(t, managerName)

	g.Expect(syscall.Kill(etcd, syscall.SIGSTOP)).To(gomega.Succeed())
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = syscall.Kill(etcd, syscall.SIGCONT)
		}
	})
	// The outage itself: nothing is asserted while it lasts.
	time.Sleep(30 * time.Second)
	g.Expect(syscall.Kill(etcd, syscall.SIGCONT)).To(gomega.Succeed())
	resumed = true
	back := time.Now()

	g.Expect(runningPID(t, "etcd")).To(gomega.Equal(etcd), "a stopped etcd is not an exited one: it is not restarted")
	g.Eventually(func() int { return component(t, managerName).Restarts }).WithTimeout(time.Minute).
		Should(gomega.BeNumerically(">", managerBefore.Restarts), "the controller-manager lost its leadership, exited and was started again")
	g.Eventually(func() int { return runningPID(t, managerName) }).WithTimeout(3 * time.Minute).ShouldNot(gomega.BeZero())
	after := component(t, managerName)
	t.Logf("controller-manager: %d restart(s) during the outage, last exit %q", after.Restarts-managerBefore.Restarts, after.LastExit)

	propagates(t, g, "outage", "after-outage", 3*time.Minute)
	t.Logf("a template created after the outage reached every member %.1fs after etcd resumed", time.Since(back).Seconds())
	g.Eventually(fleet.Running).WithTimeout(3*time.Minute).Should(gomega.BeTrue(), "every component runs again")
	allMembersReady(t, g)
}

// Given a release through waves, when it runs to the end, then every event it recorded (the
// phase changes, ReleaseProgressing included) carries a message.
func TestReleaseEventsCarryMessages(t *testing.T) {
	g := newG(t)
	ns := "release-events"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{"east"}},
			}},
		},
	}
	web := webDeployment(ns, 1)
	createAll(t, g, policy, web)
	g.Eventually(func() string { return memberImage(t, "east", ns, "web") }).Should(gomega.Equal("registry.example/web:1"))
	g.Eventually(func() *workv1alpha1.Revisions {
		if b := bindingOf(context.Background(), ns, "web-deployment"); b != nil {
			return b.Spec.Revisions
		}
		return nil
	}).Should(gomega.Equal(&workv1alpha1.Revisions{Latest: 1, Stable: 1}), "the first revision is recorded before the change")

	setImage(t, g, web, "registry.example/web:2")
	rel := "web-deployment-r2"
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))

	releaseEvents := func() []corev1.Event {
		events := &corev1.EventList{}
		if err := cp.List(context.Background(), events, client.InNamespace(ns)); err != nil {
			return nil
		}
		var out []corev1.Event
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "Release" && e.InvolvedObject.Name == rel {
				out = append(out, e)
			}
		}
		return out
	}
	reason := func(r string) gomega.OmegaMatcher {
		return gomega.ContainElement(gomega.HaveField("Reason", r))
	}
	g.Eventually(releaseEvents).Should(gomega.And(reason("ReleaseProgressing"), reason("ReleaseSucceeded")))
	for _, e := range releaseEvents() {
		g.Expect(e.Message).NotTo(gomega.BeEmpty(), "event %s of release %s has no message", e.Reason, rel)
		t.Logf("%s: %s", e.Reason, e.Message)
	}
}
