package application

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

const (
	webRepo = "https://git.example.com/shop/web.git"
	payRepo = "https://git.example.com/pay/api.git"
)

// hookFixture is a control plane of Teams, Secrets and Applications behind a fake client, and
// the queue the webhook's wakes land in.
type hookFixture struct {
	c     *Controller
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	clock *clocktesting.FakeClock

	mu        sync.Mutex
	forgotten map[string]int // repository -> Forget calls that named it
}

// team is a namespace's Team, with a webhook Secret holding secret unless secret is "".
func team(ns, secret string) []client.Object {
	t := &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenancyv1alpha1.TeamName}}
	if secret == "" {
		return []client.Object{t}
	}
	t.Spec.Webhook = &tenancyv1alpha1.TeamWebhook{SecretRef: &tenancyv1alpha1.SecretReference{Name: "git-webhook"}}
	return []client.Object{t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-webhook"},
		Data: map[string][]byte{tenancyv1alpha1.WebhookSecretKey: []byte(secret)}}}
}

func app(ns, name, repo string) client.Object {
	return &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1alpha1.ApplicationSpec{Source: appsv1alpha1.ApplicationSource{Git: &appsv1alpha1.GitSource{RepoURL: repo}}}}
}

func newHookFixture(t *testing.T, objs ...client.Object) *hookFixture {
	t.Helper()
	f := &hookFixture{
		c: &Controller{Client: fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(objs...).Build(),
			Hooks: kube.NewQueueSource[reconcile.Request]()},
		queue:     workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()),
		clock:     clocktesting.NewFakeClock(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)),
		forgotten: map[string]int{},
	}
	t.Cleanup(f.queue.ShutDown)
	if err := f.c.Hooks.Start(context.Background(), f.queue); err != nil {
		t.Fatal(err)
	}
	return f
}

// handler is the webhook with the fixture's clock and a Forget that counts the repositories
// it names.
func (f *hookFixture) handler(opts ...WebhookOption) http.Handler {
	return f.c.Webhook(append(opts, func(w *webhook) {
		w.clock = f.clock
		w.forget = func(named func(string) bool) {
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, repo := range []string{webRepo, payRepo} {
				if named(repo) {
					f.forgotten[repo]++
				}
			}
		}
	})...)
}

// woken drains the queue: the Applications woken since the last call, each as often as queued.
func (f *hookFixture) woken() []string {
	var out []string
	for f.queue.Len() > 0 {
		r, _ := f.queue.Get()
		f.queue.Done(r)
		f.queue.Forget(r)
		out = append(out, r.String())
	}
	slices.Sort(out)
	return out
}

func (f *hookFixture) forgets(repo string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.forgotten[repo]
}

func push(repo string) string {
	return fmt.Sprintf(`{"ref":"refs/heads/main","repository":{"clone_url":%q}}`, repo)
}

