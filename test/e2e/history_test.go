package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/history/pgtest"
	"github.com/flotilla-dev/flotilla/internal/inventory"
)

// inventoryAs returns a GET against the inventory API as a user of the fleet's CA (no user:
// the admin), returning the status code and body.
func inventoryAs(t *testing.T, user string, groups ...string) func(path string) (int, []byte) {
	t.Helper()
	path := fleet.Kubeconfig("")
	if user != "" {
		var err error
		if path, err = fleet.UserKubeconfig("", user, groups...); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: rt, Timeout: 20 * time.Second}
	return func(p string) (int, []byte) {
		resp, err := c.Get(fleet.InventoryURL() + p)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
}

func historyOf(t *testing.T, get func(string) (int, []byte), q url.Values) []inventory.HistoryItem {
	t.Helper()
	code, body := get("/api/v1/history?" + q.Encode())
	if code != http.StatusOK {
		t.Fatalf("history %s: %d %s", q.Encode(), code, body)
	}
	var page inventory.HistoryPage
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	return page.Items
}

// describe prints a history in order, one line per record, for assertions and failures.
func describeHistory(items []inventory.HistoryItem) []string {
	var out []string
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		out = append(out, fmt.Sprintf("%s %d->%d %s %s", it.Cluster, it.FromRevision, it.ToRevision, it.Cause, it.Outcome))
	}
	return out
}

