package application

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
)

// WebhookPath is where git servers post push events; it is served beside /metrics (so with the
// same authentication when metrics are served beyond loopback).
const WebhookPath = "/hooks/git"

// relistWindow is how often a push may force a repository's refs to be listed anew: a flood of
// pushes for one repository costs one listing (and fetch) per window, the first at once and,
// when more pushes came within the window, one more as it ends, so the newest push is seen.
const relistWindow = 5 * time.Second

// Fixed answers of a refused push: nothing of the request is echoed.
const (
	msgBadSignature      = "the push's signature verifies with no webhook secret of a Team whose Applications use the repository"
	msgSignatureRequired = "unsigned push refused: sign it with the Team's webhook secret (spec.webhook.secretRef)"
)

// pushEvent holds the repository URLs of GitHub, Gitea, Forgejo and GitLab push payloads.
type pushEvent struct {
	Repository struct {
		CloneURL  string `json:"clone_url"`
		SSHURL    string `json:"ssh_url"`
		HTMLURL   string `json:"html_url"`
		GitHTTP   string `json:"git_http_url"`
		GitSSH    string `json:"git_ssh_url"`
		URL       string `json:"url"`
		Homepage  string `json:"homepage"`
		FullName  string `json:"full_name"`
		CloneHTTP string `json:"http_url"`
	} `json:"repository"`
}

// WebhookOption changes how the push webhook authenticates pushes.
type WebhookOption func(*webhook)

// RequireSignature refuses unsigned pushes everywhere, also for the Applications of Teams that
// name no webhook secret (--git-webhook-require-signature).
func RequireSignature(on bool) WebhookOption {
	return func(w *webhook) { w.requireSignature = on }
}

// webhook is the state of one push webhook handler: when each repository was last re-listed.
type webhook struct {
	c                *Controller
	requireSignature bool
	clock            clock.WithDelayedExecution
	forget           func(named func(repoURL string) bool) // the Fetcher's Forget; a counter in tests

	mu    sync.Mutex
	repos map[string]*relist // by normalized repository URL
}

// relist is one repository's forced re-listing: when it last happened, and the wakes of pushes
// that came within the window since, which the window's end carries out.
type relist struct {
	at      time.Time
	pending map[reconcile.Request]struct{}
	armed   bool // a timer carries out pending at at+relistWindow
}

// Webhook fetches at once the Applications whose repoURL a push names, in the body (a GitHub,
// Gitea, Forgejo or GitLab push event) or as ?repoURL=. The request carries no instructions: it
// only moves a poll forward.
//
// A push wakes an Application when its Team names no webhook secret (unless RequireSignature)
// or when the push's signature verifies with that Team's secret: X-Hub-Signature-256
// (sha256=HEX), X-Gitea-Signature or X-Forgejo-Signature (HEX), each the HMAC-SHA256 of the
// body, or X-Gitlab-Token (the secret itself). It answers 202 with the number of Applications
// woken; 401 when a signature was sent that verifies with no Team's secret among the
// Applications naming the repository (nothing is woken then), or when no signature was sent
// and one is required (RequireSignature, or every such Team names a secret).
func (c *Controller) Webhook(opts ...WebhookOption) http.Handler {
	w := &webhook{c: c, clock: clock.RealClock{}, repos: map[string]*relist{}}
	if c.Fetcher != nil {
		w.forget = c.Fetcher.Forget
	}
	for _, o := range opts {
		o(w)
	}
	return w
}

// maxPushBytes bounds what a push event may weigh; GitHub caps its payloads at 25 MiB but a
// push of a few commits is a few KiB.
const maxPushBytes = 1 << 20

