package appsource

import (
	"context"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// Tests of what a hostile tenant may try through an Application's git source: each names
// the attack it refuses.

// globs is a Team's spec.repositories as the application controller checks them.
func globs(patterns ...string) func(string) bool {
	return func(u string) bool {
		for _, p := range patterns {
			if ok, _ := path.Match(NormalizeRepoGlob(p), u); ok {
				return true
			}
		}
		return false
	}
}

// twoTeams serves team-a's and team-b's repositories from one host.
func twoTeams(t *testing.T, front func(w http.ResponseWriter, r *http.Request) bool) (srv *gitHTTP, commitA, commitB string) {
	t.Helper()
	a, b := newTestRepo(t), newTestRepo(t)
	commitA = a.commit("a", map[string]string{"secret.yaml": "team: a\n"})
	commitB = b.commit("b", map[string]string{"web.yaml": "team: b\n"})
	return startGitHTTP(t, map[string]string{"/team-a": a.base, "/team-b": b.base}, front), commitA, commitB
}

func TestGitRedirectToAnotherTeamsRepositoryIsRefused(t *testing.T) {
	var other *gitHTTP // another host, serving team-a too
	toOtherHost := false
	srv, commitA, _ := twoTeams(t, func(w http.ResponseWriter, r *http.Request) bool {
		rest, ok := strings.CutPrefix(r.URL.Path, "/team-b/")
		if !ok {
			return false
		}
		target := "/team-a/" + rest + "?" + r.URL.RawQuery
		if toOtherHost {
			target = other.URL + target
		}
		http.Redirect(w, r, target, http.StatusFound)
		return true
	})
	other, _, _ = twoTeams(t, nil)
	fe := &Fetcher{CacheDir: t.TempDir(), Timeout: 10 * time.Second}
	ctx := context.Background()
	g := Git{RepoURL: srv.URL + "/team-b/app", Revision: "main", Team: "team-b", Allowed: globs(srv.URL + "/team-b/*")}

	_, err := fe.Resolve(ctx, g, nil)
	e := mustPermanent(t, err, FieldRepoURL, "redirected to host")
	if strings.Contains(e.Error(), "team-a") {
		t.Errorf("the refusal names the target's path: %v", e)
	}
	_, err = fe.Checkout(ctx, g, nil, commitA)
	mustPermanent(t, err, FieldRepoURL, "outside the repositories the Team allows")
	g.Revision = commitA // a SHA: no listing first, the fetch itself is redirected
	_, err = fe.Checkout(ctx, g, nil, commitA)
	mustPermanent(t, err, FieldRepoURL, "redirected")
	if n := srv.hitsOf("/team-a"); n != 0 {
		t.Errorf("team-a's repository was asked %d times: a refused hop must not be followed", n)
	}
	mustHoldNoTree(t, fe.CacheDir)

	// Every hop is checked, not redirects refused wholesale: a Team that allows both follows.
	g.Revision = "main"
	g.Allowed = globs(srv.URL+"/team-b/*", srv.URL+"/team-a/*")
	if got, err := fe.Resolve(ctx, g, nil); err != nil || got != commitA {
		t.Fatalf("Resolve with team-a allowed = %q, %v; want %q", got, err, commitA)
	}
	// Another host is refused even when the Team's globs would match anything.
	toOtherHost = true
	g.Allowed = func(string) bool { return true }
	g.Team = "team-c"
	_, err = fe.Resolve(ctx, g, nil)
	mustPermanent(t, err, FieldRepoURL, `redirected to host "127.0.0.1"`)
	if n := other.hitsOf("/team-a"); n != 0 {
		t.Errorf("the other host was asked %d times", n)
	}
}

func TestGitErrorNeverEchoesTheResponseBody(t *testing.T) {
	const marker = "ami-secret-from-169.254.169.254"
	body := strings.Repeat(marker+"\x1b[31m\n", 40000) // ~1.4 MB
	status := 0
	onlyPack := false // answer the refs, fail the pack request
	repo := newTestRepo(t)
	c1 := repo.commit("c1", map[string]string{"a.yaml": "a: 1\n"})
	srv := startGitHTTP(t, map[string]string{"/x": repo.base}, func(w http.ResponseWriter, r *http.Request) bool {
		if onlyPack && strings.HasSuffix(r.URL.Path, "/info/refs") {
			return false
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
		return true
	})
	fe := &Fetcher{CacheDir: t.TempDir(), Timeout: 10 * time.Second}
	g := Git{RepoURL: srv.URL + "/x/app", Revision: "main"}
	for _, onlyPack = range []bool{false, true} {
		for _, status = range []int{401, 403, 404, 418, 500, 502} {
			_, err := fe.Resolve(context.Background(), g, &Auth{Token: "t"})
			if onlyPack {
				if err != nil {
					t.Fatalf("refs are served: %v", err)
				}
				_, err = fe.Checkout(context.Background(), g, &Auth{Token: "t"}, c1)
			}
			if err == nil {
				t.Fatalf("HTTP %d (pack only %v): no error", status, onlyPack)
			}
			msg := err.Error()
			if strings.Contains(msg, "ami-secret") || strings.Contains(msg, "\x1b") || len(msg) > 600 {
				t.Errorf("HTTP %d (pack only %v): the message echoes the body (%d bytes): %.300q", status, onlyPack, len(msg), msg)
			}
			if !strings.Contains(msg, statusText(status)) {
				t.Errorf("HTTP %d: the message should give the status code and reason: %q", status, msg)
			}
		}
	}
}

// A server names refs: what it names reaches a message bounded and without control characters.
func TestServerChosenRefNamesAreBoundedInErrors(t *testing.T) {
	evil := "refs/heads/" + strings.Repeat("\x1b]8;;http://evil\x07", 500)
	refs := []*plumbing.Reference{plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.ReferenceName(evil))}
	_, _, err := pickRef(refs, Git{RepoURL: "https://git.example.com/x"})
	e := mustPermanent(t, err, FieldRevision, "HEAD of https://git.example.com/x points to")
	if msg := e.Error(); strings.ContainsAny(msg, "\x1b\x07") || len(msg) > 500 {
		t.Errorf("message carries the server's text raw (%d bytes): %q", len(msg), msg)
	}
}

func TestEncodedDotDotInRepoURLIsRefused(t *testing.T) {
	for _, tc := range []struct{ url, why string }{
		{"https://git.example.com/team-b/..%2fteam-a%2fapp.git", "percent-escape"},
		{"https://git.example.com/team-b/%2e%2e/team-a/app.git", "percent-escape"},
		{"https://git.example.com/team-b/..%5cteam-a/app.git", "percent-escape"},
		{"https://git.example.com/team-b/%61pp.git", "percent-escape"},
		{"https://git.example.com/team-b/../team-a/app.git", "a .. path segment"},
		{"https://git.example.com/team-b/./app.git", "a . path segment"},
		{"https://git.example.com/team-b/..;/team-a/app.git", "step up"},
		{"https://git.example.com/team-b/app.git;jsessionid=1/../../team-a/app.git", "step up"},
		{"https://git.example.com/team-b/...x/app.git", "step up"},
		{`https://git.example.com/team-b/..\team-a\app.git`, "backslash"},
		{"https://git.example.com/team-b//app.git", "empty path segment"},
		{"https://git.example.com/team-b/app.git?x=../team-a", "query"},
		{"https://git.example.com/team-b/app.git#../../team-a", "fragment"},
		{"https://someone@git.example.com/team-b/app.git", "user name"},
		{"git@git.example.com:team-b/../team-a/app.git", "a .. path segment"},
		{"ssh://git@git.example.com/team-b/%2e%2e/team-a/app.git", "percent-escape"},
		{"https://git.example.com/team-b/\u2025/app.git", "printable ASCII"},
	} {
		_, err := NormalizeRepoURL(tc.url)
		e := mustPermanent(t, err, FieldRepoURL, tc.why)
		if !strings.Contains(e.Error(), "repoURL") {
			t.Errorf("%s: the message should name repoURL: %v", tc.url, e)
		}
		// The glob of team-b never sees it: it is refused before matching and before fetching.
		_, err = (&Fetcher{CacheDir: t.TempDir()}).Resolve(context.Background(), Git{RepoURL: tc.url, Allowed: globs("https://git.example.com/team-b/*")}, nil)
		mustPermanent(t, err, FieldRepoURL, tc.why)
	}

	// Against a server that would resolve the decoded path: nothing reaches it.
	srv, _, _ := twoTeams(t, nil)
	_, err := (&Fetcher{CacheDir: t.TempDir(), Timeout: 10 * time.Second}).Resolve(context.Background(),
		Git{RepoURL: srv.URL + "/team-b/..%2fteam-a%2fapp", Revision: "main", Team: "team-b"}, nil)
	mustPermanent(t, err, FieldRepoURL, "percent-escape")
	if srv.hitsOf("/team-a")+srv.hitsOf("/team-b") != 0 {
		t.Error("a refused URL was fetched")
	}
}

func TestNormalizedRepoURLIsOneSpelling(t *testing.T) {
	for in, want := range map[string]string{
		"HTTPS://Git.Example.COM:443/Team-B/App.git/": "https://git.example.com/Team-B/App.git",
		"http://git.example.com:80/a":                 "http://git.example.com/a",
		"http://git.example.com:8080/a":               "http://git.example.com:8080/a",
		"ssh://git@Git.Example.com:22/org/x.git":      "ssh://git@git.example.com/org/x.git",
		"git@GitHub.com:org/repo.git":                 "git@github.com:org/repo.git",
		"git://git.example.com/a":                     "git://git.example.com/a",
		"https://git.example.com":                     "https://git.example.com",
	} {
		if got, err := NormalizeRepoURL(in); err != nil || got != want {
			t.Errorf("NormalizeRepoURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for glob, url := range map[string]string{
		"HTTPS://GIT.example.com:443/team-b/*": "https://git.example.com/team-b/app",
		"git@GIT.example.com:team-b/*":         "git@git.example.com:team-b/app",
		"ssh://git@GIT.example.com/team-b/*/":  "ssh://git@git.example.com/team-b/app",
	} {
		if !globs(glob)(url) {
			t.Errorf("glob %q should match %q", glob, url)
		}
	}
}

func TestHugeFileInRepositoryHitsTheFileBound(t *testing.T) {
	r := newTestRepo(t)
	r.commit("c1", map[string]string{"apps/web.yaml": "kind: ConfigMap\n"})
	c2 := r.commitZeros("apps/zeros.bin", 64<<20)
	d := startDaemon(t, r.base)
	srv := startGitHTTP(t, map[string]string{"/git": r.base}, nil)
	for _, url := range []string{d.URL + "/app", srv.URL + "/git/app"} {
		fe := &Fetcher{CacheDir: t.TempDir(), Timeout: 20 * time.Second, Bounds: Bounds{MaxFileBytes: 1 << 20}}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := fe.Checkout(context.Background(), Git{RepoURL: url, Revision: "main"}, nil, c2)
		runtime.ReadMemStats(&after)
		e := mustPermanent(t, err, FieldRepoURL, "64.0 MiB, over the bound on one file (1.0 MiB)")
		if !strings.Contains(e.Error(), FlagMaxFileMiB) {
			t.Errorf("the message should name the flag that raises the bound: %v", e)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
			t.Errorf("%s: refusing a 64 MiB file allocated %d MiB: it was inflated", url, alloc>>20)
		}
		mustHoldNoTree(t, fe.CacheDir)
	}
}

// mustHoldNoTree: a refused fetch leaves no tree (nor a temp directory) in the cache.
func mustHoldNoTree(t *testing.T, cache string) {
	t.Helper()
	_ = filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("a refused fetch left %s in the cache", p)
		}
		if err == nil && d.IsDir() && (fullSHA.MatchString(d.Name()) || strings.HasPrefix(d.Name(), ".tmp-")) {
			t.Errorf("a refused fetch left %s in the cache", p)
		}
		return nil
	})
}