func hmacHex(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

// post sends body with headers (name, value pairs) and returns the code and answer.
func post(h http.Handler, body string, headers ...string) (int, string) {
	r := httptest.NewRequest(http.MethodPost, WebhookPath, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec.Code, rec.Body.String()
}

// Anyone who can reach /hooks/git could wake a Team's Applications (and make each list its
// repository's refs) by naming its repository. A Team with a webhook secret is woken only by a
// push signed with it, in GitHub's, Gitea's, Forgejo's or GitLab's scheme: a wrong signature,
// one made with another Team's secret, or a malformed one is refused with 401, wakes nothing,
// and the answer never echoes the request.
func TestWebhookRefusesABadSignature(t *testing.T) {
	body := push(webRepo)
	objs := append(append(team("shop", "shop-secret"), team("pay", "pay-secret")...), app("shop", "web", webRepo), app("pay", "api", payRepo))
	for _, tc := range []struct {
		name    string
		headers []string
		code    int
		woken   []string
	}{
		{"GitHub, the shop's secret", []string{"X-Hub-Signature-256", "sha256=" + hmacHex("shop-secret", body)}, http.StatusAccepted, []string{"shop/web"}},
		{"Gitea, the shop's secret", []string{"X-Gitea-Signature", hmacHex("shop-secret", body)}, http.StatusAccepted, []string{"shop/web"}},
		{"Forgejo, the shop's secret", []string{"X-Forgejo-Signature", hmacHex("shop-secret", body)}, http.StatusAccepted, []string{"shop/web"}},
		{"GitLab, the shop's secret", []string{"X-Gitlab-Token", "shop-secret"}, http.StatusAccepted, []string{"shop/web"}},
		{"GitHub, a wrong secret", []string{"X-Hub-Signature-256", "sha256=" + hmacHex("guess", body)}, http.StatusUnauthorized, nil},
		{"GitHub, another team's secret", []string{"X-Hub-Signature-256", "sha256=" + hmacHex("pay-secret", body)}, http.StatusUnauthorized, nil},
		{"GitHub, the shop's secret over another body", []string{"X-Hub-Signature-256", "sha256=" + hmacHex("shop-secret", push(payRepo))}, http.StatusUnauthorized, nil},
		{"GitHub, no sha256= prefix", []string{"X-Hub-Signature-256", hmacHex("shop-secret", body)}, http.StatusUnauthorized, nil},
		{"Gitea, not hex", []string{"X-Gitea-Signature", "zz" + body}, http.StatusUnauthorized, nil},
		{"GitLab, a wrong token", []string{"X-Gitlab-Token", "shop-secre"}, http.StatusUnauthorized, nil},
		{"GitLab, another team's token", []string{"X-Gitlab-Token", "pay-secret"}, http.StatusUnauthorized, nil},
		{"unsigned", nil, http.StatusUnauthorized, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newHookFixture(t, objs...)
			code, answer := post(f.handler(), body, tc.headers...)
			if code != tc.code {
				t.Errorf("answered %d %q, want %d", code, answer, tc.code)
			}
			if d := cmp.Diff(tc.woken, f.woken()); d != "" {
				t.Errorf("woken (-want +got):\n%s", d)
			}
			if code == http.StatusUnauthorized && (strings.Contains(answer, "shop") || strings.Contains(answer, "refs/heads")) {
				t.Errorf("a refusal echoes the request: %q", answer)
			}
		})
	}
}

// A Team that names a webhook Secret which is missing, or has no key secret, asked for signed
// pushes: nothing verifies, so nothing wakes its Applications (they still poll).
func TestWebhookRefusesPushesForATeamWhoseSecretIsMissing(t *testing.T) {
	body := push(webRepo)
	missing := &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: tenancyv1alpha1.TeamName},
		Spec: tenancyv1alpha1.TeamSpec{Webhook: &tenancyv1alpha1.TeamWebhook{SecretRef: &tenancyv1alpha1.SecretReference{Name: "git-webhook"}}}}
	empty := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "git-webhook"}, Data: map[string][]byte{"token": []byte("x")}}
	for name, objs := range map[string][]client.Object{
		"no Secret":     {missing, app("shop", "web", webRepo)},
		"no key secret": {missing, empty, app("shop", "web", webRepo)},
	} {
		for _, headers := range [][]string{nil, {"X-Hub-Signature-256", "sha256=" + hmacHex("", body)}, {"X-Gitlab-Token", "x"}} {
			f := newHookFixture(t, objs...)
			if code, answer := post(f.handler(), body, headers...); code != http.StatusUnauthorized {
				t.Errorf("%s, %v: answered %d %q, want 401", name, headers, code, answer)
			}
			if got := f.woken(); len(got) != 0 {
				t.Errorf("%s, %v: woke %v", name, headers, got)
			}
		}
	}
}

// A Team without a webhook secret is woken by unsigned pushes, as before; with
// --git-webhook-require-signature no unsigned push wakes anything, and a signed one wakes only
// the Applications of the Team whose secret it verifies with.
func TestWebhookRequireSignatureRefusesUnsignedPushes(t *testing.T) {
	objs := append(append(team("shop", "shop-secret"), team("open", "")...), app("shop", "web", webRepo), app("open", "web", webRepo))
	body := push(webRepo)

	f := newHookFixture(t, objs...)
	if code, answer := post(f.handler(), body); code != http.StatusAccepted || !strings.Contains(answer, `"applications":1`) {
		t.Errorf("unsigned, signatures not required: %d %q, want 202 waking open/web", code, answer)
	}
	if d := cmp.Diff([]string{"open/web"}, f.woken()); d != "" {
		t.Errorf("unsigned push woke (-want +got):\n%s", d)
	}
	if code, _ := post(f.handler(), body, "X-Gitlab-Token", "shop-secret"); code != http.StatusAccepted {
		t.Errorf("signed, signatures not required: %d, want 202", code)
	}
	if d := cmp.Diff([]string{"open/web", "shop/web"}, f.woken()); d != "" {
		t.Errorf("a push signed for the shop woke (-want +got):\n%s", d)
	}

	f = newHookFixture(t, objs...)
	h := f.handler(RequireSignature(true))
	if code, _ := post(h, body); code != http.StatusUnauthorized {
		t.Errorf("unsigned, signatures required: %d, want 401", code)
	}
	if code, _ := post(h, "", "X-Forgejo-Signature", hmacHex("shop-secret", "")); code != http.StatusBadRequest {
		t.Errorf("signed, naming no repository: %d, want 400", code)
	}
	if got := f.woken(); len(got) != 0 {
		t.Errorf("woke %v", got)
	}
	if code, _ := post(h, body, "X-Hub-Signature-256", "sha256="+hmacHex("shop-secret", body)); code != http.StatusAccepted {
		t.Errorf("signed, signatures required: %d, want 202", code)
	}
	if d := cmp.Diff([]string{"shop/web"}, f.woken()); d != "" {
		t.Errorf("with signatures required a push signed for the shop woke (-want +got):\n%s", d)
	}
}

