package appsource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Git says which tree to fetch.
type Git struct {
	// RepoURL is https://, http://, ssh://, git:// or scp-like user@host:path.
	RepoURL string
	// Revision is a branch name, a tag name or a full 40-hex commit SHA; "" means the
	// remote's HEAD. A name that is both a tag and a branch means the tag, as in git.
	Revision string
}

// Auth is credentials read from a Secret by the caller (keys: username, password, token,
// sshPrivateKey, knownHosts).
type Auth struct {
	// Username and Password are HTTP basic auth; for ssh, Username overrides the URL's user
	// and Password is the private key's passphrase (or the ssh password without a key).
	Username, Password string
	// Token is sent as HTTP basic auth with Username (default "git") and the token as password.
	Token         string
	SSHPrivateKey []byte
	// KnownHosts (known_hosts format) is required for ssh: host keys are checked against it.
	KnownHosts []byte
}

// Defaults of Fetcher.
const (
	DefaultTimeout = 60 * time.Second
	DefaultKeep    = 3
)

// Fetcher fetches git trees into CacheDir/<sha256(repoURL)[:16]>/<commit>. Its zero value
// (with CacheDir set) is ready to use; it must not be copied after first use.
type Fetcher struct {
	CacheDir string
	// Timeout bounds each network operation (listing refs, one fetch); default 60s.
	Timeout time.Duration
	// Keep is how many commits of one repository stay in the cache, the most recently
	// used first; default 3. A directory returned by Checkout stays valid until Keep other
	// commits of the same repository have been checked out since.
	Keep int

	// RefsTTL is how long one listing of a repository's refs answers every Resolve of it, so
	// a push that wakes 500 Applications of one repository costs one request; 0 shares a
	// listing only with the calls made while it is in flight.
	RefsTTL time.Duration

	mu    sync.Mutex
	locks map[string]*sync.Mutex
	refs  map[string]*refsListing
}

// refsListing is one listing of a repository's refs, shared while in flight and for RefsTTL.
type refsListing struct {
	done chan struct{}
	at   time.Time
	refs []*plumbing.Reference
	err  error
}

var (
	fullSHA = regexp.MustCompile(`^[0-9a-fA-F]{40}$`)
	// scp-like ssh address (user@host:path), as git and kustomize read it.
	scpURL = regexp.MustCompile(`^[A-Za-z0-9._~-]+@[A-Za-z0-9.-]+:[^\s]+$`)
)

type scheme int

const (
	schemeHTTP scheme = iota
	schemeSSH
	schemeGit
)

// checkRepoURL admits only network transports: go-git would also read file:// and plain
// paths, which would let an Application read the controller's own disk.
func checkRepoURL(raw string) (scheme, error) {
	if raw == "" {
		return 0, permanent(FieldRepoURL, "repoURL is required")
	}
	refuse := func(why string) (scheme, error) {
		return 0, permanent(FieldRepoURL, "repoURL %q %s: use https://, http://, ssh://, git:// or scp-like git@host:path", redactURL(raw), why)
	}
	if strings.ContainsAny(raw, " \t\r\n") || strings.HasPrefix(raw, "-") {
		return refuse("is not a URL")
	}
	if scpURL.MatchString(raw) && !strings.Contains(raw, "://") {
		return schemeSSH, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return refuse("is not a URL")
	}
	var s scheme
	switch strings.ToLower(u.Scheme) {
	case "https", "http":
		s = schemeHTTP
	case "ssh":
		s = schemeSSH
	case "git":
		s = schemeGit
	default:
		return refuse("has an unsupported scheme")
	}
	if u.Host == "" {
		return refuse("has no host")
	}
	return s, nil
}

// redactURL drops the userinfo of a URL so credentials written into repoURL never reach a
// status message.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err == nil {
		if u.User == nil {
			return raw
		}
		u.User = nil
		return u.String()
	}
	// Unparseable: cut whatever sits between the scheme and the last @.
	if i, j := strings.Index(raw, "://"), strings.LastIndex(raw, "@"); i >= 0 && j > i {
		return raw[:i+3] + raw[j+1:]
	}
	return raw
}

func (f *Fetcher) timeout() time.Duration {
	if f.Timeout > 0 {
		return f.Timeout
	}
	return DefaultTimeout
}

func (f *Fetcher) keep() int {
	if f.Keep > 0 {
		return f.Keep
	}
	return DefaultKeep
}

