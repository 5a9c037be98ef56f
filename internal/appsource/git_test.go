package appsource

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fixture: main has c1 (tagged v1 lightweight and v1.1 annotated), feature has c2 on top.
type fixture struct {
	repo      *testRepo
	c1, c2    string
	filesAtC1 map[string]string
	filesAtC2 map[string]string
	fetcher   *Fetcher
	daemon    *gitDaemon
	git       Git // main over git://
	ctx       context.Context
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	r := newTestRepo(t)
	f := &fixture{repo: r}
	f.filesAtC1 = map[string]string{"apps/web.yaml": "kind: ConfigMap\n", "README.md": "hi\n"}
	f.c1 = r.commit("c1", f.filesAtC1)
	r.git("tag", "v1")
	r.git("tag", "-a", "-m", "release", "v1.1")
	r.git("checkout", "-q", "-b", "feature")
	f.c2 = r.commit("c2", map[string]string{"apps/extra.yaml": "kind: Secret\n"})
	f.filesAtC2 = map[string]string{"apps/web.yaml": "kind: ConfigMap\n", "README.md": "hi\n", "apps/extra.yaml": "kind: Secret\n"}
	r.git("checkout", "-q", "main")
	f.daemon = startDaemon(t, r.base)
	f.git = Git{RepoURL: f.daemon.URL + "/app", Revision: "main"}
	f.fetcher = &Fetcher{CacheDir: t.TempDir(), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	f.ctx = ctx
	return f
}

func (f *fixture) rev(rev string) Git { return Git{RepoURL: f.git.RepoURL, Revision: rev} }

func TestResolveBranchTagHeadAndSHA(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct{ rev, want string }{
		{"main", f.c1},
		{"", f.c1}, // the remote's HEAD symref (main)
		{"HEAD", f.c1},
		{"v1", f.c1},
		{"v1.1", f.c1}, // annotated: peeled to the commit
		{"feature", f.c2},
		{"refs/heads/feature", f.c2},
	} {
		got, err := f.fetcher.Resolve(f.ctx, f.rev(tc.rev), nil)
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.rev, got, err, tc.want)
		}
	}
	// HEAD follows the default branch, not a fixed name.
	f.repo.git("symbolic-ref", "HEAD", "refs/heads/feature")
	if got, err := f.fetcher.Resolve(f.ctx, f.rev(""), nil); err != nil || got != f.c2 {
		t.Errorf("Resolve(\"\") after HEAD moved = %q, %v; want %q", got, err, f.c2)
	}

	// A full SHA needs no network: the URL here has nothing listening.
	sha := strings.ToUpper(f.c2)
	got, err := (&Fetcher{}).Resolve(f.ctx, Git{RepoURL: "git://127.0.0.1:1/none", Revision: sha}, nil)
	if err != nil || got != f.c2 {
		t.Errorf("Resolve(SHA) = %q, %v; want %q without network", got, err, f.c2)
	}

	_, err = f.fetcher.Resolve(f.ctx, f.rev("v9"), nil)
	e := mustPermanent(t, err, FieldRevision, `revision "v9" not found in `+f.git.RepoURL)
	if !strings.Contains(e.Error(), "use a branch, tag or full commit SHA") {
		t.Errorf("message should say what to use: %v", e)
	}
	// A short SHA is not looked up: only full SHAs are commits.
	_, err = f.fetcher.Resolve(f.ctx, f.rev(f.c1[:7]), nil)
	mustPermanent(t, err, FieldRevision, "not found")
}

func TestResolveSeesNewCommitsAndVanishedRevisions(t *testing.T) {
	f := newFixture(t)
	c3 := f.repo.commit("c3", map[string]string{"apps/web.yaml": "kind: ConfigMap # v3\n"})
	if got, err := f.fetcher.Resolve(f.ctx, f.rev("main"), nil); err != nil || got != c3 {
		t.Fatalf("Resolve(main) after a new commit = %q, %v; want %q", got, err, c3)
	}
	f.repo.git("branch", "-D", "feature")
	_, err := f.fetcher.Resolve(f.ctx, f.rev("feature"), nil)
	mustPermanent(t, err, FieldRevision, `revision "feature" not found`)
	_, err = f.fetcher.Checkout(f.ctx, f.rev("feature"), nil, f.c2)
	mustPermanent(t, err, FieldRevision, `"feature" not found`)
}

