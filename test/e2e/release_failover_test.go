package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// clusterInWave is the status of cluster in the release's wave, or nil while the wave does not list it.
func clusterInWave(ns, rel string, wave int, cluster string) *rolloutv1alpha1.ClusterRelease {
	r := getRelease(ns, rel)
	if r == nil || len(r.Status.Waves) <= wave {
		return nil
	}
	for _, cr := range r.Status.Waves[wave].Clusters {
		if cr.Name == cluster {
			return &cr
		}
	}
	return nil
}

// Given 12 replicas divided 6/3/3 over east, west and europe, released in waves [east] (manual
// approval) then [west, europe]; when europe's API server stops during the first wave and the
// wave is promoted, then failover moves europe's replicas, europe leaves its wave as Left with
// the reason, the release succeeds on east and west, and europe, once back, runs the released
// revision.
func TestReleaseFinishesWithoutAClusterFailoverEvicted(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "release-failover"
	ensureNamespace(t, cp, ns)
	t.Cleanup(func() { _ = fleet.StartMember(context.Background(), "europe") })
	policy := dividedEvenly(ns, "web", "web")
	policy.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList[0].Weight = 2 // east: 6 of 12
	policy.Spec.Rollout = &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
		{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{ManualApproval: true}},
		{Name: "second", ClusterNames: []string{"west", "europe"}},
	}}
	web := webDeployment(ns, 12)
	createAll(t, g, policy, web)
	g.Eventually(func() map[string]int32 { return placedOn(ctx, ns, "web-deployment") }).
		Should(gomega.Equal(map[string]int32{"east": 6, "west": 3, "europe": 3}))
	g.Eventually(func() int32 {
		return memberAvailable(t, "east", ns, "web") + memberAvailable(t, "west", ns, "web") + memberAvailable(t, "europe", ns, "web")
	}).Should(gomega.Equal(int32(12)))
	setImage(t, g, web, "registry.example/web:2")
	rel := "web-deployment-r2"
	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase(ns, rel, 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))

	// When europe stops during wave one and the wave is promoted at once (wave two starts
	// while europe is not Ready, before failover has moved anything).
	stopping := time.Now() // stopping the API server takes a few seconds itself
	g.Expect(fleet.StopComponent("europe-apiserver")).To(gomega.Succeed())
	t.Logf("europe's API server took %s to stop", time.Since(stopping).Round(100*time.Millisecond))
	out, err := flotilla("release", "promote", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)

	// Then the release succeeds without europe: detection + grace + the moved replicas
	// turning available at the new revision.
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).
		WithTimeout(probePeriod*failureThreshold+probeTimeout+failoverGrace+45*time.Second).
		Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded), func() string { return releaseDump(ns, rel) })
	t.Logf("europe stopping -> release Succeeded: %s", time.Since(stopping).Round(100*time.Millisecond))
	europe := clusterInWave(ns, rel, 1, "europe")
	g.Expect(europe).NotTo(gomega.BeNil(), "europe stays listed in its wave")
	g.Expect(europe.Phase).To(gomega.Equal(rolloutv1alpha1.ClusterLeft))
	g.Expect(europe.Message).To(gomega.ContainSubstring("unreachable"))
	g.Expect(getRelease(ns, rel).Status.Message).To(gomega.ContainSubstring("europe left"))
	for _, cluster := range []string{"east", "west"} {
		g.Expect(memberImage(t, cluster, ns, "web")).To(gomega.Equal("registry.example/web:2"), cluster)
	}
	// The release judges revisions, failover moves replicas: the release may succeed a moment
	// before europe's share reaches east and west.
	g.Eventually(func() int32 { return memberReplicas(t, "east", ns, "web") + memberReplicas(t, "west", ns, "web") }).
		WithTimeout(30 * time.Second).Should(gomega.Equal(int32(12)))
	g.Expect(bindingOf(ctx, ns, "web-deployment").Spec.Revisions).To(gomega.Equal(&workv1alpha1.Revisions{Latest: 2, Stable: 2}))
	out, err = flotilla("release", "get", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(gomega.ContainSubstring("Left"), gomega.ContainSubstring("unreachable")), out)
	t.Logf("release tree:\n%s", out)
	out, err = flotilla("release", "status", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("europe left it"), out)

	// When europe returns, it runs the released revision at its share again.
	returned := time.Now()
	g.Expect(fleet.StartMember(ctx, "europe")).To(gomega.Succeed())
	g.Eventually(func() string { return memberImage(t, "europe", ns, "web") }).WithTimeout(2 * time.Minute).
		Should(gomega.Equal("registry.example/web:2"))
	g.Eventually(func() int32 { return memberAvailable(t, "europe", ns, "web") }).WithTimeout(2 * time.Minute).Should(gomega.Equal(int32(3)))
	t.Logf("europe started -> europe runs revision 2 available: %s", time.Since(returned).Round(100*time.Millisecond))
	g.Expect(releasePhase(ns, rel)).To(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded), "a finished release stays finished")
}

// releaseDump is the release's waves in one line per cluster, for a failure message.
func releaseDump(ns, name string) string {
	r := getRelease(ns, name)
	if r == nil {
		return "no release " + name
	}
	lines := []string{string(r.Status.Phase) + ": " + r.Status.Message}
	for _, w := range r.Status.Waves {
		lines = append(lines, "  wave "+w.Name+" "+string(w.Phase)+": "+w.Message)
		for _, cr := range w.Clusters {
			lines = append(lines, "    "+cr.Name+" "+string(cr.Phase)+": "+cr.Message)
		}
	}
	return strings.Join(lines, "\n")
}
