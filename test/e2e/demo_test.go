package e2e

import (
	"context"
	"testing"

	"github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/demo"
)

// The demo's path, as `make demo` runs it: real Prometheus scraping the traffic simulator; the
// bad version's canary analysis fails and rolls it back by itself; the good version passes
// every wave. Needs Debian's prometheus (installed by .ci/run, or by the demo when run as root).
func TestDemoRollsBackTheBadVersionAndReleasesTheGoodOne(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	out, err := flotilla("demo")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(
		gomega.ContainSubstring("== summary"),
		gomega.ContainSubstring("the bad version never left the canary wave"),
	))
	phase := func(name string) rolloutv1alpha1.ReleasePhase {
		rel := &rolloutv1alpha1.Release{}
		g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: name}, rel)).To(gomega.Succeed())
		return rel.Status.Phase
	}
	g.Expect(phase("shop-deployment-r2")).To(gomega.Equal(rolloutv1alpha1.ReleaseRolledBack))
	g.Expect(phase("shop-deployment-r3")).To(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	run := &rolloutv1alpha1.AnalysisRun{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: "shop-deployment-r2-canary"}, run)).To(gomega.Succeed())
	g.Expect(run.Status.Phase).To(gomega.Equal(rolloutv1alpha1.AnalysisFailed), "the bad version failed on real Prometheus data")
	for _, cluster := range []string{"east", "west", "europe"} {
		g.Expect(memberImage(t, cluster, demo.Namespace, demo.App)).To(gomega.Equal(demo.BetterImage), cluster)
	}
	g.Expect(memberImage(t, "west", demo.Namespace, demo.App)).NotTo(gomega.Equal(demo.BadImage))
}