func TestCheckoutIsCachedAndSurvivesServerStop(t *testing.T) {
	f := newFixture(t)
	dir, err := f.fetcher.Checkout(f.ctx, f.git, nil, f.c1)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(f.fetcher.CacheDir, "teams", "_", repoKey(f.git.RepoURL), f.c1); dir != want {
		t.Fatalf("Checkout dir = %s, want %s", dir, want)
	}
	mustEqualTree(t, dir, f.filesAtC1) // no .git: the tree only

	// The annotated tag names the same commit: same directory, from the cache.
	if d, err := f.fetcher.Checkout(f.ctx, f.rev("v1.1"), nil, f.c1); err != nil || d != dir {
		t.Fatalf("Checkout(v1.1) = %s, %v; want cached %s", d, err, dir)
	}
	c2dir, err := f.fetcher.Checkout(f.ctx, f.rev("feature"), nil, f.c2)
	if err != nil {
		t.Fatal(err)
	}
	mustEqualTree(t, c2dir, f.filesAtC2)

	f.daemon.stop()
	if d, err := f.fetcher.Checkout(f.ctx, f.git, nil, f.c1); err != nil || d != dir {
		t.Fatalf("cached Checkout with the server down = %s, %v; want %s", d, err, dir)
	}
	_, err = f.fetcher.Resolve(f.ctx, f.git, nil)
	if !IsTransient(err) {
		t.Fatalf("Resolve with the server down: want transient, got %v", err)
	}
	c3 := f.repo.commit("c3", nil)
	_, err = f.fetcher.Checkout(f.ctx, f.git, nil, c3)
	if !IsTransient(err) {
		t.Fatalf("uncached Checkout with the server down: want transient, got %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("a failed checkout left %s behind", e.Name())
		}
	}
}

func TestCheckoutOfOlderOrUnknownCommits(t *testing.T) {
	f := newFixture(t)
	c3 := f.repo.commit("c3", map[string]string{"apps/web.yaml": "kind: ConfigMap # v3\n"})
	// main has moved past c1: the shallow branch tip is not it, so the commit is fetched by
	// other means (this daemon does not hand out commits by SHA: a full fetch).
	dir, err := f.fetcher.Checkout(f.ctx, f.git, nil, f.c1)
	if err != nil {
		t.Fatal(err)
	}
	mustEqualTree(t, dir, f.filesAtC1)
	dir, err = f.fetcher.Checkout(f.ctx, f.rev(c3), nil, c3) // revision given as a SHA
	if err != nil {
		t.Fatal(err)
	}
	mustEqualTree(t, dir, map[string]string{"apps/web.yaml": "kind: ConfigMap # v3\n", "README.md": "hi\n"})

	missing := strings.Repeat("ab", 20)
	_, err = f.fetcher.Checkout(f.ctx, f.rev(missing), nil, missing)
	mustPermanent(t, err, FieldRevision, "commit "+missing+" not found")
	_, err = f.fetcher.Checkout(f.ctx, f.git, nil, "v1")
	mustPermanent(t, err, FieldRevision, "not a full 40-hex SHA")
}

func TestCheckoutBySHAWhenServerAllowsIt(t *testing.T) {
	f := newFixture(t)
	f.repo.git("config", "uploadpack.allowReachableSHA1InWant", "true")
	f.repo.commit("c3", nil)
	dir, err := f.fetcher.Checkout(f.ctx, f.rev(f.c2), nil, f.c2)
	if err != nil {
		t.Fatal(err)
	}
	mustEqualTree(t, dir, f.filesAtC2)
	missing := strings.Repeat("cd", 20)
	_, err = f.fetcher.Checkout(f.ctx, f.rev(missing), nil, missing)
	mustPermanent(t, err, FieldRevision, "not found")
}

