package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/cli"
)

// apiserverRequests sums the control plane's apiserver_request_total: all requests, and
// those that check users (TokenReview, SubjectAccessReview).
func apiserverRequests(t *testing.T) (all, reviews float64) {
	t.Helper()
	cfg, err := fleet.RESTConfig("")
	if err != nil {
		t.Fatal(err)
	}
	body, err := kubernetes.NewForConfigOrDie(cfg).RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			continue
		}
		all += v
		if strings.Contains(line, `resource="tokenreviews"`) || strings.Contains(line, `resource="subjectaccessreviews"`) {
			reviews += v
		}
	}
	return all, reviews
}

// dashboardClient logs in to the controller-manager's dashboard with a token, as a browser
// would, and returns a client holding the session cookie.
func dashboardClient(t *testing.T, g gomega.Gomega, token string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(fleet.CAFile())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 200}}
	resp, err := c.Post(fleet.DashboardURL()+"api/login", "application/json", strings.NewReader(fmt.Sprintf(`{"token":%q}`, token)))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(gomega.Equal(http.StatusOK))
	return c
}

// What 50 open dashboards cost the control plane: each page holds the live feed open and
// reads the fleet matrix and releases again on every change, as the browser page does. The
// feed comes from the manager's informers and users are checked through short-lived caches,
// so the users' checks (TokenReview, SubjectAccessReview) do not grow with the number of
// pages; the figures of all apiserver requests are printed for both.
func TestDashboardPagesDoNotMultiplyControlPlaneLoad(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "dash-load"
	createTeam(t, g, ns, "--reader", "system:serviceaccounts:dash-load-readers")
	token := serviceAccountToken(t, g, "dash-load-readers", "viewer")
	web := webDeployment(ns, 1)
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: web.ObjectMeta, Spec: policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: web.Name}},
		Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}}}}}
	policy.Labels = nil
	createAll(t, g, web, policy)
	t.Cleanup(func() { _ = cp.Delete(context.Background(), web); _ = cp.Delete(context.Background(), policy) })
	g.Eventually(func() int32 { return memberReplicas(t, "west", ns, "web") }).Should(gomega.Equal(int32(1)))

	measure := func(pages int) (all, reviews, refreshes float64) {
		c := dashboardClient(t, g, token)
		pctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var mu sync.Mutex
		open := make(chan struct{}, pages)
		for range pages {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(pctx, http.MethodGet, fleet.DashboardURL()+"api/events", nil)
				resp, err := c.Do(req)
				if err != nil {
					return
				}
				defer resp.Body.Close()
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					switch sc.Text() {
					case "event: ready":
						open <- struct{}{}
					case "event: changes", "event: resync":
						for _, p := range []string{"api/applications", "api/releases"} {
							if r, err := c.Get(fleet.DashboardURL() + p); err == nil {
								r.Body.Close()
							}
						}
						mu.Lock()
						refreshes++
						mu.Unlock()
					}
				}
			}()
		}
		for range pages {
			select {
			case <-open:
			case <-time.After(time.Minute):
				t.Fatal("the dashboard's live feed did not open")
			}
		}
		all0, reviews0 := apiserverRequests(t)
		// The same activity for every measurement: five changes of the template, a second apart.
		for i := range 5 {
			g.Eventually(func() error {
				cur := &appsv1.Deployment{}
				if err := cp.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
					return err
				}
				cur.Spec.Replicas = ptr.To(int32(2 + i%2))
				return cp.Update(ctx, cur)
			}).Should(gomega.Succeed())
			time.Sleep(time.Second)
		}
		time.Sleep(3 * time.Second)
		all1, reviews1 := apiserverRequests(t)
		stop()
		wg.Wait()
		return all1 - all0, reviews1 - reviews0, refreshes
	}
	all1, reviews1, refreshes1 := measure(1)
	all50, reviews50, refreshes50 := measure(50)
	t.Logf("control-plane requests while 5 changes went by: 1 page %.0f (user checks %.0f, page refreshes %.0f); 50 pages %.0f (user checks %.0f, page refreshes %.0f)",
		all1, reviews1, refreshes1, all50, reviews50, refreshes50)
	g.Expect(refreshes50).To(gomega.BeNumerically(">=", 50), "every page heard the changes and read again")
	// The inventory API caches a user's checks for 10s: one round is a TokenReview and a
	// SubjectAccessReview per namespace, whatever the number of pages.
	var nss corev1.NamespaceList
	g.Expect(cp.List(ctx, &nss)).To(gomega.Succeed())
	round := float64(2 + len(nss.Items))
	g.Expect(reviews50).To(gomega.BeNumerically("<=", reviews1+2*round), "user checks do not grow with pages")
	g.Expect(all50-reviews50).To(gomega.BeNumerically("<", all1-reviews1+50), "50 pages add less than one request each to the control plane")
}

