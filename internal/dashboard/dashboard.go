// Package dashboard serves Flotilla's web dashboard: the fleet matrix, clusters, releases
// live and the history timeline, from assets embedded in the binary (no CDN, no build step).
//
// It holds no rights of its own. A user logs in with a bearer token (checked with a
// SelfSubjectReview), or, for `flotilla dashboard` on a workstation, with a random key made for
// that run (valid until it stops) that stands for the caller's own kubeconfig identity. Every
// read goes to the inventory API and every action to the control plane with that user's
// credentials; whether to show a button
// is a SelfSubjectAccessReview, and the control plane enforces the action again. Live
// updates come from the inventory API's change feed (one informer per kind for all pages):
// a page reads again what changed, never polls.
//
// Sessions live in memory behind an HttpOnly, SameSite=Strict cookie; actions also need the
// session's CSRF token in a header. Every response carries a strict Content Security Policy;
// the page builds its DOM from text nodes only, so user strings are never markup.
//
// It must not read or write with Flotilla's own credentials.
package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

//go:embed static
var assets embed.FS

// SessionCookie names the session cookie.
const SessionCookie = "flotilla_session"

// maxSessions bounds the logins held in memory.
const maxSessions = 10000

// sessionTTL is how long a login lasts.
const sessionTTL = 8 * time.Hour

// readOnlyWhy says why a client-certificate login cannot act.
const readOnlyWhy = "logged in with a client certificate, which lets the dashboard read as you but not act as you (it has no key): log in with a token, or run `flotilla dashboard` with your kubeconfig"

// Verbs are the release actions the dashboard offers.
var Verbs = []string{"promote", "pause", "resume", "abort", "retry"}

// SteerFunc carries out verb on the release namespace/name as the client's user, answering
// what it did or why it would do nothing.
type SteerFunc func(ctx context.Context, c client.Client, namespace, name, verb string) (string, error)

// Options configure a Server.
type Options struct {
	// InventoryURL is the inventory API's base (https://host:port); InventoryTransport, when
	// set, carries the calls instead of a TLS connection (the controller-manager serving both).
	InventoryURL       string
	InventoryTransport http.RoundTripper
	// ControlPlane is the control plane's address and CA, without credentials: a token login
	// adds the user's token to it.
	ControlPlane *rest.Config
	// Local, with LocalKey, lets /login?key=LocalKey log in as Local's identity (the caller's
	// kubeconfig, for `flotilla dashboard` on a workstation).
	Local    *rest.Config
	LocalKey string
	// Steer carries out release actions.
	Steer SteerFunc
	// Prefix is the path the dashboard is served under ("/" or "/dashboard/").
	Prefix string
}

// Server is the dashboard.
type Server struct {
	opts     Options
	mu       sync.Mutex
	sessions map[string]*session
	static   http.Handler
}

type session struct {
	user    string
	groups  []string
	csrf    string
	cfg     *rest.Config // nil for a client-certificate login: it reads, it cannot act
	tls     *tls.ConnectionState
	expires time.Time

	once      sync.Once
	inventory *http.Client
	stream    *http.Client
	kube      client.Client
	typed     kubernetes.Interface
	err       error
}

// New returns a dashboard.
func New(o Options) (*Server, error) {
	if o.InventoryURL == "" && o.InventoryTransport == nil {
		return nil, errors.New("the dashboard needs the inventory API: give its URL")
	}
	if o.ControlPlane == nil {
		return nil, errors.New("the dashboard needs the control plane's address")
	}
	sub, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, err
	}
	return &Server{opts: o, sessions: map[string]*session{}, static: http.FileServerFS(sub)}, nil
}

func (s *Server) prefix() string {
	if s.opts.Prefix == "" {
		return "/"
	}
	return "/" + strings.Trim(s.opts.Prefix, "/") + "/"
}

