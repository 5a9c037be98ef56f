package application

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
)

// WebhookPath is where git servers post push events; it is served beside /metrics (so with the
// same authentication when metrics are served beyond loopback).
const WebhookPath = "/hooks/git"

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

// Webhook fetches at once every Application whose repoURL a push names, in the body (a
// GitHub, Gitea or GitLab push event) or as ?repoURL=. The request carries no instructions:
// it only moves a poll forward, so it answers 202 whether or not an Application matched.
func (c *Controller) Webhook() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST a push event, or POST ?repoURL=URL", http.StatusMethodNotAllowed)
			return
		}
		urls := map[string]bool{}
		if u := r.URL.Query().Get("repoURL"); u != "" {
			urls[normalize(u)] = true
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
			return
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
		if c.Fetcher != nil {
			c.Fetcher.Forget(func(u string) bool { return urls[normalize(u)] })
		}
		var list appsv1alpha1.ApplicationList
		if err := c.Client.List(r.Context(), &list); err != nil {
			http.Error(w, "listing Applications: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		n := 0
		for _, a := range list.Items {
			if g := a.Spec.Source.Git; g != nil && urls[normalize(g.RepoURL)] {
				c.Hooks.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&a)})
				n++
			}
		}
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]int{"applications": n})
	})
}

// normalize makes https://host/x/y.git, https://host/x/y and https://host/x/y/ one repository.
func normalize(u string) string {
	u = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(u), "/"), ".git")
	return strings.ToLower(u)
}