func TestFetchBoundsRefuseBigPacksManyObjectsAndBigTrees(t *testing.T) {
	r := newTestRepo(t)
	files := map[string]string{}
	for i := range 30 {
		files["f/"+strings.Repeat("x", i+1)+".txt"] = noise(8 << 10)
	}
	c1 := r.commit("c1", files)
	d := startDaemon(t, r.base)
	srv := startGitHTTP(t, map[string]string{"/git": r.base}, nil)
	for _, tc := range []struct {
		name   string
		bounds Bounds
		want   string
		flag   string
	}{
		{"pack bytes", Bounds{MaxFetchBytes: 64 << 10}, "over the bound on one fetch (64.0 KiB)", FlagMaxFetchMiB},
		{"objects", Bounds{MaxObjects: 10}, "objects, over the bound on objects (10)", FlagMaxObjects},
		{"checkout bytes", Bounds{MaxCheckoutBytes: 100 << 10}, "of files, over the bound on one checkout (100.0 KiB)", FlagMaxCheckoutMiB},
		{"team share", Bounds{TeamCacheBytes: 100 << 10}, "of files, over the team's share of the git cache (100.0 KiB)", FlagTeamCacheMiB},
	} {
		for _, url := range []string{d.URL + "/app", srv.URL + "/git/app"} {
			t.Run(tc.name+" "+url[:4], func(t *testing.T) {
				fe := &Fetcher{CacheDir: t.TempDir(), Timeout: 10 * time.Second, Bounds: tc.bounds}
				_, err := fe.Checkout(context.Background(), Git{RepoURL: url, Revision: "main"}, nil, c1)
				e := mustPermanent(t, err, FieldRepoURL, tc.want)
				if !strings.Contains(e.Error(), tc.flag) {
					t.Errorf("the message should name %s: %v", tc.flag, e)
				}
				mustHoldNoTree(t, fe.CacheDir)
			})
		}
	}
}