// Handler serves the dashboard under its prefix.
func (s *Server) Handler() http.Handler {
	if p := s.prefix(); p != "/" {
		return http.StripPrefix(strings.TrimSuffix(p, "/"), s.routes())
	}
	return s.routes()
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/login", s.login)
	mux.HandleFunc("GET /login", s.localLogin)
	mux.HandleFunc("POST /api/login/certificate", s.certificateLogin)
	mux.HandleFunc("POST /api/logout", s.withSession(true, s.logout))
	mux.HandleFunc("GET /api/session", s.withSession(false, s.whoami))
	for _, p := range []string{"applications", "clusters", "history", "releases"} {
		mux.HandleFunc("GET /api/"+p, s.withSession(false, s.proxy("/api/v1/"+p)))
	}
	mux.HandleFunc("GET /api/events", s.withSession(false, s.events))
	mux.HandleFunc("GET /api/permissions", s.withSession(false, s.permissions))
	mux.HandleFunc("POST /api/releases/{namespace}/{name}/{verb}", s.withSession(true, s.act))
	mux.Handle("GET /", s.static)
	return securityHeaders(mux)
}

func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")
		if r.TLS != nil {
			hd.Set("Strict-Transport-Security", "max-age=31536000")
		}
		h.ServeHTTP(w, r)
	})
}

type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func fail(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(apiError{Code: code, Message: fmt.Sprintf(format, args...)})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// sameOrigin refuses requests a browser sent from another site: Origin, when present,
// must name this host.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (s *Server) newSession(w http.ResponseWriter, r *http.Request, cfg *rest.Config, user string, groups []string) *session {
	id := randomString()
	ss := &session{user: user, groups: groups, csrf: randomString(), cfg: cfg, expires: time.Now().Add(sessionTTL)}
	s.mu.Lock()
	var oldest string
	for k, old := range s.sessions { // forget expired logins as new ones come
		if time.Now().After(old.expires) {
			delete(s.sessions, k)
		} else if oldest == "" || old.expires.Before(s.sessions[oldest].expires) {
			oldest = k
		}
	}
	if len(s.sessions) >= maxSessions { // bounded memory: the oldest login goes first
		delete(s.sessions, oldest)
	}
	s.sessions[id] = ss
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: id, Path: s.prefix(), HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, Expires: ss.expires})
	return ss
}

// login takes a bearer token, asks the control plane who it is, and opens a session.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		fail(w, http.StatusForbidden, "log in from the dashboard's own page (JSON from the same origin)")
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil || strings.TrimSpace(body.Token) == "" {
		fail(w, http.StatusBadRequest, "token: give a bearer token the control plane accepts (for example `kubectl create token NAME`)")
		return
	}
	cfg := rest.AnonymousClientConfig(s.opts.ControlPlane)
	cfg.BearerToken = strings.TrimSpace(body.Token)
	user, groups, err := whoIs(r.Context(), cfg)
	if err != nil {
		if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
			fail(w, http.StatusUnauthorized, "the control plane does not accept this token")
			return
		}
		fail(w, http.StatusServiceUnavailable, "asking the control plane who this is: %v", err)
		return
	}
	ss := s.newSession(w, r, cfg, user, groups)
	reply(w, map[string]any{"user": ss.user, "groups": ss.groups, "csrf": ss.csrf})
}

// certificateLogin opens a read-only session for the client certificate the browser presented
// to the controller-manager (verified against the control plane's client CA). The inventory
// API sees the same certificate; actions need a token, since the dashboard holds no key to
// act as the certificate's user.
func (s *Server) certificateLogin(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		fail(w, http.StatusForbidden, "log in from the dashboard's own page")
		return
	}
	if s.opts.InventoryTransport == nil || r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.PeerCertificates) == 0 {
		fail(w, http.StatusUnauthorized, "no client certificate of the control plane's CA came with this request: log in with a token (certificates work on the controller-manager's dashboard, or use `flotilla dashboard` with your kubeconfig)")
		return
	}
	c := r.TLS.PeerCertificates[0]
	state := *r.TLS
	ss := s.newSession(w, r, nil, c.Subject.CommonName, append(slices.Clone(c.Subject.Organization), "system:authenticated"))
	ss.tls = &state
	reply(w, map[string]any{"user": ss.user, "groups": ss.groups, "csrf": ss.csrf, "readOnly": true})
}

