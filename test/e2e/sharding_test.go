package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
	"github.com/flotilla-dev/flotilla/internal/shard"
)

// Given two controller-manager replicas sharding four slim members (a fleet file's
// manager.replicas: manager-1 leads, each holds some members), when manager-1 is killed
// (SIGKILL, nothing released) while a release bakes its first wave, then manager-2 takes the
// lead and all four clusters within a lease period, the release
// finishes on every member, and each member Deployment's generation moved once for the one
// image change: nothing applied twice, nothing lost.
func TestShardedManagersHandOverClustersMidRelease(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	fleetFile := localfleet.GeneratedFleet(4, localfleet.ProfileSlim)
	fleetFile.Manager = &localfleet.ManagerSettings{Replicas: 2}
	lf, err := startFleet(ctx, filepath.Join(t.TempDir(), "sharded"), fleetFile)
	if lf != nil {
		t.Cleanup(func() { _ = lf.Down(true) })
	}
	if err != nil {
		t.Fatalf("starting a sharded fleet: %v", err)
	}
	r1, r2 := localfleet.ReplicaIdentity(1), localfleet.ReplicaIdentity(2)
	_, r2Metrics, r2Inventory, err := lf.ReplicaAddresses(2)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := controlPlaneClient(lf)
	if err != nil {
		t.Fatal(err)
	}
	members := lf.Fleet().Names()
	memberClients := map[string]client.Client{}
	for _, m := range members {
		cfg, err := lf.RESTConfig(m)
		if err != nil {
			t.Fatal(err)
		}
		if memberClients[m], err = client.New(cfg, client.Options{Scheme: kube.Scheme}); err != nil {
			t.Fatal(err)
		}
	}
	held := func(replica string) []string {
		l := &coordinationv1.Lease{}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: kube.SystemNamespace, Name: shard.LeaseName(replica)}, l); err != nil || l.Annotations[shard.ClustersAnnotation] == "" {
			return nil
		}
		return strings.Split(l.Annotations[shard.ClustersAnnotation], ",")
	}
	// Rendezvous hashing splits the four members, r1 leading (internal/shard checks both get some).
	want := map[string][]string{}
	for _, m := range members {
		o := shard.Owner(m, []string{r1, r2}, r1)
		want[o] = append(want[o], m)
	}
	g.Eventually(func() []string { return held(r1) }, time.Minute).Should(gomega.Equal(want[r1]))
	g.Eventually(func() []string { return held(r2) }, time.Minute).Should(gomega.Equal(want[r2]))
	g.Expect(scrape(t, r2Metrics, `flotilla_shard_clusters{replica="`+r2+`"}`)).To(gomega.Equal(fmt.Sprint(len(want[r2]))))
	out, err := flotilla("shards", "--kubeconfig", lf.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.MatchRegexp(r1 + `\s+leader\s+127\.0\.0\.1:\d+\s+in \d+s\s+` + fmt.Sprintf("%d: %s", len(want[r1]), strings.Join(want[r1], ","))))
	g.Expect(out).To(gomega.MatchRegexp(r2 + `\s+shard\s+` + regexp.QuoteMeta(r2Inventory) + `\s+in \d+s\s+` + fmt.Sprintf("%d: %s", len(want[r2]), strings.Join(want[r2], ","))))

	ns := "sharded"
	g.Expect(cp.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(gomega.Succeed())
	bake := intstr.FromString("20s")
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{members[0]}, Gates: policyv1alpha1.Gates{BakeTime: &bake}},
				{Name: "rest", ClusterNames: members[1:]},
			}},
		},
	}
	web := webDeployment(ns, 2)
	g.Expect(cp.Create(ctx, policy)).To(gomega.Succeed())
	g.Expect(cp.Create(ctx, web)).To(gomega.Succeed())
	healthy := func() workv1alpha1.Health {
		b := &workv1alpha1.ResourceBinding{}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-deployment"}, b); err != nil {
			return ""
		}
		return b.Status.Health
	}
	g.Eventually(healthy, 2*time.Minute).Should(gomega.Equal(workv1alpha1.HealthHealthy))
	generations := map[string]int64{}
	for _, m := range members {
		d := &appsv1.Deployment{}
		g.Expect(memberClients[m].Get(ctx, client.ObjectKeyFromObject(web), d)).To(gomega.Succeed(), "Deployment in %s", m)
		generations[m] = d.Generation
	}

	// The image change is release r2; while wave "first" bakes, the leader dies.
	g.Eventually(func() error {
		cur := &appsv1.Deployment{}
		if err := cp.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = "registry.example/web:2"
		return cp.Update(ctx, cur)
	}).Should(gomega.Succeed())
	image := func(m string) string {
		d := &appsv1.Deployment{}
		if err := memberClients[m].Get(ctx, client.ObjectKeyFromObject(web), d); err != nil {
			return ""
		}
		return d.Spec.Template.Spec.Containers[0].Image
	}
	g.Eventually(func() string { return image(members[0]) }, time.Minute).Should(gomega.Equal("registry.example/web:2"))
	g.Expect(image(members[1])).To(gomega.Equal("registry.example/web:1"), "the second wave started before the first baked")
	killed := time.Now()
	g.Expect(lf.KillManager()).To(gomega.Succeed())

	g.Eventually(func() []string { return held(r2) }, time.Minute).Should(gomega.Equal(members))
	t.Logf("manager-2 held all %d clusters %.1fs after manager-1 was killed", len(members), time.Since(killed).Seconds())
	g.Eventually(func() string { return scrape(t, r2Metrics, `flotilla_shard_clusters{replica="`+r2+`"}`) }).Should(gomega.Equal("4"))
	// The leader Lease expires with the shard Lease; r2 is elected at its next try.
	g.Eventually(func() string { return scrape(t, r2Metrics, `flotilla_shard_leader{replica="`+r2+`"}`) }, 30*time.Second).Should(gomega.Equal("1"))
	t.Logf("manager-2 led %.1fs after manager-1 was killed", time.Since(killed).Seconds())
	g.Eventually(func() rolloutv1alpha1.ReleasePhase {
		rel := &rolloutv1alpha1.Release{}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-deployment-r2"}, rel); err != nil {
			return ""
		}
		return rel.Status.Phase
	}, 3*time.Minute).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	t.Logf("release succeeded %.1fs after manager-1 was killed", time.Since(killed).Seconds())
	for _, m := range members {
		d := &appsv1.Deployment{}
		g.Eventually(func(g gomega.Gomega) {
			g.Expect(memberClients[m].Get(ctx, client.ObjectKeyFromObject(web), d)).To(gomega.Succeed())
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(gomega.Equal("registry.example/web:2"))
			g.Expect(d.Status.AvailableReplicas).To(gomega.Equal(int32(2)))
		}).Should(gomega.Succeed(), "Deployment in %s", m)
		g.Expect(d.Generation).To(gomega.Equal(generations[m]+1), "the Deployment in %s moved %d generations for one change", m, d.Generation-generations[m])
	}
	g.Eventually(healthy).Should(gomega.Equal(workv1alpha1.HealthHealthy))
	g.Expect(slices.Contains(held(r2), members[0])).To(gomega.BeTrue())

	// The leader's Works stream is on the inventory port every user reaches.
	t.Run("TenantCannotReadOrWriteTheWorksStream", func(t *testing.T) {
		g := newG(t)
		g.Expect(cp.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "mallory-edit", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "team-sharded"}}})).To(gomega.Succeed())
		kc, err := lf.UserKubeconfig("", "mallory", "team-sharded")
		g.Expect(err).NotTo(gomega.HaveOccurred())
		cfg, err := clientcmd.BuildConfigFromFlags("", kc)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		cfg.Host, cfg.CAFile, cfg.CAData = "https://"+r2Inventory, lf.CAFile(), nil
		mallory, err := rest.HTTPClientFor(cfg)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		anonymous, err := rest.HTTPClientFor(&rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{CAFile: lf.CAFile()}})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		call := func(c *http.Client, method, path, body string) (int, string) {
			req, err := http.NewRequest(method, cfg.Host+path, strings.NewReader(body))
			g.Expect(err).NotTo(gomega.HaveOccurred())
			resp, err := c.Do(req)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			return resp.StatusCode, string(b)
		}
		code, body := call(mallory, http.MethodGet, "/works/v1alpha1/follow?cluster="+members[0], "")
		g.Expect(code).To(gomega.Equal(http.StatusForbidden), body)
		g.Expect(body).To(gomega.ContainSubstring("mallory may not update works/status"))
		g.Expect(body).NotTo(gomega.ContainSubstring("flotilla-es-"))
		code, body = call(mallory, http.MethodPost, "/works/v1alpha1/reports",
			`[{"namespace":"flotilla-es-`+members[0]+`","name":"web-deployment","uid":"x","finalizers":[]}]`)
		g.Expect(code).To(gomega.Equal(http.StatusForbidden), body)
		code, body = call(anonymous, http.MethodGet, "/works/v1alpha1/follow?cluster="+members[0], "")
		g.Expect(code).To(gomega.Equal(http.StatusUnauthorized), body)
		// Nor can a team point the replicas elsewhere: the shard Leases are the platform's.
		userCP, err := client.New(rest.CopyConfig(mustRESTConfig(t, kc)), client.Options{Scheme: kube.Scheme})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		forbidden(g, userCP.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: kube.SystemNamespace, Name: shard.LeaseName("evil"),
			Labels: map[string]string{shard.ReplicaLabel: "evil"}, Annotations: map[string]string{shard.AddressAnnotation: "attacker.example:443"}}}), "")
		l := &coordinationv1.Lease{}
		forbidden(g, userCP.Get(ctx, client.ObjectKey{Namespace: kube.SystemNamespace, Name: shard.LeaseName(r2)}, l), "")
	})
}

func mustRESTConfig(t *testing.T, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// scrape reads one sample of a plain-HTTP /metrics endpoint.
func scrape(t *testing.T, address, series string) string {
	t.Helper()
	resp, err := http.Get("http://" + address + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}
