package e2e

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The controller-manager serves health probes and Prometheus metrics with the flotilla_ prefix.
func TestManagerServesHealthAndMetrics(t *testing.T) {
	g := newG(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		body, code := get(t, "http://"+fleet.ManagerHealthAddress()+path)
		g.Expect(code).To(gomega.Equal(http.StatusOK), "%s: %s", path, body)
	}
	g.Eventually(func() string {
		body, _ := get(t, "http://"+fleet.ManagerMetricsAddress()+"/metrics")
		return body
	}).Should(gomega.And(
		gomega.ContainSubstring(`flotilla_cluster_ready{cluster="east"} 1`),
		gomega.ContainSubstring(`flotilla_cluster_probe_duration_seconds_count{cluster="europe"}`),
	))
}

// Restarting the controller-manager keeps every verdict (no flap to Unknown), and the new
// leader goes on detecting failures.
func TestManagerRestartKeepsVerdictsAndGoesOnProbing(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	// A member an earlier test restarted may not be Ready again yet.
	for _, name := range fleet.Fleet().Names() {
		g.Eventually(func() metav1.ConditionStatus { return readyStatus(t, name) }).Should(gomega.Equal(metav1.ConditionTrue), name)
	}
	g.Expect(fleet.StopManager()).To(gomega.Succeed())
	g.Expect(fleet.StartManager(ctx)).To(gomega.Succeed())
	g.Consistently(func(g gomega.Gomega) {
		for _, name := range fleet.Fleet().Names() {
			g.Expect(readyStatus(t, name)).To(gomega.Equal(metav1.ConditionTrue), "cluster %s", name)
		}
	}).WithTimeout(5 * time.Second).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())

	t.Cleanup(func() { _ = fleet.StartMember(context.Background(), "europe") })
	g.Expect(fleet.StopComponent("europe-apiserver")).To(gomega.Succeed())
	g.Eventually(func() metav1.ConditionStatus { return readyStatus(t, "europe") }).
		WithTimeout(60 * time.Second).Should(gomega.Equal(metav1.ConditionFalse))
	g.Expect(fleet.StartMember(ctx, "europe")).To(gomega.Succeed())
	g.Eventually(func() metav1.ConditionStatus { return readyStatus(t, "europe") }).Should(gomega.Equal(metav1.ConditionTrue))
}

func get(t *testing.T, url string) (string, int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return err.Error(), 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body), resp.StatusCode
}