func (wh *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST a push event, or POST ?repoURL=URL", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPushBytes+1))
	if err != nil {
		http.Error(w, "reading the body failed", http.StatusBadRequest)
		return
	}
	if len(body) > maxPushBytes {
		// Cut short, its signature could never verify: say so rather than "bad signature".
		http.Error(w, "a push event over 1 MiB is not read: configure the hook to send push events only", http.StatusRequestEntityTooLarge)
		return
	}
	sigs := signaturesOf(r.Header)
	if !sigs.sent && wh.requireSignature {
		http.Error(w, msgSignatureRequired, http.StatusUnauthorized)
		return
	}
	urls := map[string]bool{}
	// The query is outside what a signature covers: a signed push names its repository in the
	// body only, so a replayed body cannot be pointed at another repository of the team.
	if u := r.URL.Query().Get("repoURL"); u != "" && !sigs.sent {
		urls[normalize(u)] = true
	}
	if len(body) > 0 {
		var ev pushEvent
		if err := json.Unmarshal(body, &ev); err == nil {
			rp := ev.Repository
			for _, u := range []string{rp.CloneURL, rp.SSHURL, rp.HTMLURL, rp.GitHTTP, rp.GitSSH, rp.URL, rp.Homepage, rp.CloneHTTP} {
				if u != "" {
					urls[normalize(u)] = true
				}
			}
		}
	}
	if len(urls) == 0 {
		http.Error(w, "no repository named: send a push event with repository.clone_url, or ?repoURL=URL", http.StatusBadRequest)
		return
	}
	var list appsv1alpha1.ApplicationList
	if err := wh.c.Client.List(r.Context(), &list); err != nil {
		http.Error(w, "listing Applications: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	teams := map[string]teamKey{} // by namespace
	anyVerified, needSignature := false, false
	wake := map[string][]reconcile.Request{} // by normalized repository URL
	n := 0
	for _, a := range list.Items {
		g := a.Spec.Source.Git
		if g == nil || !urls[normalize(g.RepoURL)] {
			continue
		}
		k, ok := teams[a.Namespace]
		if !ok {
			if k, err = wh.teamKey(r.Context(), a.Namespace); err != nil {
				// Not verified yet: the answer names nothing of the control plane.
				ctrl.LoggerFrom(r.Context()).Error(err, "reading a Team's webhook secret", "team", a.Namespace)
				http.Error(w, "reading the Teams' webhook secrets failed: try again", http.StatusServiceUnavailable)
				return
			}
			k.verified = k.required && sigs.verify(body, k.secret)
			anyVerified = anyVerified || k.verified
			teams[a.Namespace] = k
		}
		switch {
		case k.verified:
		case k.required || wh.requireSignature:
			needSignature = true
			continue
		}
		repo := normalize(g.RepoURL)
		wake[repo] = append(wake[repo], reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&a)})
		n++
	}
	if sigs.sent && !anyVerified {
		http.Error(w, msgBadSignature, http.StatusUnauthorized)
		return
	}
	if !sigs.sent && n == 0 && needSignature {
		http.Error(w, msgSignatureRequired, http.StatusUnauthorized)
		return
	}
	for repo, reqs := range wake {
		wh.wake(repo, reqs)
	}
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(map[string]int{"applications": n})
}

// teamKey is what a namespace's Team asks of a push: nothing (required false), or a signature
// by secret (nil while the Secret or its key is missing or empty: then nothing verifies); and
// whether the push at hand verified with it.
type teamKey struct {
	required bool
	secret   []byte
	verified bool
}

// teamKey reads the webhook secret of a namespace's Team through the manager's cached client.
// A namespace without a Team asks nothing: its Applications stall anyway.
func (wh *webhook) teamKey(ctx context.Context, namespace string) (teamKey, error) {
	team := &tenancyv1alpha1.Team{}
	if err := wh.c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: tenancyv1alpha1.TeamName}, team); err != nil {
		return teamKey{}, client.IgnoreNotFound(err)
	}
	if team.Spec.Webhook == nil || team.Spec.Webhook.SecretRef == nil {
		return teamKey{}, nil
	}
	name := team.Spec.Webhook.SecretRef.Name
	s := &corev1.Secret{}
	if err := wh.c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return teamKey{}, err
		}
		// Fail closed: the Team asked for signed pushes, so none of its Applications wakes.
		ctrl.LoggerFrom(ctx).V(1).Info("webhook Secret of a Team is missing: its Applications wake only by polling", "team", namespace, "secret", name)
		return teamKey{required: true}, nil
	}
	key := s.Data[tenancyv1alpha1.WebhookSecretKey]
	if len(key) == 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("webhook Secret of a Team has no key secret: its Applications wake only by polling", "team", namespace, "secret", name)
		return teamKey{required: true}, nil
	}
	return teamKey{required: true, secret: key}, nil
}