// syncBuffer is an output the command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// `flotilla dashboard` on a workstation: the printed link logs in as the kubeconfig's own
// identity (here a client certificate of team A's contributors), which then reads only team
// A's applications through the inventory API; the link with a wrong key is refused.
func TestDashboardCommandActsAsYourKubeconfig(t *testing.T) {
	g := newG(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := "dash-local"
	out, err := flotilla("team", "create", ns, "--contributor", "dash-local-devs", "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	web := webDeployment(ns, 1)
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: web.Name}},
		Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}}}}
	createAll(t, g, web, policy)
	t.Cleanup(func() { _ = cp.Delete(context.Background(), web); _ = cp.Delete(context.Background(), policy) })
	kubeconfig, err := fleet.UserKubeconfig("", "dora", "dash-local-devs")
	g.Expect(err).NotTo(gomega.HaveOccurred())

	var output syncBuffer
	cmd := cli.NewRootCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &output, ErrOut: &output})
	cmd.SetArgs([]string{"dashboard", "--address", "127.0.0.1:0", "--kubeconfig", kubeconfig, "--state-dir", fleet.StateDir(), "--bin-dir", binDir})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var link string
	g.Eventually(func() string {
		for _, line := range strings.Split(output.String(), "\n") {
			if l, ok := strings.CutPrefix(line, "Open as yourself: "); ok {
				link = l
			}
		}
		return link
	}).ShouldNot(gomega.BeEmpty(), "the command prints a login link")
	base := link[:strings.Index(link, "login?")]

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(base + "login?key=wrong")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(gomega.Equal(http.StatusUnauthorized))
	resp, err = c.Get(link)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(gomega.Equal(http.StatusOK), "the link logs in and lands on the page")

	var me struct {
		User string `json:"user"`
	}
	resp, err = c.Get(base + "api/session")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(json.NewDecoder(resp.Body).Decode(&me)).To(gomega.Succeed())
	resp.Body.Close()
	g.Expect(me.User).To(gomega.Equal("dora"), "the session is the kubeconfig's client certificate user")
	g.Eventually(func() string { return placedApps(c, base+"api/applications") }).Should(gomega.Equal(ns+"/web"), "dora reads her team's namespace only")
	cancel()
	g.Eventually(done).Should(gomega.Receive(gomega.BeNil()), "the command stops with its context")
}

// The controller-manager's dashboard takes a client certificate of the control plane's CA as a
// login: the user reads as themself (the inventory API sees the same certificate), the page
// shows no actions, and an action is refused saying why; without a certificate it is 401.
func TestDashboardClientCertificateLoginReadsOnly(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "dash-cert"
	out, err := flotilla("team", "create", ns, "--contributor", "dash-cert-devs", "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	web := webDeployment(ns, 1)
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: web.Name}},
		Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}}}}
	createAll(t, g, web, policy)
	t.Cleanup(func() { _ = cp.Delete(context.Background(), web); _ = cp.Delete(context.Background(), policy) })

	path, err := fleet.UserKubeconfig("", "eve", "dash-cert-devs")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	certPEM, keyPEM := cfg.CertData, cfg.KeyData
	if len(certPEM) == 0 {
		certPEM, _ = os.ReadFile(cfg.CertFile)
		keyPEM, _ = os.ReadFile(cfg.KeyFile)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	caPEM, err := os.ReadFile(fleet.CAFile())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	newClient := func(certs ...tls.Certificate) *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
	}
	post := func(c *http.Client, path, csrf string) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fleet.DashboardURL()+path, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if csrf != "" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		resp, err := c.Do(req)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		defer resp.Body.Close()
		body := map[string]any{}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	code, _ := post(newClient(), "api/login/certificate", "")
	g.Expect(code).To(gomega.Equal(http.StatusUnauthorized), "no certificate, no login")

	c := newClient(cert)
	code, me := post(c, "api/login/certificate", "")
	g.Expect(code).To(gomega.Equal(http.StatusOK), "%v", me)
	g.Expect(me).To(gomega.HaveKeyWithValue("user", "eve"))
	g.Expect(me).To(gomega.HaveKeyWithValue("readOnly", true))
	g.Eventually(func() string { return placedApps(c, fleet.DashboardURL()+"api/applications") }).Should(gomega.Equal(ns+"/web"), "eve reads her team's namespace as herself")
	r, err := c.Get(fleet.DashboardURL() + "api/permissions?namespace=" + ns)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	perm := map[string]any{}
	g.Expect(json.NewDecoder(r.Body).Decode(&perm)).To(gomega.Succeed())
	r.Body.Close()
	g.Expect(perm).To(gomega.HaveKeyWithValue("steer", false), "no buttons for a certificate login")
	code, body := post(c, "api/releases/"+ns+"/web-deployment-r2/promote", me["csrf"].(string))
	g.Expect(code).To(gomega.Equal(http.StatusForbidden))
	g.Expect(body["message"]).To(gomega.ContainSubstring("client certificate"))
}

// placedApps lists NAMESPACE/NAME of the templates the dashboard's api/applications at url
// answers, comma-separated (or the error).
func placedApps(c *http.Client, url string) string {
	r, err := c.Get(url)
	if err != nil {
		return err.Error()
	}
	defer r.Body.Close()
	var apps struct {
		Items []struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"items"`
	}
	if err := json.NewDecoder(r.Body).Decode(&apps); err != nil {
		return err.Error()
	}
	var names []string
	for _, a := range apps.Items {
		names = append(names, a.Namespace+"/"+a.Name)
	}
	return strings.Join(names, ",")
}