// localLogin opens a session as the dashboard's own caller when the run's key matches.
func (s *Server) localLogin(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	if s.opts.Local == nil || s.opts.LocalKey == "" || subtle.ConstantTimeCompare([]byte(key), []byte(s.opts.LocalKey)) != 1 {
		fail(w, http.StatusUnauthorized, "this login link is not valid: use the one `flotilla dashboard` printed, or log in with a token")
		return
	}
	user, groups, err := whoIs(r.Context(), s.opts.Local)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "asking the control plane who this is: %v", err)
		return
	}
	s.newSession(w, r, s.opts.Local, user, groups)
	http.Redirect(w, r, s.prefix(), http.StatusSeeOther)
}

func whoIs(ctx context.Context, cfg *rest.Config) (string, []string, error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", nil, err
	}
	rv, err := kc.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", nil, err
	}
	return rv.Status.UserInfo.Username, rv.Status.UserInfo.Groups, nil
}

type sessionHandler func(w http.ResponseWriter, r *http.Request, ss *session)

// withSession finds the request's session; mutating requests also need its CSRF token.
func (s *Server) withSession(mutating bool, h sessionHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(SessionCookie)
		var ss *session
		if err == nil {
			s.mu.Lock()
			ss = s.sessions[c.Value]
			s.mu.Unlock()
		}
		if ss == nil || time.Now().After(ss.expires) {
			fail(w, http.StatusUnauthorized, "log in first")
			return
		}
		if mutating {
			token := r.Header.Get("X-CSRF-Token")
			if !sameOrigin(r) || subtle.ConstantTimeCompare([]byte(token), []byte(ss.csrf)) != 1 {
				fail(w, http.StatusForbidden, "missing or wrong CSRF token: act from the dashboard's own page")
				return
			}
		}
		if err := ss.clients(s.opts); err != nil {
			fail(w, http.StatusServiceUnavailable, "connecting as %s: %v", ss.user, err)
			return
		}
		h(w, r, ss)
	}
}

// clients builds the user's clients once per session.
func (ss *session) clients(o Options) error {
	ss.once.Do(func() {
		if ss.cfg == nil { // a client certificate: the inventory API reads it from the TLS state
			rt := bearer{tls: ss.tls, next: o.InventoryTransport}
			ss.inventory = &http.Client{Transport: rt, Timeout: 30 * time.Second}
			ss.stream = &http.Client{Transport: rt}
			return
		}
		if o.InventoryTransport != nil {
			rt := bearer{token: ss.cfg.BearerToken, next: o.InventoryTransport}
			ss.inventory = &http.Client{Transport: rt, Timeout: 30 * time.Second}
			ss.stream = &http.Client{Transport: rt}
		} else {
			rt, err := rest.TransportFor(ss.cfg)
			if err != nil {
				ss.err = err
				return
			}
			ss.inventory = &http.Client{Transport: rt, Timeout: 30 * time.Second}
			ss.stream = &http.Client{Transport: rt}
		}
		if ss.kube, ss.err = client.New(ss.cfg, client.Options{Scheme: kube.Scheme}); ss.err != nil {
			return
		}
		ss.typed, ss.err = kubernetes.NewForConfig(ss.cfg)
	})
	return ss.err
}

// bearer adds a session's credentials to in-process inventory calls: its token, or the TLS
// state its client certificate came with.
type bearer struct {
	token string
	tls   *tls.ConnectionState
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	r.TLS = b.tls
	return b.next.RoundTrip(r)
}

