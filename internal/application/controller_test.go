package application

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
)

func TestRepositoryAllowedByTeamGlobs(t *testing.T) {
	team := &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: "shop"},
		Spec: tenancyv1alpha1.TeamSpec{Repositories: []string{"https://git.example.com/shop/*", "ssh://git@git.example.com/platform/base.git"}}}
	for url, want := range map[string]bool{
		"https://git.example.com/shop/web.git":        true,
		"https://git.example.com/shop/nested/web.git": false, // * stays within one segment
		"https://git.example.com/other/web.git":       false,
		"ssh://git@git.example.com/platform/base.git": true,
		"https://git.example.com/shop":                false,
		"https://evil.example.com/shop/web.git":       false,
	} {
		if got := repositoryAllowed(team, url); got != want {
			t.Errorf("%s: allowed %v, want %v", url, got, want)
		}
	}
	if repositoryAllowed(&tenancyv1alpha1.Team{}, "https://git.example.com/shop/web.git") {
		t.Error("a Team that lists no repositories allows none")
	}
}

// team-b's glob matched the raw text of team-b/..%2fteam-a%2fapp.git, and a server that
// decodes it serves team-a's repository: no spelling that leaves the glob's directory matches.
func TestEncodedDotDotInRepoURLIsNotAllowedByTeamGlob(t *testing.T) {
	team := &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b"},
		Spec: tenancyv1alpha1.TeamSpec{Repositories: []string{"https://git.example.com/team-b/*", "git@Git.Example.com:team-b/*"}}}
	for url, want := range map[string]bool{
		"https://git.example.com/team-b/..%2fteam-a%2fapp.git": false,
		"https://git.example.com/team-b/%2e%2e/team-a":         false,
		"https://git.example.com/team-b/..":                    false,
		"https://git.example.com/team-b/..\\team-a":            false,
		"https://git.example.com/team-b/app.git?../team-a":     false,
		"https://user:pw@git.example.com/team-b/app.git":       false,
		"git@git.example.com:team-b/../team-a/app.git":         false,
		// One repository, however its scheme and host are written.
		"HTTPS://GIT.example.com:443/team-b/app.git/": true,
		"git@GIT.EXAMPLE.COM:team-b/app.git":          true,
	} {
		if got := repositoryAllowed(team, url); got != want {
			t.Errorf("%s: allowed %v, want %v", url, got, want)
		}
	}
}

func TestWebhookRefusesWhatNamesNoRepository(t *testing.T) {
	c := &Controller{}
	for _, tc := range []struct {
		method, body string
		code         int
	}{
		{http.MethodGet, "", http.StatusMethodNotAllowed},
		{http.MethodPost, "", http.StatusBadRequest},
		{http.MethodPost, `{"ref":"refs/heads/main"}`, http.StatusBadRequest},
	} {
		rec := httptest.NewRecorder()
		c.Webhook().ServeHTTP(rec, httptest.NewRequest(tc.method, WebhookPath, strings.NewReader(tc.body)))
		if rec.Code != tc.code {
			t.Errorf("%s %q: %d, want %d (%s)", tc.method, tc.body, rec.Code, tc.code, rec.Body)
		}
	}
}

func TestNormalizeMakesOneRepositoryOfItsSpellings(t *testing.T) {
	want := normalize("https://git.example.com/shop/web")
	for _, u := range []string{"https://git.example.com/shop/web.git", "https://git.example.com/shop/web/", " HTTPS://git.example.com/shop/web.git "} {
		if normalize(u) != want {
			t.Errorf("%q normalizes to %q, want %q", u, normalize(u), want)
		}
	}
}

func TestApplicationsNeverActAsSystemMasters(t *testing.T) {
	team := &tenancyv1alpha1.Team{Spec: tenancyv1alpha1.TeamSpec{Contributors: []string{"shop-devs", "system:masters"}}}
	got := impersonatedGroups(team)
	if len(got) != 2 || got[0] != "shop-devs" || got[1] != "system:authenticated" {
		t.Errorf("impersonated groups %v, want [shop-devs system:authenticated]", got)
	}
}