// A flood of pushes for one repository (a loop in a CI job, or anyone who can post) made every
// Application of it list the repository's refs once per push. Now the first push re-lists at
// once, the others within relistWindow are carried out once as the window ends, and another
// repository's pushes are not held back.
func TestWebhookFloodCostsOneFetchPerRepository(t *testing.T) {
	f := newHookFixture(t, append(team("shop", ""), app("shop", "web", webRepo), app("shop", "web-canary", webRepo), app("shop", "pay", payRepo))...)
	h := f.handler()
	for i := range 200 {
		if code, answer := post(h, push(webRepo)); code != http.StatusAccepted {
			t.Fatalf("push %d: %d %q", i, code, answer)
		}
		f.clock.Step(10 * time.Millisecond)
	}
	if n := f.forgets(webRepo); n != 1 {
		t.Errorf("200 pushes within %s forced %d listings of %s, want 1", relistWindow, n, webRepo)
	}
	if d := cmp.Diff([]string{"shop/web", "shop/web-canary"}, f.woken()); d != "" {
		t.Errorf("queued (-want +got):\n%s", d)
	}
	if code, _ := post(h, push(payRepo)); code != http.StatusAccepted || f.forgets(payRepo) != 1 {
		t.Errorf("a push for another repository: %d, %d listings, want 202 and one at once", code, f.forgets(payRepo))
	}
	if d := cmp.Diff([]string{"shop/pay"}, f.woken()); d != "" {
		t.Errorf("queued (-want +got):\n%s", d)
	}

	// The window ends: the pushes it held back list the refs once more, so the newest is seen.
	f.clock.Step(relistWindow)
	if n := f.forgets(webRepo); n != 2 {
		t.Errorf("at the window's end: %d listings, want 2", n)
	}
	if d := cmp.Diff([]string{"shop/web", "shop/web-canary"}, f.woken()); d != "" {
		t.Errorf("queued at the window's end (-want +got):\n%s", d)
	}
	// Nothing more came: nothing more is listed.
	f.clock.Step(10 * relistWindow)
	if n := f.forgets(webRepo); n != 2 || len(f.woken()) != 0 {
		t.Errorf("a quiet window: %d listings, want still 2", n)
	}
	// A push after a quiet window is carried out at once.
	post(h, push(webRepo))
	if n := f.forgets(webRepo); n != 3 {
		t.Errorf("a push after a quiet window: %d listings, want 3", n)
	}
}

// A signature covers the body, not the query: a replayed signed push cannot be pointed at
// another repository of the team with ?repoURL=, and a body over the limit is refused as too
// large (413), never read in part and taken for a bad signature.
func TestWebhookSignedPushNamesItsRepositoryInTheBodyOnly(t *testing.T) {
	body := push(webRepo)
	f := newHookFixture(t, append(team("shop", "shop-secret"), app("shop", "web", webRepo), app("shop", "pay", payRepo))...)
	r := httptest.NewRequest(http.MethodPost, WebhookPath+"?repoURL="+payRepo, strings.NewReader(body))
	r.Header.Set("X-Hub-Signature-256", "sha256="+hmacHex("shop-secret", body))
	rec := httptest.NewRecorder()
	f.handler().ServeHTTP(rec, r)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("answered %d %q, want 202", rec.Code, rec.Body.String())
	}
	if d := cmp.Diff([]string{"shop/web"}, f.woken()); d != "" {
		t.Errorf("woken (-want +got):\n%s", d)
	}

	big := `{"repository":{"clone_url":"` + webRepo + `"},"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	if code, answer := post(f.handler(), big, "X-Hub-Signature-256", "sha256="+hmacHex("shop-secret", big)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a push over 1 MiB answered %d %q, want 413", code, answer)
	}
}
