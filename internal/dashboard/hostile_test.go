package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// steerer records the actions a dashboard carried out.
type steerer struct {
	mu   sync.Mutex
	done []string
}

func (s *steerer) steer(_ context.Context, _ client.Client, namespace, name, verb string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = append(s.done, namespace+"/"+name+"/"+verb)
	return "done", nil
}

// readyClients gives a session its clients as a login would, without a control plane: typed
// answers SelfSubjectAccessReviews, inventory carries the inventory API's requests.
func readyClients(ss *session, typed *k8sfake.Clientset, inventory http.RoundTripper) {
	ss.once.Do(func() {
		ss.typed = typed
		ss.inventory = &http.Client{Transport: inventory}
		ss.stream = &http.Client{Transport: inventory}
	})
}

// A user who may steer releases in team-a only cannot steer another namespace's release through
// the dashboard, however the namespace is spelt in the path: the control plane is asked about
// that namespace, and nothing is carried out.
func TestActionsInANamespaceTheUserMayNotSteerAreRefused(t *testing.T) {
	s, ts := newTestServer(t)
	st := &steerer{}
	s.opts.Steer = st.steer
	typed := k8sfake.NewClientset()
	typed.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		allowed := r.Spec.ResourceAttributes != nil && r.Spec.ResourceAttributes.Namespace == "team-a"
		return true, &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: allowed}}, nil
	})
	ss := &session{user: "alice", csrf: "csrf-token", cfg: &rest.Config{Host: "https://127.0.0.1:1", BearerToken: "t"}, expires: time.Now().Add(time.Hour)}
	readyClients(ss, typed, http.DefaultTransport)
	s.sessions["alice-session"] = ss
	post := func(path string) int {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+path, nil)
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: "alice-session"})
		req.Header.Set("X-CSRF-Token", "csrf-token")
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{
		"/api/releases/team-b/web-deployment-r2/promote",
		"/api/releases/team-a%2F..%2Fteam-b/web-deployment-r2/promote",
		"/api/releases/team-b/web-deployment-r2/abort",
	} {
		if code := post(path); code == http.StatusOK {
			t.Errorf("%s: %d, want a refusal", path, code)
		}
	}
	if len(st.done) != 0 {
		t.Fatalf("carried out %v in a namespace the user may not steer", st.done)
	}
	if code := post("/api/releases/team-a/web-deployment-r2/promote"); code != http.StatusOK {
		t.Fatalf("team-a's own release: %d, want 200", code)
	}
	if len(st.done) != 1 || st.done[0] != "team-a/web-deployment-r2/promote" {
		t.Errorf("carried out %v, want team-a/web-deployment-r2/promote only", st.done)
	}
}

// recorder answers every request with an empty list and remembers where it was sent.
type recorder struct {
	mu   sync.Mutex
	urls []*url.URL
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL)
	r.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"items":[]}`)), Request: req}, nil
}

// The dashboard reads the inventory API on its user's behalf: whatever a page's query says
// (another host, an encoded path, a second scheme), the request goes to the configured
// inventory API, to the route the page names, with the query as data.
func TestReadsGoOnlyToTheInventoryAPI(t *testing.T) {
	s, ts := newTestServer(t)
	rec := &recorder{}
	ss := &session{user: "alice", csrf: "csrf-token", cfg: &rest.Config{Host: "https://127.0.0.1:1", BearerToken: "t"}, expires: time.Now().Add(time.Hour)}
	readyClients(ss, k8sfake.NewClientset(), rec)
	s.sessions["alice-session"] = ss
	want := map[string]string{"/api/applications": "/api/v1/applications", "/api/history": "/api/v1/history", "/api/releases": "/api/v1/releases", "/api/clusters": "/api/v1/clusters"}
	query := "?namespace=team-a&url=http%3A%2F%2F169.254.169.254%2Flatest&next=%2F%2Fevil.example%2F&path=..%2F..%2Fadmin"
	for page := range want {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+page+query, nil)
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: "alice-session"})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", page, resp.Status)
		}
	}
	if len(rec.urls) != len(want) {
		t.Fatalf("%d requests reached the inventory API, want %d", len(rec.urls), len(want))
	}
	seen := map[string]bool{}
	for _, u := range rec.urls {
		if u.Scheme != "https" || u.Host != "inventory.invalid" {
			t.Errorf("a read went to %s://%s, want the inventory API at https://inventory.invalid", u.Scheme, u.Host)
		}
		seen[u.Path] = true
		q := u.Query()
		if q.Get("url") != "http://169.254.169.254/latest" || q.Get("next") != "//evil.example/" || q.Get("path") != "../../admin" {
			t.Errorf("%s: query %q, want the page's parameters passed on as data", u.Path, u.RawQuery)
		}
	}
	for page, path := range want {
		if !seen[path] {
			t.Errorf("%s did not read %s (read %v)", page, path, rec.urls)
		}
	}
}

// A refused login says so in the dashboard's own words: neither the token nor what the
// control plane answered (which may quote it) is echoed to the page.
func TestLoginFailureEchoesNeitherTheTokenNorTheControlPlanesAnswer(t *testing.T) {
	for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		reason := "Unauthorized"
		if code == http.StatusForbidden {
			reason = "Forbidden"
		}
		cp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"token hunter2-token rejected by CONTROL-PLANE-DETAIL","reason":%q,"code":%d}`, reason, code)
		}))
		s, err := New(Options{InventoryURL: "https://inventory.invalid", ControlPlane: &rest.Config{Host: cp.URL}})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(s.Handler())
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/login", strings.NewReader(`{"token":"hunter2-token"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ts.Close()
		cp.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("control plane %d: login answered %s %s, want 401", code, resp.Status, body)
		}
		if strings.Contains(string(body), "hunter2") || strings.Contains(string(body), "CONTROL-PLANE-DETAIL") {
			t.Errorf("control plane %d: the answer echoes the token or the control plane's words: %s", code, body)
		}
		if len(s.sessions) != 0 {
			t.Errorf("control plane %d: a refused login opened a session", code)
		}
	}
}