func TestTeamCacheQuotaEvictsOwnTreesFirst(t *testing.T) {
	r := newTestRepo(t)
	var commits []string
	for _, c := range "abc" {
		commits = append(commits, r.commit(string(c), map[string]string{"big.txt": strings.Repeat(string(c), 60<<10)}))
	}
	d := startDaemon(t, r.base)
	fe := &Fetcher{CacheDir: t.TempDir(), Timeout: 10 * time.Second, Keep: 10, Bounds: Bounds{TeamCacheBytes: 150 << 10}}
	var used int
	checkout := func(team, commit string) string {
		t.Helper()
		dir, err := fe.Checkout(context.Background(), Git{RepoURL: d.URL + "/app", Revision: commit, Team: team}, nil, commit)
		if err != nil {
			t.Fatal(err)
		}
		// Used a while ago (past inUseGrace), in the order of the calls.
		used++
		at := time.Now().Add(-time.Hour + time.Duration(used)*time.Second)
		if err := os.Chtimes(dir, at, at); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	b0 := checkout("team-b", commits[0])
	a0 := checkout("team-a", commits[0])
	a1 := checkout("team-a", commits[1])
	b1 := checkout("team-b", commits[1])
	// team-a's third tree passes its 150 KiB: its own oldest goes, team-b's older ones stay.
	a2 := checkout("team-a", commits[2])
	for dir, want := range map[string]bool{a0: false, a1: true, a2: true, b0: true, b1: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", strings.TrimPrefix(dir, fe.CacheDir), err == nil, want)
		}
	}
	if a0 == b0 {
		t.Error("two teams share one tree: the cache is keyed per team")
	}
}

