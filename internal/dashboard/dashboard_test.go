package dashboard

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func newTestServer(t *testing.T) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(Options{InventoryURL: "https://inventory.invalid", ControlPlane: &rest.Config{Host: "https://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

// addSession logs a user in without a control plane, as a successful login would.
func addSession(s *Server) (id, csrf string) {
	id, csrf = "session-id", "csrf-token"
	s.sessions[id] = &session{user: "carol", csrf: csrf, cfg: &rest.Config{Host: "https://127.0.0.1:1", BearerToken: "t"}, expires: time.Now().Add(time.Hour)}
	return id, csrf
}

func TestPagesCarryStrictSecurityHeaders(t *testing.T) {
	_, ts := newTestServer(t)
	for _, path := range []string{"/", "/app.js", "/api/session"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
		for k, v := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
			if resp.Header.Get(k) != v {
				t.Errorf("%s: %s = %q, want %q", path, k, resp.Header.Get(k), v)
			}
		}
	}
}

func TestAssetsAreEmbedded(t *testing.T) {
	_, ts := newTestServer(t)
	resp, err := http.Get(ts.URL + "/app.js")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
		t.Fatalf("app.js: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
}

func TestReadsNeedASession(t *testing.T) {
	_, ts := newTestServer(t)
	resp, err := http.Get(ts.URL + "/api/applications")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no session: %s, want 401", resp.Status)
	}
}

func TestActionsNeedTheSessionsCSRFToken(t *testing.T) {
	s, ts := newTestServer(t)
	id, csrf := addSession(s)
	post := func(token, origin string) int {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/releases/shop/web-r2/promote", nil)
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: id})
		if token != "" {
			req.Header.Set("X-CSRF-Token", token)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("", ""); code != http.StatusForbidden {
		t.Errorf("no CSRF token: %d, want 403", code)
	}
	if code := post("wrong", ""); code != http.StatusForbidden {
		t.Errorf("wrong CSRF token: %d, want 403", code)
	}
	if code := post(csrf, "https://evil.example"); code != http.StatusForbidden {
		t.Errorf("right token from another origin: %d, want 403", code)
	}
	// With the right token the request reaches the control plane (none here: 503, not 403).
	if code := post(csrf, ts.URL); code == http.StatusForbidden || code == http.StatusUnauthorized {
		t.Errorf("right token, same origin: %d, want it past the CSRF check", code)
	}
}

func TestLoginTakesJSONFromTheSameOriginOnly(t *testing.T) {
	_, ts := newTestServer(t)
	form, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/login", strings.NewReader("token=x"))
	form.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	cross, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/login", strings.NewReader(`{"token":"x"}`))
	cross.Header.Set("Content-Type", "application/json")
	cross.Header.Set("Origin", "https://evil.example")
	empty, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/login", strings.NewReader(`{"token":" "}`))
	empty.Header.Set("Content-Type", "application/json")
	for name, c := range map[string]struct {
		req  *http.Request
		want int
	}{"form post": {form, http.StatusForbidden}, "other origin": {cross, http.StatusForbidden}, "empty token": {empty, http.StatusBadRequest}} {
		resp, err := http.DefaultClient.Do(c.req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %s, want %d", name, resp.Status, c.want)
		}
	}
}

func TestLocalLoginNeedsTheKey(t *testing.T) {
	s, err := New(Options{InventoryURL: "https://inventory.invalid", ControlPlane: &rest.Config{Host: "https://127.0.0.1:1"},
		Local: &rest.Config{Host: "https://127.0.0.1:1"}, LocalKey: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/login?key=guess")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong key: %s, want 401", resp.Status)
	}
}

func TestHandlerTransportStreams(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: ready\n\n"))
		w.(http.Flusher).Flush()
		<-release // the handler is still running when the reader gets the first event
		_, _ = w.Write([]byte("event: changes\n\n"))
	})
	c := &http.Client{Transport: HandlerTransport(h)}
	resp, err := c.Get("http://inventory/api/v1/changes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("header not carried: %v", resp.Header)
	}
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	if err != nil || line != "event: ready\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(release)
	_, _ = r.ReadString('\n')
	line, _ = r.ReadString('\n')
	if line != "event: changes\n" {
		t.Fatalf("second event %q", line)
	}
}

func TestSessionsAreBounded(t *testing.T) {
	s, ts := newTestServer(t)
	for i := range maxSessions {
		s.sessions[fmt.Sprint("login-", i)] = &session{expires: time.Now().Add(time.Duration(i+1) * time.Minute)}
	}
	req := httptest.NewRequest(http.MethodPost, ts.URL+"/api/login", nil)
	s.newSession(httptest.NewRecorder(), req, &rest.Config{}, "carol", nil)
	if len(s.sessions) != maxSessions {
		t.Errorf("%d sessions kept, want at most %d", len(s.sessions), maxSessions)
	}
	if _, ok := s.sessions["login-0"]; ok {
		t.Error("the oldest login goes first")
	}
}