// A template placed on east and west, released twice (the second aborted while east ran it):
// the inventory API gives its history in order per application and per cluster, with causes
// (placement, release wave, rollback) and images; the reader of another team gets 403 for
// this team and nothing fleet-wide; bad parameters are 400 naming them; no credentials is 401;
// a controller-manager restart neither loses nor duplicates records; flotilla history and
// flotilla where print the same.
func TestHistoryAndInventoryAPI(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "hist-a"
	for _, args := range [][]string{
		{"team", "create", ns, "--contributor", "hist-a-devs", "--reader", "hist-a-viewers"},
		{"team", "create", "hist-b", "--reader", "hist-b-viewers"},
	} {
		out, err := flotilla(append(args, "--kubeconfig", fleet.Kubeconfig(""))...)
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{ManualApproval: true}},
				{Name: "second", ClusterNames: []string{"west"}},
			}},
		}}
	web := webDeployment(ns, 1)
	createAll(t, g, policy, web)
	admin := inventoryAs(t, "")
	q := url.Values{"team": {ns}}
	g.Eventually(func() []string { return describeHistory(historyOf(t, admin, q)) }).Should(gomega.ContainElements(
		"east 0->1 placement healthy", "west 0->1 placement healthy"))

	// Release 2 through both waves, changed by alice and promoted by bob, team A's
	// contributors; release 3 changed by carol.
	alice, carol := userClient(t, "", "alice", "hist-a-devs"), userClient(t, "", "carol", "hist-a-devs")
	setImageAs := func(c client.Client, image string) {
		g.Eventually(func() error {
			cur := &appsv1.Deployment{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
				return err
			}
			cur.Spec.Template.Spec.Containers[0].Image = image
			return c.Update(ctx, cur)
		}).Should(gomega.Succeed())
	}
	bob, err := fleet.UserKubeconfig("", "bob", "hist-a-devs")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	setImageAs(alice, "registry.example/web:2")
	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase(ns, "web-deployment-r2", 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))
	out, err := flotilla("release", "promote", "deployment/web", "-n", ns, "--kubeconfig", bob)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, "web-deployment-r2") }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	// Release 3, aborted by bob while east runs it: east goes back to 2.
	setImageAs(carol, "registry.example/web:3")
	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase(ns, "web-deployment-r3", 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))
	g.Eventually(func() []string { return describeHistory(historyOf(t, admin, q)) }).Should(gomega.ContainElement("east 2->3 release healthy"))
	out, err = flotilla("release", "abort", "deployment/web", "-n", ns, "--kubeconfig", bob)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() string { return memberImage(t, "east", ns, "web") }).Should(gomega.Equal("registry.example/web:2"))

	var items []inventory.HistoryItem
	g.Eventually(func() []string {
		items = historyOf(t, admin, q)
		return describeHistory(items)
	}).Should(gomega.ContainElement("east 3->2 rollback healthy"))
	lines := strings.Join(describeHistory(items), "\n")
	for _, order := range [][2]string{
		{"east 0->1 placement healthy", "east 1->2 release healthy"},
		{"east 1->2 release healthy", "east 2->3 release healthy"},
		{"east 2->3 release healthy", "east 3->2 rollback healthy"},
		{"west 0->1 placement healthy", "west 1->2 release healthy"},
	} {
		g.Expect(strings.Index(lines, order[0])).To(gomega.BeNumerically("<", strings.Index(lines, order[1])), "%q before %q in\n%s", order[0], order[1], lines)
	}
	g.Expect(lines).NotTo(gomega.ContainSubstring("west 2->3"), "west never ran revision 3")
	// Actors are the users behind each change, from the control plane's audit stream: the
	// admin who created the template, alice and carol who changed it (in both waves of r2,
	// though bob promoted the second), bob who aborted r3.
	actorsOf := func() map[string]string {
		actors := map[string]string{}
		for _, it := range historyOf(t, admin, q) {
			actors[fmt.Sprintf("%s %d->%d %s", it.Cluster, it.FromRevision, it.ToRevision, it.Cause)] = it.Actor
		}
		return actors
	}
	for _, it := range items {
		if it.Cluster == "east" && it.ToRevision == 2 && it.Cause == "release" {
			g.Expect(it.CauseDetail).To(gomega.ContainSubstring("release web-deployment-r2 wave 1/2 (first)"))
			g.Expect(it.Images).To(gomega.Equal([]string{"registry.example/web:2"}))
		}
		if it.Cause == "rollback" {
			g.Expect(it.CauseDetail).To(gomega.ContainSubstring("web-deployment-r3"))
		}
	}
	// Records are written at once and named when the audit stream has delivered the writes.
	g.Eventually(actorsOf).Should(gomega.And(
		gomega.HaveKeyWithValue("east 0->1 placement", "flotilla-admin"),
		gomega.HaveKeyWithValue("east 1->2 release", "alice"),
		gomega.HaveKeyWithValue("west 1->2 release", "alice"),
		gomega.HaveKeyWithValue("east 2->3 release", "carol"),
		gomega.HaveKeyWithValue("east 3->2 rollback", "bob"),
	))
	// Per cluster: only west's records.
	for _, it := range historyOf(t, admin, url.Values{"cluster": {"west"}, "team": {ns}}) {
		g.Expect(it.Cluster).To(gomega.Equal("west"))
	}

	// Who may read what: team B's reader gets 403 on team A and nothing of it fleet-wide;
	// team A's reader reads it but may not list clusters.
	bReader := inventoryAs(t, "hugo", "hist-b-viewers")
	code, body := bReader("/api/v1/history?team=" + ns)
	g.Expect(code).To(gomega.Equal(http.StatusForbidden), string(body))
	g.Expect(historyOf(t, bReader, url.Values{})).To(gomega.BeEmpty())
	code, body = bReader("/api/v1/applications?namespace=" + ns)
	g.Expect(code).To(gomega.Equal(http.StatusForbidden), string(body))
	aReader := inventoryAs(t, "ida", "hist-a-viewers")
	g.Eventually(func() int { return len(historyOf(t, aReader, q)) }).Should(gomega.Equal(len(items)))
	code, _ = aReader("/api/v1/clusters")
	g.Expect(code).To(gomega.Equal(http.StatusForbidden))
	code, body = admin("/api/v1/clusters")
	g.Expect(code).To(gomega.Equal(http.StatusOK))
	g.Expect(string(body)).To(gomega.ContainSubstring(`"shortName":"use1"`))
	var clusters struct {
		Items []struct{ Name string } `json:"items"`
	}
	g.Expect(json.Unmarshal(body, &clusters)).To(gomega.Succeed())
	g.Expect(slices.IsSortedFunc(clusters.Items, func(a, b struct{ Name string }) int { return strings.Compare(a.Name, b.Name) })).To(gomega.BeTrue(),
		"clusters in name order, so a live page keeps its rows: %s", body)

	// Bad input names the parameter; no credentials is 401.
	for p, param := range map[string]string{"limit=5000": "limit", "cursor=forged.AAAA": "cursor", "since=yesterday": "since", "colour=red": "colour", "cause=bogus": "cause"} {
		code, body := admin("/api/v1/history?" + p)
		g.Expect(code).To(gomega.Equal(http.StatusBadRequest), p)
		g.Expect(string(body)).To(gomega.ContainSubstring(`"parameter":"`+param+`"`), p)
	}
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: mustCAConfig(t)}}
	resp, err := anon.Get(fleet.InventoryURL() + "/api/v1/history")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(gomega.Equal(http.StatusUnauthorized))
	resp, err = anon.Get(fleet.InventoryURL() + "/openapi.json")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	doc, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(string(doc)).To(gomega.ContainSubstring(`"/api/v1/history"`))

	// Paging: pages of 2 give every record once.
	seen := map[string]bool{}
	cursor := ""
	for {
		pq := url.Values{"team": {ns}, "limit": {"2"}}
		if cursor != "" {
			pq.Set("cursor", cursor)
		}
		code, body := admin("/api/v1/history?" + pq.Encode())
		g.Expect(code).To(gomega.Equal(http.StatusOK), string(body))
		var page inventory.HistoryPage
		g.Expect(json.Unmarshal(body, &page)).To(gomega.Succeed())
		for _, it := range page.Items {
			g.Expect(seen[it.ID]).To(gomega.BeFalse(), "record %s twice", it.ID)
			seen[it.ID] = true
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	g.Expect(seen).To(gomega.HaveLen(len(items)))

	// What-if: tainting west would take web off it; moving the policy to east and europe
	// would add europe and remove west, which is then what happens.
	whatIf := func(obj string) inventory.WhatIf {
		f := filepath.Join(t.TempDir(), "obj.yaml")
		g.Expect(os.WriteFile(f, []byte(obj), 0o600)).To(gomega.Succeed())
		out, err := flotilla("what-if", "-f", f, "-o", "json", "--kubeconfig", fleet.Kubeconfig(""))
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
		var w inventory.WhatIf
		g.Expect(json.Unmarshal([]byte(out), &w)).To(gomega.Succeed(), out)
		return w
	}
	tainted := whatIf(`apiVersion: cluster.flotilla.dev/v1alpha1
kind: Cluster
metadata: {name: west, labels: {region: us-west}}
spec:
  endpoint: https://127.0.0.1:1
  credentialsSecretRef: {namespace: flotilla-system, name: west}
  syncMode: Push
  taints: [{key: maintenance, effect: NoExecute}]
`)
	found := false
	for _, ch := range tainted.Changes {
		if ch.Namespace == ns && ch.Name == "web" {
			found = true
			g.Expect(ch.Removed).To(gomega.Equal([]string{"west"}), "%+v", ch)
		}
	}
	g.Expect(found).To(gomega.BeTrue(), "%+v", tainted)
	moved := whatIf(fmt.Sprintf(`apiVersion: policy.flotilla.dev/v1alpha1
kind: PropagationPolicy
metadata: {name: web, namespace: %s}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  placement: {clusterAffinity: {clusterNames: [east, europe]}}
`, ns))
	g.Expect(moved.Changes).To(gomega.HaveLen(1), "%+v", moved)
	g.Expect(moved.Changes[0].Added).To(gomega.Equal([]string{"europe"}))
	g.Expect(moved.Changes[0].Removed).To(gomega.Equal([]string{"west"}))
	code, body = aReader("/api/v1/clusters")
	g.Expect(code).To(gomega.Equal(http.StatusForbidden), string(body))
	g.Expect(memberReplicas(t, "europe", ns, "web")).To(gomega.Equal(int32(-1)), "what-if writes nothing")
	cur := &policyv1alpha1.PropagationPolicy{}
	g.Expect(cp.Get(ctx, client.ObjectKeyFromObject(policy), cur)).To(gomega.Succeed())
	cur.Spec.Placement.ClusterAffinity.ClusterNames = []string{"east", "europe"}
	g.Expect(cp.Update(ctx, cur)).To(gomega.Succeed())
	g.Eventually(func() []string {
		var names []string
		if b := bindingOf(ctx, ns, "web-deployment"); b != nil {
			for _, c := range b.Spec.Clusters {
				names = append(names, c.Name)
			}
		}
		return names
	}).Should(gomega.ConsistOf("east", "europe"), "what happened is what what-if said")
	g.Eventually(func() []string {
		items = historyOf(t, admin, q)
		return describeHistory(items)
	}).Should(gomega.ContainElements("west 2->0 placement removed", "europe 0->2 placement healthy"))

	// A restart neither loses nor duplicates.
	g.Expect(fleet.StopManager()).To(gomega.Succeed())
	g.Expect(fleet.StartManager(ctx)).To(gomega.Succeed())
	g.Consistently(func() int { return len(historyOf(t, admin, q)) }, 5*time.Second).Should(gomega.Equal(len(items)))

	// The CLI, as the admin.
	out, err = flotilla("history", "-n", ns, "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(gomega.ContainSubstring("rollback"), gomega.ContainSubstring("deployment/web")))
	out, err = flotilla("where", "deployment/web", "-n", ns, "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(gomega.ContainSubstring("east"), gomega.ContainSubstring("europe"), gomega.ContainSubstring("PropagationPolicy hist-a/web")))
	g.Expect(out).To(gomega.ContainSubstring("registry.example/web:2"), "the images of the revision each cluster runs (3 was aborted)")
	g.Expect(out).NotTo(gomega.ContainSubstring("registry.example/web:3"))
}

// The same history on PostgreSQL: the controller-manager restarted with a postgres:// DSN
// records a placement and a release in waves there (read back both through the inventory API
// and straight from the database), and `flotilla where` answers from it.
func TestHistoryOnPostgreSQL(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	pg := pgtest.Start(t)
	dsn := pg.Fresh(t)
	g.Expect(fleet.RestartManager(ctx, "--history-dsn="+dsn)).To(gomega.Succeed())
	// Back to the fleet's SQLite store before the server stops (cleanups run last first).
	t.Cleanup(func() {
		if err := fleet.RestartManager(context.Background()); err != nil {
			t.Errorf("restarting the controller-manager on SQLite: %v", err)
		}
	})
	ns := "hist-pg"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{"east"}}, {Name: "second", ClusterNames: []string{"west"}},
			}},
		}}
	web := webDeployment(ns, 1)
	createAll(t, g, policy, web)
	admin := inventoryAs(t, "")
	q := url.Values{"team": {ns}}
	g.Eventually(func() []string { return describeHistory(historyOf(t, admin, q)) }).Should(gomega.ContainElements(
		"east 0->1 placement healthy", "west 0->1 placement healthy"))
	setImage(t, g, web, "registry.example/web:2")
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase(ns, "web-deployment-r2") }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	var lines string
	g.Eventually(func() []string {
		h := describeHistory(historyOf(t, admin, q))
		lines = strings.Join(h, "\n")
		return h
	}).Should(gomega.ContainElements("east 1->2 release healthy", "west 1->2 release healthy"))
	g.Expect(strings.Index(lines, "east 1->2 release healthy")).To(gomega.BeNumerically("<", strings.Index(lines, "west 1->2 release healthy")), lines)

	db, err := sql.Open("pgx", dsn)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	defer func() { _ = db.Close() }()
	var n int
	g.Expect(db.QueryRowContext(ctx, "SELECT count(*) FROM records WHERE team = $1 AND cause = 'release'", ns).Scan(&n)).To(gomega.Succeed())
	g.Expect(n).To(gomega.BeNumerically(">=", 2), "the release's records are in PostgreSQL")

	out, err := flotilla("where", "deployment/web", "-n", ns, "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(gomega.ContainSubstring("east"), gomega.ContainSubstring("west"), gomega.ContainSubstring("registry.example/web:2")))
}

// mustCAConfig trusts the fleet's CA and presents no certificate.
func mustCAConfig(t *testing.T) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(fleet.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}