func TestPasswordInRepoURLIsRefusedAndNeverEchoed(t *testing.T) {
	fe := &Fetcher{CacheDir: t.TempDir(), Timeout: 5 * time.Second}
	for _, url := range []string{
		"https://user:hunter2@git.example.com/x.git",
		"http://:hunter2@git.example.com/x.git",
		"ssh://git:hunter2@git.example.com/x.git",
		"https://user:hunter2@git.example.com/a%2fb",  // refused for the password first
		"ftp://user:hunter2@git.example.com/x.git",    // and whatever else is wrong
		"https://user:hunter2@git.example.com:bad/x",  // unparseable
		"https://user:hunter2@@git.example.com/x.git", // odd
		"user:hunter2@git.example.com:x.git",          // scp-like has no password syntax
	} {
		for _, err := range []error{
			func() error { _, err := fe.Resolve(context.Background(), Git{RepoURL: url}, nil); return err }(),
			func() error {
				_, err := fe.Checkout(context.Background(), Git{RepoURL: url}, nil, strings.Repeat("a", 40))
				return err
			}(),
		} {
			e := mustPermanent(t, err, FieldRepoURL, "carries a password")
			if msg := e.Error(); strings.Contains(msg, "hunter2") || !strings.Contains(msg, "spec.source.git.secretRef") {
				t.Errorf("%s: %v", url, msg)
			}
		}
		if got := RedactURL(url); strings.Contains(got, "hunter2") {
			t.Errorf("RedactURL(%q) = %q", url, got)
		}
	}
	// Not a URL at all: refused, and still not repeated.
	for _, url := range []string{"https://u:hunter2/x@git.example.com/y", "https://u:hun ter2@h/x", "u:hunter2/x@h:y"} {
		_, err := fe.Resolve(context.Background(), Git{RepoURL: url}, nil)
		if e := mustPermanent(t, err, FieldRepoURL, "repoURL"); strings.Contains(e.Error(), "hunter2") || strings.Contains(e.Error(), "hun") {
			t.Errorf("%s: %v", url, e)
		}
	}
	// A user name of ssh is no credential.
	for _, url := range []string{"ssh://git@git.example.com/x.git", "git@git.example.com:x.git"} {
		if _, err := NormalizeRepoURL(url); err != nil {
			t.Errorf("%s: %v", url, err)
		}
	}
}