func TestCheckoutKeepsFewCommitsPerRepo(t *testing.T) {
	f := newFixture(t)
	f.fetcher.Keep = 2
	c3 := f.repo.commit("c3", nil)
	c4 := f.repo.commit("c4", nil)
	var dirs []string
	for _, c := range []string{c3, f.c1, c4} {
		g := f.git
		if c == f.c1 {
			g = f.rev("v1.1") // annotated tag, fetched shallow
		}
		if c == c3 {
			g = f.rev(c3)
		}
		d, err := f.fetcher.Checkout(f.ctx, g, nil, c)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
		time.Sleep(10 * time.Millisecond) // distinct use times
	}
	if _, err := os.Stat(dirs[0]); !os.IsNotExist(err) {
		t.Errorf("oldest commit %s should have been evicted (Keep 2): %v", dirs[0], err)
	}
	for _, d := range dirs[1:] {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("recent commit %s should stay: %v", d, err)
		}
	}
}

func TestConcurrentCheckoutsShareOneTree(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	dirs := make([]string, 4)
	errs := make([]error, 4)
	for i := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dirs[i], errs[i] = f.fetcher.Checkout(f.ctx, f.git, nil, f.c1)
		}()
	}
	wg.Wait()
	for i := range dirs {
		if errs[i] != nil || dirs[i] != dirs[0] {
			t.Fatalf("checkout %d = %s, %v; want %s", i, dirs[i], errs[i], dirs[0])
		}
	}
	mustEqualTree(t, dirs[0], f.filesAtC1)
}

func TestHTTPBasicAuth(t *testing.T) {
	r := newTestRepo(t)
	c1 := r.commit("c1", map[string]string{"a.yaml": "a: 1\n"})
	srv := startHTTPGit(t, r.base, "git", "s3cret")
	g := Git{RepoURL: srv.URL + "/app", Revision: "main"}
	fe := &Fetcher{CacheDir: t.TempDir(), Timeout: 10 * time.Second}
	ctx := context.Background()

	for _, auth := range []*Auth{{Username: "git", Password: "s3cret"}, {Token: "s3cret"}} {
		got, err := fe.Resolve(ctx, g, auth)
		if err != nil || got != c1 {
			t.Fatalf("Resolve with %+v = %q, %v; want %q", *auth, got, err, c1)
		}
	}
	dir, err := fe.Checkout(ctx, g, &Auth{Token: "s3cret"}, c1)
	if err != nil {
		t.Fatal(err)
	}
	mustEqualTree(t, dir, map[string]string{"a.yaml": "a: 1\n"})

	_, err = fe.Resolve(ctx, g, &Auth{Username: "git", Password: "wrong"})
	mustPermanent(t, err, FieldSecretRef, "authentication to "+g.RepoURL+" failed")
	_, err = fe.Resolve(ctx, g, nil)
	mustPermanent(t, err, FieldSecretRef, "requires authentication")
	c2 := r.commit("c2", nil)
	_, err = fe.Checkout(ctx, g, &Auth{Username: "git", Password: "wrong"}, c2)
	mustPermanent(t, err, FieldSecretRef, "failed")
}

func TestHTTPServerFailures(t *testing.T) {
	status := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", status)
	}))
	defer srv.Close()
	fe := &Fetcher{CacheDir: t.TempDir(), Timeout: 5 * time.Second}
	g := Git{RepoURL: srv.URL + "/app", Revision: "main"}
	if _, err := fe.Resolve(context.Background(), g, nil); !IsTransient(err) {
		t.Errorf("503: want transient, got %v", err)
	}
	status = http.StatusNotFound
	_, err := fe.Resolve(context.Background(), g, nil)
	mustPermanent(t, err, FieldRepoURL, "not found")

	// A timeout is transient too.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	fe.Timeout = 200 * time.Millisecond
	if _, err := fe.Resolve(context.Background(), Git{RepoURL: slow.URL + "/app"}, nil); !IsTransient(err) {
		t.Errorf("timeout: want transient, got %v", err)
	}
}