// Resolve asks the remote (like git ls-remote) which commit g.Revision names now. A full
// 40-hex SHA is returned as is, lower-cased, without network.
func (f *Fetcher) Resolve(ctx context.Context, g Git, auth *Auth) (string, error) {
	s, err := checkRepoURL(g.RepoURL)
	if err != nil {
		return "", err
	}
	if fullSHA.MatchString(g.Revision) {
		return strings.ToLower(g.Revision), nil
	}
	am, err := authMethod(g.RepoURL, s, auth)
	if err != nil {
		return "", err
	}
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{g.RepoURL}})
	refs, err := f.listShared(ctx, g.RepoURL, auth, rem, am)
	if err != nil {
		return "", gitError(g, auth, err)
	}
	_, commit, err := pickRef(refs, g)
	return commit, err
}

// Forget drops the shared listings of the repositories named, so the next Resolve asks the
// server: a push webhook says the refs changed.
func (f *Fetcher) Forget(named func(repoURL string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key := range f.refs {
		url, _, _ := strings.Cut(key, "|")
		if named(url) {
			delete(f.refs, key)
		}
	}
}

// listShared lists a repository's refs once for every caller with the same credentials
// within RefsTTL; a failure is shared only with the callers that waited for it.
func (f *Fetcher) listShared(ctx context.Context, url string, auth *Auth, rem *git.Remote, am transport.AuthMethod) ([]*plumbing.Reference, error) {
	key := url
	if auth != nil {
		h := sha256.Sum256([]byte(auth.Username + "\x00" + auth.Password + "\x00" + auth.Token + "\x00" + string(auth.SSHPrivateKey)))
		key += "|" + hex.EncodeToString(h[:8])
	}
	ttl := f.RefsTTL
	f.mu.Lock()
	if f.refs == nil {
		f.refs = map[string]*refsListing{}
	}
	l, ok := f.refs[key]
	if ok {
		select {
		case <-l.done:
			if l.err != nil || time.Since(l.at) >= ttl {
				ok = false
			}
		default: // in flight: wait for it
		}
	}
	if !ok {
		l = &refsListing{done: make(chan struct{})}
		f.refs[key] = l
		f.mu.Unlock()
		l.refs, l.err = f.list(ctx, rem, am)
		l.at = time.Now()
		close(l.done)
		return l.refs, l.err
	}
	f.mu.Unlock()
	select {
	case <-l.done:
		return l.refs, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *Fetcher) list(ctx context.Context, rem *git.Remote, am transport.AuthMethod) ([]*plumbing.Reference, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout())
	defer cancel()
	return rem.ListContext(ctx, &git.ListOptions{Auth: am, PeelingOption: git.AppendPeeled})
}

// pickRef finds what g.Revision names among the advertised refs: the ref to fetch and the
// commit it points to (annotated tags peeled).
func pickRef(refs []*plumbing.Reference, g Git) (plumbing.ReferenceName, string, error) {
	byName := make(map[plumbing.ReferenceName]*plumbing.Reference, len(refs))
	for _, r := range refs {
		byName[r.Name()] = r
	}
	commitOf := func(name plumbing.ReferenceName) (string, bool) {
		if p, ok := byName[name+"^{}"]; ok {
			return p.Hash().String(), true
		}
		if r, ok := byName[name]; ok && r.Type() == plumbing.HashReference {
			return r.Hash().String(), true
		}
		return "", false
	}
	rev := g.Revision
	if rev == "" || rev == "HEAD" {
		head, ok := byName[plumbing.HEAD]
		if !ok {
			return "", "", permanent(FieldRevision, "%s advertises no HEAD: set a branch, tag or full commit SHA", redactURL(g.RepoURL))
		}
		if head.Type() == plumbing.SymbolicReference {
			if c, ok := commitOf(head.Target()); ok {
				return head.Target(), c, nil
			}
			return "", "", permanent(FieldRevision, "HEAD of %s points to %s, which does not exist: set a branch, tag or full commit SHA", redactURL(g.RepoURL), head.Target())
		}
		return plumbing.HEAD, head.Hash().String(), nil
	}
	candidates := []plumbing.ReferenceName{plumbing.NewTagReferenceName(rev), plumbing.NewBranchReferenceName(rev)}
	if strings.HasPrefix(rev, "refs/") {
		candidates = []plumbing.ReferenceName{plumbing.ReferenceName(rev)}
	}
	for _, name := range candidates {
		if c, ok := commitOf(name); ok {
			return name, c, nil
		}
	}
	return "", "", permanent(FieldRevision, "revision %q not found in %s: use a branch, tag or full commit SHA", rev, redactURL(g.RepoURL))
}

// authMethod turns the Secret's keys into go-git auth for the URL's transport.
func authMethod(repoURL string, s scheme, a *Auth) (transport.AuthMethod, error) {
	switch s {
	case schemeHTTP:
		if a == nil {
			return nil, nil
		}
		if a.Token != "" {
			user := a.Username
			if user == "" {
				user = "git"
			}
			return &githttp.BasicAuth{Username: user, Password: a.Token}, nil
		}
		if a.Username != "" || a.Password != "" {
			return &githttp.BasicAuth{Username: a.Username, Password: a.Password}, nil
		}
		return nil, nil
	case schemeSSH:
		return sshAuth(repoURL, a)
	}
	return nil, nil // git:// has no authentication
}

func sshAuth(repoURL string, a *Auth) (transport.AuthMethod, error) {
	if a == nil || len(strings.TrimSpace(string(a.KnownHosts))) == 0 {
		return nil, permanent(FieldSecretRef, "knownHosts is required for ssh repositories: add the server's host keys (ssh-keyscan HOST) to the Secret's knownHosts")
	}
	ep, err := transport.NewEndpoint(repoURL)
	if err != nil {
		return nil, permanent(FieldRepoURL, "repoURL %q: %v", redactURL(repoURL), err)
	}
	user := ep.User
	if a.Username != "" {
		user = a.Username
	}
	if user == "" {
		user = "git"
	}
	helper, err := hostKeyChecker(a.KnownHosts, ep.Host, ep.Port)
	if err != nil {
		return nil, err
	}
	if len(a.SSHPrivateKey) > 0 {
		signer, err := gossh.ParsePrivateKey(a.SSHPrivateKey)
		var missing *gossh.PassphraseMissingError
		if errors.As(err, &missing) && a.Password != "" {
			signer, err = gossh.ParsePrivateKeyWithPassphrase(a.SSHPrivateKey, []byte(a.Password))
		}
		if err != nil {
			return nil, permanent(FieldSecretRef, "sshPrivateKey: %v", err)
		}
		return &gitssh.PublicKeys{User: user, Signer: signer, HostKeyCallbackHelper: helper}, nil
	}
	if a.Password != "" {
		return &gitssh.Password{User: user, Password: a.Password, HostKeyCallbackHelper: helper}, nil
	}
	return nil, permanent(FieldSecretRef, "sshPrivateKey (or password) is required for ssh repositories")
}

// hostKeyChecker builds the host key check from the Secret's known_hosts. The algorithms
// are pinned to the known key types so the server cannot negotiate one we have no key
// for (which would fail as a mismatch although the key is known).
func hostKeyChecker(known []byte, host string, port int) (gitssh.HostKeyCallbackHelper, error) {
	// The known_hosts parsers read files only; the copy lives for this call.
	tmp, err := os.CreateTemp("", "appsource-known-hosts-")
	if err != nil {
		return gitssh.HostKeyCallbackHelper{}, &Error{Err: fmt.Errorf("knownHosts: %w", err)}
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(known)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return gitssh.HostKeyCallbackHelper{}, &Error{Err: fmt.Errorf("knownHosts: %w", werr)}
	}
	db, err := gitssh.NewKnownHostsDb(tmp.Name())
	if err != nil {
		return gitssh.HostKeyCallbackHelper{}, permanent(FieldSecretRef, "knownHosts: %v", err)
	}
	if port == 0 {
		port = 22
	}
	return gitssh.HostKeyCallbackHelper{
		HostKeyCallback:   db.HostKeyCallback(),
		HostKeyAlgorithms: db.HostKeyAlgorithms(net.JoinHostPort(host, strconv.Itoa(port))),
	}, nil
}

// gitError says which field a git failure is about and whether it repeats.
func gitError(g Git, auth *Auth, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	repo := redactURL(g.RepoURL)
	var keyErr *knownhosts.KeyError
	msg := err.Error()
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired) || strings.Contains(msg, "unable to authenticate"):
		if auth == nil {
			return &Error{Field: FieldSecretRef, Permanent: true, Err: fmt.Errorf("%s requires authentication: set secretRef to a Secret with username and password, token, or sshPrivateKey: %w", repo, err)}
		}
		return &Error{Field: FieldSecretRef, Permanent: true, Err: fmt.Errorf("authentication to %s failed: check the Secret's credentials: %w", repo, err)}
	case errors.Is(err, transport.ErrAuthorizationFailed):
		return &Error{Field: FieldSecretRef, Permanent: true, Err: fmt.Errorf("%s denied access with these credentials: %w", repo, err)}
	case errors.As(err, &keyErr) || strings.Contains(msg, "knownhosts:"):
		return &Error{Field: FieldSecretRef, Permanent: true, Err: fmt.Errorf("host key of %s does not match knownHosts: add the server's current key to the Secret's knownHosts: %w", repo, err)}
	case errors.As(err, &git.NoMatchingRefSpecError{}) || errors.Is(err, plumbing.ErrReferenceNotFound):
		return &Error{Field: FieldRevision, Permanent: true, Err: fmt.Errorf("revision %q not found in %s: use a branch, tag or full commit SHA: %w", g.Revision, repo, err)}
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return &Error{Field: FieldRepoURL, Permanent: true, Err: fmt.Errorf("repository %s not found (or these credentials cannot see it): %w", repo, err)}
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return &Error{Field: FieldRepoURL, Permanent: true, Err: fmt.Errorf("repository %s is empty", repo)}
	case isTLSFailure(err):
		return &Error{Field: FieldRepoURL, Permanent: true, Err: fmt.Errorf("TLS to %s: %w", repo, err)}
	}
	if code := httpStatus(err); code >= 400 && code < 500 && code != 408 && code != 429 {
		return &Error{Field: FieldRepoURL, Permanent: true, Err: fmt.Errorf("%s answered HTTP %d: %w", repo, code, err)}
	}
	// Anything else (network, server errors, timeouts, broken packs) may pass: retry.
	return &Error{Field: FieldRepoURL, Err: fmt.Errorf("fetching %s: %w", repo, err)}
}