func TestGitCacheIsPrivate(t *testing.T) {
	old := syscall.Umask(0) // the modes must not depend on the process's umask
	defer syscall.Umask(old)
	r := newTestRepo(t)
	r.commit("c1", map[string]string{"apps/web.yaml": "kind: ConfigMap\n", "deep/er/x.yaml": "x: 1\n", "run.sh": "#!/bin/sh\n"})
	r.git("update-index", "--chmod=+x", "run.sh")
	if err := os.Symlink("web.yaml", filepath.Join(r.dir, "apps/link.yaml")); err != nil {
		t.Fatal(err)
	}
	r.git("add", "apps/link.yaml")
	c2 := r.commit("c2", nil)
	d := startDaemon(t, r.base)
	cacheDir := filepath.Join(t.TempDir(), "git")
	if err := os.MkdirAll(cacheDir, 0o755); err != nil { // left open by an older version
		t.Fatal(err)
	}
	fe := &Fetcher{CacheDir: cacheDir, Timeout: 10 * time.Second}
	dir, err := fe.Checkout(context.Background(), Git{RepoURL: d.URL + "/app", Revision: "main", Team: "shop"}, nil, c2)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(cacheDir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case de.IsDir() && info.Mode().Perm() != 0o700:
			t.Errorf("directory %s is %v, want 0700", p, info.Mode().Perm())
		case de.Type().IsRegular():
			files++
			if info.Mode().Perm() != 0o600 {
				t.Errorf("file %s is %v, want 0600", p, info.Mode().Perm())
			}
		}
		return nil
	})
	if err != nil || files != 3 {
		t.Fatalf("walked %d files of %s: %v", files, dir, err)
	}
}

// A tree handed out moments ago may still be rendering: the quota waits for it to age
// (inUseGrace) rather than pull it from under its reader.
func TestTeamCacheQuotaSparesTreesInUse(t *testing.T) {
	r := newTestRepo(t)
	var commits []string
	for _, c := range "ab" {
		commits = append(commits, r.commit(string(c), map[string]string{"big.txt": strings.Repeat(string(c), 60<<10)}))
	}
	d := startDaemon(t, r.base)
	fe := &Fetcher{CacheDir: t.TempDir(), Timeout: 10 * time.Second, Keep: 10, Bounds: Bounds{TeamCacheBytes: 100 << 10}}
	var dirs []string
	for _, c := range commits {
		dir, err := fe.Checkout(context.Background(), Git{RepoURL: d.URL + "/app", Revision: c, Team: "team-a"}, nil, c)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	if _, err := os.Stat(dirs[0]); err != nil {
		t.Errorf("the tree checked out a moment ago was evicted while it may be rendering: %v", err)
	}
}