func TestRepoURLSchemes(t *testing.T) {
	for _, ok := range []string{"https://example.com/a.git", "http://example.com/a", "ssh://git@example.com/a.git",
		"git://example.com/a", "git@github.com:org/repo.git"} {
		if _, err := checkRepoURL(ok); err != nil {
			t.Errorf("checkRepoURL(%q) = %v; want accepted", ok, err)
		}
	}
	fe := &Fetcher{CacheDir: t.TempDir()}
	for _, bad := range []string{"", "file:///etc", "/srv/git/app", "../app", "ftp://example.com/a", "example.com:a", "https:///nohost", "-uhttps://x"} {
		_, err := fe.Resolve(context.Background(), Git{RepoURL: bad}, nil)
		want := "use https://, http://, ssh://, git:// or scp-like git@host:path"
		if bad == "" {
			want = "repoURL is required"
		}
		mustPermanent(t, err, FieldRepoURL, want)
		_, err = fe.Checkout(context.Background(), Git{RepoURL: bad}, nil, strings.Repeat("a", 40))
		mustPermanent(t, err, FieldRepoURL, want)
	}
	// Credentials in the URL never reach a message.
	_, err := fe.Resolve(context.Background(), Git{RepoURL: "ftp://user:hunter2@example.com/a"}, nil)
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error leaks the password: %v", err)
	}
}

func TestSSHRequiresKnownHostsAndChecksThem(t *testing.T) {
	r := newTestRepo(t)
	c1 := r.commit("c1", map[string]string{"a.yaml": "a: 1\n"})
	srv := startSSHGit(t, r.base)
	g := Git{RepoURL: "ssh://git@" + srv.Addr + "/app", Revision: "main"}
	fe := &Fetcher{CacheDir: t.TempDir(), Timeout: 10 * time.Second}
	ctx := context.Background()

	for _, auth := range []*Auth{nil, {SSHPrivateKey: srv.ClientPK}} {
		_, err := fe.Resolve(ctx, g, auth)
		mustPermanent(t, err, FieldSecretRef, "knownHosts is required")
	}
	// A different host key is refused: host keys are never accepted blindly.
	other := startSSHGit(t, r.base)
	_, err := fe.Resolve(ctx, g, &Auth{SSHPrivateKey: srv.ClientPK, KnownHosts: srv.knownHosts(other.HostKey)})
	mustPermanent(t, err, FieldSecretRef, "host key")

	auth := &Auth{SSHPrivateKey: srv.ClientPK, KnownHosts: srv.knownHosts(srv.HostKey)}
	got, err := fe.Resolve(ctx, g, auth)
	if err != nil || got != c1 {
		t.Fatalf("Resolve over ssh = %q, %v; want %q", got, err, c1)
	}
	dir, err := fe.Checkout(ctx, g, auth, c1)
	if err != nil {
		t.Fatal(err)
	}
	mustEqualTree(t, dir, map[string]string{"a.yaml": "a: 1\n"})

	// The server does not know this key.
	_, err = fe.Resolve(ctx, g, &Auth{SSHPrivateKey: other.ClientPK, KnownHosts: auth.KnownHosts})
	mustPermanent(t, err, FieldSecretRef, "authentication")
	_, err = fe.Resolve(ctx, g, &Auth{SSHPrivateKey: []byte("not a key"), KnownHosts: auth.KnownHosts})
	mustPermanent(t, err, FieldSecretRef, "sshPrivateKey")
}