// signatures are what a push says it was signed with.
type signatures struct {
	sent   bool
	hmacs  [][]byte // HMAC-SHA256 of the body: GitHub, Gitea, Forgejo
	tokens []string // the secret itself: GitLab
}

func signaturesOf(h http.Header) signatures {
	var s signatures
	if v := h.Get("X-Hub-Signature-256"); v != "" {
		s.sent = true
		if hexsum, ok := strings.CutPrefix(v, "sha256="); ok {
			if sum, err := hex.DecodeString(hexsum); err == nil {
				s.hmacs = append(s.hmacs, sum)
			}
		}
	}
	for _, name := range []string{"X-Gitea-Signature", "X-Forgejo-Signature"} {
		if v := h.Get(name); v != "" {
			s.sent = true
			if sum, err := hex.DecodeString(v); err == nil {
				s.hmacs = append(s.hmacs, sum)
			}
		}
	}
	if v := h.Get("X-Gitlab-Token"); v != "" {
		s.sent = true
		s.tokens = append(s.tokens, v)
	}
	return s
}

// verify says whether any signature was made with secret; an empty secret verifies nothing.
func (s signatures) verify(body, secret []byte) bool {
	if len(secret) == 0 {
		return false
	}
	if len(s.hmacs) > 0 {
		m := hmac.New(sha256.New, secret)
		m.Write(body)
		want := m.Sum(nil)
		for _, got := range s.hmacs {
			if hmac.Equal(got, want) {
				return true
			}
		}
	}
	// Compare digests, so the time taken says nothing of the secret, not even its length.
	want := sha256.Sum256(secret)
	for _, t := range s.tokens {
		got := sha256.Sum256([]byte(t))
		if hmac.Equal(got[:], want[:]) {
			return true
		}
	}
	return false
}

// wake queues a repository's Applications, forcing its refs to be listed anew at most once per
// relistWindow: a push within the window after a re-list is carried out as the window ends.
func (wh *webhook) wake(repo string, reqs []reconcile.Request) {
	now := wh.clock.Now()
	wh.mu.Lock()
	r := wh.repos[repo]
	if r == nil || (!r.armed && now.Sub(r.at) >= relistWindow) {
		for u, old := range wh.repos { // forget what no window holds any more
			if !old.armed && now.Sub(old.at) >= relistWindow {
				delete(wh.repos, u)
			}
		}
		wh.repos[repo] = &relist{at: now}
		wh.mu.Unlock()
		wh.relist(repo, reqs)
		return
	}
	if r.pending == nil {
		r.pending = map[reconcile.Request]struct{}{}
	}
	for _, q := range reqs {
		r.pending[q] = struct{}{}
	}
	arm := !r.armed
	r.armed = true
	end := r.at.Add(relistWindow)
	wh.mu.Unlock()
	if arm {
		// The callback must not call the clock: a fake clock runs it holding its lock.
		wh.clock.AfterFunc(end.Sub(now), func() { wh.windowEnds(repo, r, end) })
	}
}

// windowEnds carries out the pushes a window held back, and opens the next window.
func (wh *webhook) windowEnds(repo string, r *relist, end time.Time) {
	wh.mu.Lock()
	reqs := make([]reconcile.Request, 0, len(r.pending))
	for q := range r.pending {
		reqs = append(reqs, q)
	}
	r.pending, r.armed, r.at = nil, false, end
	wh.mu.Unlock()
	wh.relist(repo, reqs)
}

// relist drops the repository's shared refs listing and queues its Applications, so each lists
// the refs anew when it reconciles (the queue holds each Application once).
func (wh *webhook) relist(repo string, reqs []reconcile.Request) {
	if wh.forget != nil {
		wh.forget(func(u string) bool { return normalize(u) == repo })
	}
	for _, q := range reqs {
		wh.c.Hooks.Add(q)
	}
}

// normalize makes https://host/x/y.git, https://host/x/y and https://host/x/y/ one repository.
func normalize(u string) string {
	u = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(u), "/"), ".git")
	return strings.ToLower(u)
}
