package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// stagedAdoption is a policy that adopts the legacy Deployment east first (held for approval),
// then the rest wave (west and europe).
func stagedAdoption(ns string) *policyv1alpha1.PropagationPolicy {
	return &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "adopt", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors:  []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "legacy"}},
			ConflictResolution: policyv1alpha1.ConflictOverwrite,
			Rollout: &policyv1alpha1.RolloutStrategy{StageFirstRevision: true, Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{ManualApproval: true}},
			}},
		},
	}
}

// releaseWave is the release's status.wave, what kubectl's WAVE column shows.
func releaseWave(ns, name string) func() string {
	return func() string {
		if rel := getRelease(ns, name); rel != nil {
			return rel.Status.Wave
		}
		return ""
	}
}

// Given a Deployment running unmanaged in three members and a policy that adopts it east first,
// when the first wave waits for approval, describe says east is adopted and the others are not
// reached yet, and the release tree says so too; when the adoption completes, release get
// still finds it and promote refuses to promote it again; when it is undone, every object is
// handed back to unmanaged with its pods untouched.
func TestAdoptionStatesUndoAndGet(t *testing.T) {
	g := newG(t)
	ns := "adopt-states"
	rel := "legacy-deployment-r1"
	before := runUnmanaged(t, g, ns, 1)
	ensureNamespace(t, cp, ns)
	createAll(t, g, stagedAdoption(ns), legacyDeployment(ns, 1))
	t.Cleanup(func() {
		if t.Failed() {
			dumpYAML(t, bindingOf(context.Background(), ns, "legacy-deployment"))
			dumpYAML(t, getRelease(ns, rel))
		}
	})

	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase(ns, rel, 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))
	g.Expect(managedIn(t, ns, "legacy")).To(gomega.Equal([]string{"east"}))
	g.Eventually(releaseWave(ns, rel)).Should(gomega.Equal("1/2 first"), "the WAVE column counts from 1")
	g.Eventually(func() string {
		out, _ := flotilla("describe", "deployment/legacy", "-n", ns)
		return out
	}).Should(gomega.And(
		gomega.MatchRegexp(`east\s+1\s+true\s+\S+\s+adopted`),
		gomega.MatchRegexp(`west\s+1\s+-\s+-\s+not reached yet \(unmanaged\)`),
		gomega.MatchRegexp(`europe\s+1\s+-\s+-\s+not reached yet \(unmanaged\)`),
		gomega.ContainSubstring("Adoption:   staged by release legacy-deployment-r1"),
		gomega.Not(gomega.ContainSubstring("waiting for the members")),
	))
	out, err := flotilla("release", "get", "deployment/legacy", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(
		gomega.ContainSubstring("Release legacy-deployment-r1  Deployment adopt-states/legacy  unmanaged → revision 1"),
		gomega.MatchRegexp(`west  Pending  \[unmanaged\]  not reached yet`),
	))

	out, err = flotilla("release", "promote", "deployment/legacy", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("passes its gates (manual approval)"))
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, rel) }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	g.Expect(managedIn(t, ns, "legacy")).To(gomega.ConsistOf(members))
	g.Expect(releaseWave(ns, rel)()).To(gomega.Equal("done"))

	out, err = flotilla("release", "get", "deployment/legacy", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("Release legacy-deployment-r1  Deployment adopt-states/legacy  unmanaged → revision 1  Succeeded"), "release get finds a finished adoption")
	out, err = flotilla("release", "promote", "deployment/legacy", "-n", ns)
	g.Expect(err).To(gomega.HaveOccurred(), out)
	g.Expect(err.Error()).To(gomega.ContainSubstring("release/legacy-deployment-r1 succeeded"))

	out, err = flotilla("release", "undo", "deployment/legacy", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(gomega.ContainSubstring("adoption by release legacy-deployment-r1 undone: handed back to unmanaged in"),
		gomega.ContainSubstring("east"), gomega.ContainSubstring("west"), gomega.ContainSubstring("europe")))
	g.Eventually(func() []string { return managedIn(t, ns, "legacy") }).Should(gomega.BeEmpty())
	g.Consistently(func() map[string][]string { return podUIDs(t, ns, "legacy") }).WithTimeout(3 * time.Second).Should(gomega.Equal(before))
	out, err = flotilla("describe", "deployment/legacy", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	for _, m := range members {
		g.Expect(out).To(gomega.MatchRegexp(m+`\s+-\s+-\s+-\s+unmanaged`), m)
	}
	out, err = flotilla("release", "undo", "deployment/legacy", "-n", ns)
	g.Expect(err).To(gomega.HaveOccurred(), out)
	g.Expect(err.Error()).To(gomega.ContainSubstring("every cluster is unmanaged already"))
}

// Given an adoption aborted in its first wave, describe and the release tree say east was
// handed back to unmanaged and the others were never adopted, instead of waiting for members;
// undo and a second abort change nothing and say why.
func TestAbortedAdoptionSaysHandedBack(t *testing.T) {
	g := newG(t)
	ns := "adopt-states-abort"
	rel := "legacy-deployment-r1"
	before := runUnmanaged(t, g, ns, 1)
	ensureNamespace(t, cp, ns)
	createAll(t, g, stagedAdoption(ns), legacyDeployment(ns, 1))
	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase(ns, rel, 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))

	out, err := flotilla("release", "abort", "deployment/legacy", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("handed back to unmanaged"))
	g.Eventually(func() []string { return managedIn(t, ns, "legacy") }).Should(gomega.BeEmpty())
	g.Expect(releasePhase(ns, rel)).To(gomega.Equal(rolloutv1alpha1.ReleaseAborted))
	g.Expect(releaseWave(ns, rel)()).To(gomega.Equal("stopped at 1/2 first"))
	g.Expect(podUIDs(t, ns, "legacy")).To(gomega.Equal(before))

	g.Eventually(func() string {
		out, _ := flotilla("describe", "deployment/legacy", "-n", ns)
		return out
	}).Should(gomega.And(
		gomega.MatchRegexp(`east\s+1\s+-\s+-\s+handed back \(unmanaged\)`),
		gomega.MatchRegexp(`west\s+1\s+-\s+-\s+not adopted \(unmanaged\)`),
		gomega.ContainSubstring("Adoption:   release legacy-deployment-r1 Aborted: handed back to unmanaged in east"),
		gomega.Not(gomega.ContainSubstring("waiting for the members")),
	))
	g.Eventually(func() string {
		out, _ := flotilla("release", "get", "deployment/legacy", "-n", ns)
		return out
	}).Should(gomega.And(
		gomega.ContainSubstring("east handed back to unmanaged"),
		gomega.MatchRegexp(`east  RolledBack  \[unmanaged\]  handed back to unmanaged`),
		gomega.Not(gomega.ContainSubstring("waiting")),
	))

	out, err = flotilla("release", "undo", "deployment/legacy", "-n", ns)
	g.Expect(err).To(gomega.HaveOccurred(), out)
	g.Expect(err.Error()).To(gomega.ContainSubstring("handed its clusters back to unmanaged already; nothing to undo"))
	out, err = flotilla("release", "abort", "deployment/legacy", "-n", ns)
	g.Expect(err).To(gomega.HaveOccurred(), out)
	g.Expect(err.Error()).To(gomega.ContainSubstring("is Aborted, there is nothing to abort"))
	for _, m := range members {
		g.Expect(memberReplicas(t, m, ns, "legacy")).To(gomega.Equal(int32(1)), m)
	}
}