// repoKey names a repository's cache directory; hashing keeps credentials and odd characters
// of the URL out of the filesystem.
func repoKey(repoURL string) string {
	sum := sha256.Sum256([]byte(repoURL))
	return hex.EncodeToString(sum[:])[:16]
}

func (f *Fetcher) lock(key string) func() {
	f.mu.Lock()
	if f.locks == nil {
		f.locks = map[string]*sync.Mutex{}
	}
	l, ok := f.locks[key]
	if !ok {
		l = &sync.Mutex{}
		f.locks[key] = l
	}
	f.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Checkout makes sure the tree of commit is on disk and returns its directory (without
// .git). The same (repoURL, commit) is fetched once: later calls answer from the cache
// without network. A branch or tag that still points at commit is fetched shallow (depth
// 1); otherwise the commit itself is asked for when the server allows, else the whole
// repository is fetched.
func (f *Fetcher) Checkout(ctx context.Context, g Git, auth *Auth, commit string) (string, error) {
	s, err := checkRepoURL(g.RepoURL)
	if err != nil {
		return "", err
	}
	if !fullSHA.MatchString(commit) {
		return "", permanent(FieldRevision, "commit %q is not a full 40-hex SHA", commit)
	}
	if f.CacheDir == "" {
		return "", errors.New("appsource: Fetcher.CacheDir is not set")
	}
	commit = strings.ToLower(commit)
	repoDir := filepath.Join(f.CacheDir, repoKey(g.RepoURL))
	final := filepath.Join(repoDir, commit)
	unlock := f.lock(repoDir)
	defer unlock()

	if fi, err := os.Stat(final); err == nil && fi.IsDir() {
		now := time.Now()
		_ = os.Chtimes(final, now, now) // eviction keeps the most recently used
		return final, nil
	}
	am, err := authMethod(g.RepoURL, s, auth)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(repoDir, 0o755); err != nil {
		return "", cacheError(err)
	}
	// Everything is written under a temp name and renamed into place only when complete, so a
	// crash never leaves a directory named after a commit that is half checked out.
	tmp, err := os.MkdirTemp(repoDir, ".tmp-"+commit[:12]+"-")
	if err != nil {
		return "", cacheError(err)
	}
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "tree")
	if err := f.fetchTree(ctx, g, auth, am, commit, filepath.Join(tmp, "git"), tree); err != nil {
		return "", cacheError(err)
	}
	if err := os.Rename(tree, final); err != nil {
		// Another process sharing the cache may have won the race; its tree is as good.
		if fi, serr := os.Stat(final); serr != nil || !fi.IsDir() {
			return "", cacheError(err)
		}
	}
	f.evict(repoDir, commit)
	return final, nil
}

// fetchTree fetches commit into a fresh repository at gitDir and checks it out into tree.
func (f *Fetcher) fetchTree(ctx context.Context, g Git, auth *Auth, am transport.AuthMethod, commit, gitDir, tree string) error {
	want := plumbing.NewHash(commit)
	var attempts []fetchAttempt
	if !fullSHA.MatchString(g.Revision) {
		rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{g.RepoURL}})
		refs, err := f.list(ctx, rem, am)
		if err != nil {
			return gitError(g, auth, err)
		}
		name, c, err := pickRef(refs, g)
		if err != nil {
			return err
		}
		if c == commit {
			attempts = append(attempts, fetchAttempt{spec: "+" + name.String() + ":refs/flotilla/want", depth: 1})
		}
	}
	attempts = append(attempts,
		fetchAttempt{spec: commit + ":refs/flotilla/want", depth: 1},
		fetchAttempt{spec: "+refs/heads/*:refs/remotes/origin/*", more: []string{"+refs/tags/*:refs/tags/*"}},
	)
	for i, a := range attempts {
		// Each attempt starts from an empty repository: deepening a shallow one is where
		// go-git is weakest, and a clean start costs only what the previous attempt fetched.
		if err := os.RemoveAll(gitDir); err != nil {
			return err
		}
		if err := os.RemoveAll(tree); err != nil {
			return err
		}
		repo, err := git.Init(
			filesystem.NewStorage(osfs.New(gitDir, osfs.WithBoundOS()), cache.NewObjectLRUDefault()),
			osfs.New(tree, osfs.WithBoundOS()))
		if err != nil {
			return err
		}
		rem, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{g.RepoURL}})
		if err != nil {
			return err
		}
		specs := []config.RefSpec{config.RefSpec(a.spec)}
		for _, m := range a.more {
			specs = append(specs, config.RefSpec(m))
		}
		fctx, cancel := context.WithTimeout(ctx, f.timeout())
		err = rem.FetchContext(fctx, &git.FetchOptions{RefSpecs: specs, Depth: a.depth, Auth: am, Tags: git.NoTags})
		cancel()
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			ge := gitError(g, auth, err)
			// A server that does not hand out commits by SHA (it may just hang up on the
			// request), or a ref that moved since it was listed: the next, wider attempt may
			// still find the commit. Only an unreachable server or bad credentials end here.
			if i < len(attempts)-1 && !unreachable(ctx, err) && !isField(ge, FieldSecretRef) {
				continue
			}
			return ge
		}
		if _, err := repo.CommitObject(want); err != nil {
			continue
		}
		w, err := repo.Worktree()
		if err != nil {
			return err
		}
		if err := w.Checkout(&git.CheckoutOptions{Hash: want, Force: true}); err != nil {
			// go-git refuses trees that would write outside the worktree (.., .git, paths
			// through symlinks): that commit will never check out.
			bad := strings.Contains(err.Error(), "invalid path")
			return &Error{Field: FieldRevision, Permanent: bad, Err: fmt.Errorf("checking out %s: %w", commit, err)}
		}
		return os.RemoveAll(filepath.Join(tree, ".git"))
	}
	return permanent(FieldRevision, "commit %s not found in %s: the revision may have been force-pushed or deleted; use a branch, tag or full commit SHA that exists", commit, redactURL(g.RepoURL))
}

