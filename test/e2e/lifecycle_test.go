package e2e

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// Given a second, one-member fleet: `up` again changes nothing, `down` stops exactly its own
// processes (the main fleet keeps running), and `up` brings the same fleet back with its data.
func TestUpTwiceDownUpKeepsData(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	small := &localfleet.Fleet{APIVersion: localfleet.FleetAPIVersion, Kind: localfleet.FleetKind, Members: []localfleet.Member{
		{Name: "solo", Labels: map[string]string{"region": "ap-south", "env": "dev"}, Nodes: 1,
			NodeCapacity: localfleet.NodeCapacity{CPU: "4", Memory: "8Gi", Pods: "20"}},
	}}
	dir := filepath.Join(t.TempDir(), "solo-fleet")
	lf, err := startFleet(ctx, dir, small)
	t.Cleanup(func() {
		if lf != nil {
			_ = lf.Down(true)
		}
	})
	g.Expect(err).NotTo(gomega.HaveOccurred())

	// Data in the control plane and in the member, to find again after the restart.
	cpc, err := controlPlaneClient(lf)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	cfg, err := lf.RESTConfig("solo")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	solo, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	marker := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survives-restart", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	}
	g.Expect(cpc.Create(ctx, marker())).To(gomega.Succeed())
	g.Expect(solo.Create(ctx, marker())).To(gomega.Succeed())

	before := pids(lf)
	res, err := lf.Up(ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(res.AlreadyUp).To(gomega.BeTrue(), "a second up must be a no-op")
	g.Expect(pids(lf)).To(gomega.Equal(before), "a second up must not restart anything")

	mainBefore := pids(fleet)
	g.Expect(lf.Down(false)).To(gomega.Succeed())
	for _, s := range lf.Status() {
		g.Expect(s.Running).To(gomega.BeFalse(), "%s still runs after down", s.Name)
	}
	g.Expect(pids(fleet)).To(gomega.Equal(mainBefore), "down of one fleet must not touch another fleet's processes")

	lf2, err := startFleet(ctx, dir, nil)
	lf = lf2
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(lf.Fleet().Names()).To(gomega.Equal([]string{"solo"}), "up without a fleet file brings the saved fleet back")
	g.Expect(readyOf(ctx, lf, "solo")).To(gomega.Equal(metav1.ConditionTrue))

	cpc, err = controlPlaneClient(lf)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	cfg, err = lf.RESTConfig("solo")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	solo, err = client.New(cfg, client.Options{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, c := range []client.Client{cpc, solo} {
		got := &corev1.ConfigMap{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "survives-restart"}, got)).To(gomega.Succeed())
		g.Expect(got.Data).To(gomega.Equal(map[string]string{"k": "v"}))
	}
}

func pids(lf *localfleet.LocalFleet) map[string]int {
	out := map[string]int{}
	for _, s := range lf.Status() {
		out[s.Name] = s.PID
	}
	return out
}

func readyOf(ctx context.Context, lf *localfleet.LocalFleet, name string) metav1.ConditionStatus {
	c, err := controlPlaneClient(lf)
	if err != nil {
		return ""
	}
	cl := &clusterv1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, cl); err != nil {
		return ""
	}
	if cond := meta.FindStatusCondition(cl.Status.Conditions, clusterv1alpha1.ConditionReady); cond != nil {
		return cond.Status
	}
	return ""
}