func TestErrorFormatAndTransience(t *testing.T) {
	e := &Error{File: "apps/web.yaml", Line: 12, Permanent: true, Err: errorString("yaml: mapping values are not allowed in this context")}
	if got := e.Error(); got != "apps/web.yaml:12: yaml: mapping values are not allowed in this context" {
		t.Errorf("Error() = %q", got)
	}
	e = &Error{Field: FieldRevision, Permanent: true, Err: errorString("x")}
	if got := e.Error(); got != "spec.source.git.revision: x" {
		t.Errorf("Error() = %q", got)
	}
	if IsTransient(nil) || IsTransient(e) || !IsTransient(&Error{Err: context.DeadlineExceeded}) || !IsTransient(context.DeadlineExceeded) {
		t.Error("IsTransient misclassifies")
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// A repository may hold symlinks that point out of it: they are checked out as symlinks, and
// rendering refuses to follow them.
func TestCheckoutThenRenderRefusesEscapingSymlink(t *testing.T) {
	r := newTestRepo(t)
	r.commit("c1", map[string]string{"apps/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"})
	if err := os.Symlink("/etc/hostname", filepath.Join(r.dir, "apps/evil.yaml")); err != nil {
		t.Fatal(err)
	}
	r.git("add", "apps/evil.yaml")
	c2 := r.commit("c2", nil)
	d := startDaemon(t, r.base)
	fe := &Fetcher{CacheDir: t.TempDir(), Timeout: 10 * time.Second}
	dir, err := fe.Checkout(context.Background(), Git{RepoURL: d.URL + "/app", Revision: "main"}, nil, c2)
	if err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "apps/evil.yaml")); err != nil || target != "/etc/hostname" {
		t.Fatalf("symlink checked out as %q, %v", target, err)
	}
	_, err = RenderDir(dir, "apps", Limits{})
	mustFileError(t, err, "apps/evil.yaml", 0, "leads outside the repository")
}

// Many Applications of one repository woken at once (a push webhook) list its refs once.
func TestResolveSharesOneListingOfRefs(t *testing.T) {
	r := newTestRepo(t)
	c1 := r.commit("c1", map[string]string{"a.yaml": "a: 1\n"})
	backend := startHTTPGit(t, r.base, "", "")
	var mu sync.Mutex
	listings := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/info/refs") {
			mu.Lock()
			listings++
			mu.Unlock()
		}
		proxy, err := http.NewRequestWithContext(req.Context(), req.Method, backend.URL+req.URL.RequestURI(), req.Body)
		if err != nil {
			t.Error(err)
			return
		}
		proxy.Header = req.Header
		resp, err := http.DefaultClient.Do(proxy)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	defer srv.Close()
	g := Git{RepoURL: srv.URL + "/app", Revision: "main"}
	fe := &Fetcher{CacheDir: t.TempDir(), Timeout: 10 * time.Second, RefsTTL: time.Minute}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if got, err := fe.Resolve(context.Background(), g, nil); err != nil || got != c1 {
				t.Errorf("Resolve = %q, %v; want %q", got, err, c1)
			}
		})
	}
	wg.Wait()
	if listings != 1 {
		t.Errorf("20 Resolves within RefsTTL listed the refs %d times, want 1", listings)
	}
	// Without a TTL, a later Resolve asks again and sees a new commit.
	fe.RefsTTL = 0
	c2 := r.commit("c2", map[string]string{"b.yaml": "b: 1\n"})
	if got, err := fe.Resolve(context.Background(), g, nil); err != nil || got != c2 {
		t.Errorf("Resolve after a push = %q, %v; want %q", got, err, c2)
	}
}

func TestForgetMakesTheNextResolveAsk(t *testing.T) {
	r := newTestRepo(t)
	r.commit("c1", map[string]string{"a.yaml": "a: 1\n"})
	srv := startHTTPGit(t, r.base, "", "")
	g := Git{RepoURL: srv.URL + "/app", Revision: "main"}
	fe := &Fetcher{CacheDir: t.TempDir(), Timeout: 10 * time.Second, RefsTTL: time.Hour}
	if _, err := fe.Resolve(context.Background(), g, nil); err != nil {
		t.Fatal(err)
	}
	c2 := r.commit("c2", map[string]string{"b.yaml": "b: 1\n"})
	if got, _ := fe.Resolve(context.Background(), g, nil); got == c2 {
		t.Fatal("within RefsTTL the shared listing answers")
	}
	fe.Forget(func(u string) bool { return u == g.RepoURL })
	if got, err := fe.Resolve(context.Background(), g, nil); err != nil || got != c2 {
		t.Errorf("Resolve after Forget = %q, %v; want %q", got, err, c2)
	}
}