type fetchAttempt struct {
	spec  string
	more  []string
	depth int
}

// unreachable is a failure to reach the server at all, which a wider fetch would repeat.
func unreachable(ctx context.Context, err error) bool {
	var op *net.OpError
	return ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &op) && op.Op == "dial") || strings.Contains(err.Error(), "connection refused")
}

// cacheError makes a local failure (disk full, permissions) an *Error that is retried: it is
// not the user's to fix in the Application.
func cacheError(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Err: fmt.Errorf("git cache: %w", err)}
}

func isField(err error, field string) bool {
	var e *Error
	return errors.As(err, &e) && e.Field == field
}

// evict keeps the f.keep() most recently used commits of a repository (always including
// the one just checked out) and sweeps temp directories left by a crash.
func (f *Fetcher) evict(repoDir, current string) {
	entries, err := os.ReadDir(repoDir)
	if err != nil {
		return
	}
	type used struct {
		name string
		at   time.Time
	}
	var commits []used
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(e.Name(), ".tmp-"):
			if time.Since(info.ModTime()) > time.Hour {
				_ = os.RemoveAll(filepath.Join(repoDir, e.Name()))
			}
		case e.IsDir() && fullSHA.MatchString(e.Name()) && e.Name() != current:
			commits = append(commits, used{e.Name(), info.ModTime()})
		}
	}
	sort.Slice(commits, func(i, j int) bool { return commits[i].at.After(commits[j].at) })
	for i, c := range commits {
		if i < f.keep()-1 {
			continue
		}
		// Rename first: a removal cut short must not leave a partial tree under a commit name.
		doomed := filepath.Join(repoDir, ".tmp-evict-"+c.name+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		if err := os.Rename(filepath.Join(repoDir, c.name), doomed); err == nil {
			_ = os.RemoveAll(doomed)
		}
	}
}