func (s *Server) inventoryURL(path string, q url.Values) string {
	base := strings.TrimSuffix(s.opts.InventoryURL, "/")
	if base == "" {
		base = "http://inventory"
	}
	u := base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, _ *session) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		s.mu.Lock()
		delete(s.sessions, c.Value)
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: s.prefix(), MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) whoami(w http.ResponseWriter, _ *http.Request, ss *session) {
	reply(w, map[string]any{"user": ss.user, "groups": ss.groups, "csrf": ss.csrf, "readOnly": ss.cfg == nil})
}

// proxy reads path of the inventory API as the session's user.
func (s *Server) proxy(path string) sessionHandler {
	return func(w http.ResponseWriter, r *http.Request, ss *session) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, s.inventoryURL(path, r.URL.Query()), nil)
		if err != nil {
			fail(w, http.StatusBadRequest, "%v", err)
			return
		}
		resp, err := ss.inventory.Do(req)
		if err != nil {
			fail(w, http.StatusBadGateway, "inventory API: %v", err)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, io.LimitReader(resp.Body, 64<<20))
	}
}

// events relays the inventory API's change feed for the session's user.
func (s *Server) events(w http.ResponseWriter, r *http.Request, ss *session) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, s.inventoryURL("/api/v1/changes", nil), nil)
	if err != nil {
		fail(w, http.StatusInternalServerError, "%v", err)
		return
	}
	resp, err := ss.stream.Do(req)
	if err != nil {
		fail(w, http.StatusBadGateway, "inventory API: %v", err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, io.LimitReader(resp.Body, 1<<20))
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // a feed outlives the server's read timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, werr := w.Write(buf[:n]); werr != nil || rc.Flush() != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// may asks the control plane whether the session's user may patch releases in namespace.
func (ss *session) may(ctx context.Context, namespace string) (bool, error) {
	r, err := ss.typed.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "patch", Group: rolloutv1alpha1.GroupVersion.Group, Resource: "releases", Namespace: namespace}}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}

// permissions says which release actions the user may take in a namespace.
func (s *Server) permissions(w http.ResponseWriter, r *http.Request, ss *session) {
	ns := r.URL.Query().Get("namespace")
	if ns == "" {
		fail(w, http.StatusBadRequest, "namespace: give the namespace of the releases")
		return
	}
	if ss.cfg == nil {
		reply(w, map[string]any{"namespace": ns, "steer": false, "why": readOnlyWhy})
		return
	}
	ok, err := ss.may(r.Context(), ns)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "asking the control plane: %v", err)
		return
	}
	reply(w, map[string]any{"namespace": ns, "steer": ok})
}

// act carries out a release action as the session's user.
func (s *Server) act(w http.ResponseWriter, r *http.Request, ss *session) {
	ns, name, verb := r.PathValue("namespace"), r.PathValue("name"), r.PathValue("verb")
	valid := false
	for _, v := range Verbs {
		valid = valid || v == verb
	}
	if !valid {
		fail(w, http.StatusBadRequest, "unknown action %q: use one of %s", verb, strings.Join(Verbs, ", "))
		return
	}
	if ss.cfg == nil {
		fail(w, http.StatusForbidden, "%s", readOnlyWhy)
		return
	}
	ok, err := ss.may(r.Context(), ns)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "asking the control plane: %v", err)
		return
	}
	if !ok {
		fail(w, http.StatusForbidden, "%s may not %s releases in namespace %s (patch releases.rollout.flotilla.dev there)", ss.user, verb, ns)
		return
	}
	if s.opts.Steer == nil {
		fail(w, http.StatusNotImplemented, "this dashboard cannot act on releases")
		return
	}
	what, err := s.opts.Steer(r.Context(), ss.kube, ns, name, verb)
	switch {
	case apierrors.IsForbidden(err):
		fail(w, http.StatusForbidden, "%v", err)
	case apierrors.IsNotFound(err):
		fail(w, http.StatusNotFound, "%v", err)
	case err != nil:
		fail(w, http.StatusConflict, "%v", err)
	default:
		reply(w, map[string]string{"message": what})
	}
}
