package appsource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
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
	// RepoURL is https://, http://, ssh://, git:// or scp-like user@host:path; it is
	// normalised (NormalizeRepoURL) before anything is fetched, and refused if it cannot be.
	RepoURL string
	// Revision is a branch name, a tag name or a full 40-hex commit SHA; "" means the
	// remote's HEAD. A name that is both a tag and a branch means the tag, as in git.
	Revision string
	// Team is the namespace of the Team the fetch is for. Its trees are cached apart from
	// every other team's (a team never reads a tree another team's fetch wrote) and count
	// against its share of the cache (TeamCacheBytes); "" is a team of its own.
	Team string
	// Allowed reports whether a normalised repository URL is one the Team allows. An HTTP
	// redirect may go only to the same scheme and host, and to the repository itself (with
	// or without .git) or one Allowed accepts; nil accepts none but the repository itself.
	Allowed func(repoURL string) bool
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

// Bounds limit what one repository may cost the process; a zero field takes its default. A
// repository over a bound fails with a permanent *Error naming the bound, its figure and the
// controller-manager flag that raises it, and leaves nothing in the cache.
type Bounds struct {
	// MaxFetchBytes bounds what one listing or fetch receives: over HTTP every response byte
	// (after decompression), over any transport the pack; default 256 MiB.
	MaxFetchBytes int64
	// MaxObjects bounds the objects of one pack and the files of one checkout; default 200,000.
	MaxObjects int
	// MaxFileBytes bounds one object once inflated (a file, a tree, a delta's result), read
	// from its header before it is inflated; default 8 MiB.
	MaxFileBytes int64
	// MaxCheckoutBytes bounds the files of one checked-out tree, summed before a byte is
	// written; default 512 MiB.
	MaxCheckoutBytes int64
	// TeamCacheBytes is one team's share of the cache: past it the team's least recently used
	// trees are evicted (never another team's), and a tree bigger than it is refused;
	// default 1 GiB.
	TeamCacheBytes int64
}

// Defaults of Bounds.
const (
	DefaultMaxFetchBytes     = 256 << 20
	DefaultMaxFetchObjects   = 200_000
	DefaultMaxFetchFileBytes = 8 << 20
	DefaultMaxCheckoutBytes  = 512 << 20
	DefaultTeamCacheBytes    = 1 << 30
)

// DefaultBounds are the bounds a zero Bounds stands for.
func DefaultBounds() Bounds { return Bounds{}.withDefaults() }

func (b Bounds) withDefaults() Bounds {
	if b.MaxFetchBytes <= 0 {
		b.MaxFetchBytes = DefaultMaxFetchBytes
	}
	if b.MaxObjects <= 0 {
		b.MaxObjects = DefaultMaxFetchObjects
	}
	if b.MaxFileBytes <= 0 {
		b.MaxFileBytes = DefaultMaxFetchFileBytes
	}
	if b.MaxCheckoutBytes <= 0 {
		b.MaxCheckoutBytes = DefaultMaxCheckoutBytes
	}
	if b.TeamCacheBytes <= 0 {
		b.TeamCacheBytes = DefaultTeamCacheBytes
	}
	return b
}

// Fetcher fetches git trees into CacheDir/teams/<team>/<sha256(repoURL)[:16]>/<commit>. Its
// zero value (with CacheDir set) is ready to use; it must not be copied after first use.
type Fetcher struct {
	CacheDir string
	// Timeout bounds each network operation (listing refs, one fetch); default 60s.
	Timeout time.Duration
	// Keep is how many commits of one repository stay in a team's cache, the most recently
	// used first; default 3. A directory returned by Checkout stays valid until Keep other
	// commits of the same repository have been checked out since, or the team's share of
	// the cache pushed it out.
	Keep int

	// RefsTTL is how long one listing of a repository's refs answers every Resolve of it by
	// the same team with the same credentials, so a push that wakes 500 Applications of one
	// repository costs one request; 0 shares a listing only with the calls made while it is
	// in flight.
	RefsTTL time.Duration

	// Bounds limit what one repository may cost.
	Bounds

	mu     sync.Mutex
	locks  map[string]*sync.Mutex
	refs   map[refsKey]*refsListing
	sizes  map[string]int64 // bytes of the files of each cached tree, by directory
	legacy sync.Once        // the cache of one tree per repository, before trees were per team
}

// refsKey names one shared listing: teams never share one, so a redirect one team allows
// never answers another.
type refsKey struct {
	team, url, creds string
}

// refsListing is one listing of a repository's refs, shared while in flight and for RefsTTL.
type refsListing struct {
	done chan struct{}
	at   time.Time
	refs []*plumbing.Reference
	err  error
}

var fullSHA = regexp.MustCompile(`^[0-9a-fA-F]{40}$`)

// checkRepoURL admits only network transports: go-git would also read file:// and plain
// paths, which would let an Application read the controller's own disk.
func checkRepoURL(raw string) (scheme, error) {
	_, s, err := normalizeRepoURL(raw)
	return s, err
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

func (f *Fetcher) bounds() Bounds { return f.Bounds.withDefaults() }

// Resolve asks the remote (like git ls-remote) which commit g.Revision names now. A full
// 40-hex SHA is returned as is, lower-cased, without network.
func (f *Fetcher) Resolve(ctx context.Context, g Git, auth *Auth) (string, error) {
	n, s, err := normalizeRepoURL(g.RepoURL)
	if err != nil {
		return "", err
	}
	g.RepoURL = n
	if fullSHA.MatchString(g.Revision) {
		return strings.ToLower(g.Revision), nil
	}
	am, err := authMethod(g.RepoURL, s, auth)
	if err != nil {
		return "", err
	}
	refs, err := f.listShared(ctx, g, auth, am)
	if err != nil {
		return "", err
	}
	_, commit, err := pickRef(refs, g)
	return commit, err
}

// Forget drops the shared listings of the repositories named (normalised URLs), so the next
// Resolve asks the server: a push webhook says the refs changed.
func (f *Fetcher) Forget(named func(repoURL string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key := range f.refs {
		if named(key.url) {
			delete(f.refs, key)
		}
	}
}

// listShared lists a repository's refs once for every caller of the same team with the same
// credentials within RefsTTL; a failure is shared only with the callers that waited for it.
func (f *Fetcher) listShared(ctx context.Context, g Git, auth *Auth, am transport.AuthMethod) ([]*plumbing.Reference, error) {
	key := refsKey{team: g.Team, url: g.RepoURL}
	if auth != nil {
		h := sha256.Sum256([]byte(auth.Username + "\x00" + auth.Password + "\x00" + auth.Token + "\x00" + string(auth.SSHPrivateKey)))
		key.creds = hex.EncodeToString(h[:8])
	}
	ttl := f.RefsTTL
	f.mu.Lock()
	if f.refs == nil {
		f.refs = map[refsKey]*refsListing{}
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
		l.refs, l.err = f.list(ctx, g, auth, am)
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

// list asks the server for the repository's refs; the error says what to fix.
func (f *Fetcher) list(ctx context.Context, g Git, auth *Auth, am transport.AuthMethod) ([]*plumbing.Reference, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout())
	defer cancel()
	ctx, c := f.newCall(ctx, g)
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{g.RepoURL}})
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: am, PeelingOption: git.AppendPeeled})
	if err != nil {
		return nil, gitError(g, auth, c, err)
	}
	return refs, nil
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
			return "", "", permanent(FieldRevision, "%s advertises no HEAD: set a branch, tag or full commit SHA", g.RepoURL)
		}
		if head.Type() == plumbing.SymbolicReference {
			if c, ok := commitOf(head.Target()); ok {
				return head.Target(), c, nil
			}
			// The server names the target: shown bounded and without control characters.
			return "", "", permanent(FieldRevision, "HEAD of %s points to %q, which does not exist: set a branch, tag or full commit SHA", g.RepoURL, clean(head.Target().String(), 200))
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
	return "", "", permanent(FieldRevision, "revision %q not found in %s: use a branch, tag or full commit SHA", clean(rev, 200), g.RepoURL)
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
		return nil, permanent(FieldRepoURL, "repoURL %s: %s", quoteURL(repoURL), clean(err.Error(), 200))
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
			return nil, permanent(FieldSecretRef, "sshPrivateKey: %s", clean(err.Error(), 200))
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
		return gitssh.HostKeyCallbackHelper{}, permanent(FieldSecretRef, "knownHosts: %s", clean(err.Error(), 200))
	}
	if port == 0 {
		port = 22
	}
	return gitssh.HostKeyCallbackHelper{
		HostKeyCallback:   db.HostKeyCallback(),
		HostKeyAlgorithms: db.HostKeyAlgorithms(net.JoinHostPort(host, strconv.Itoa(port))),
	}, nil
}

// gitError says which field a git failure is about and whether it repeats. Its words are
// ours: an HTTP failure is its status code and reason phrase, never the body (the transport
// drops it before go-git reads it), and any other text of the failure, which may be a
// server's, is shown bounded and without control characters.
func gitError(g Git, auth *Auth, c *call, err error) error {
	if e := c.failure(); e != nil {
		return e // a redirect or a bound refused by this package: go-git's error only follows from it
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	repo := g.RepoURL // normalised: never a credential
	overHTTP := strings.HasPrefix(repo, "http")
	status := func(code int) string {
		if overHTTP {
			return " (" + statusText(code) + ")"
		}
		return ""
	}
	detail := clean(err.Error(), 300)
	var keyErr *knownhosts.KeyError
	msg := err.Error()
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired) || strings.Contains(msg, "unable to authenticate"):
		if auth == nil {
			return &Error{Field: FieldSecretRef, Permanent: true, Err: sayf(err, "%s requires authentication%s: set secretRef to a Secret with username and password, token, or sshPrivateKey", repo, status(401))}
		}
		return &Error{Field: FieldSecretRef, Permanent: true, Err: sayf(err, "authentication to %s failed%s: check the Secret's credentials", repo, status(401))}
	case errors.Is(err, transport.ErrAuthorizationFailed):
		return &Error{Field: FieldSecretRef, Permanent: true, Err: sayf(err, "%s denied access with these credentials%s", repo, status(403))}
	case errors.As(err, &keyErr) || strings.Contains(msg, "knownhosts:"):
		return &Error{Field: FieldSecretRef, Permanent: true, Err: sayf(err, "host key of %s does not match knownHosts: add the server's current key to the Secret's knownHosts (%s)", repo, detail)}
	case errors.As(err, &git.NoMatchingRefSpecError{}) || errors.Is(err, plumbing.ErrReferenceNotFound):
		return &Error{Field: FieldRevision, Permanent: true, Err: sayf(err, "revision %q not found in %s: use a branch, tag or full commit SHA", clean(g.Revision, 200), repo)}
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return &Error{Field: FieldRepoURL, Permanent: true, Err: sayf(err, "repository %s not found%s (or these credentials cannot see it)", repo, status(404))}
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return &Error{Field: FieldRepoURL, Permanent: true, Err: sayf(err, "repository %s is empty", repo)}
	case isTLSFailure(err):
		return &Error{Field: FieldRepoURL, Permanent: true, Err: sayf(err, "TLS to %s: %s", repo, detail)}
	}
	if code := httpStatus(err); code != 0 {
		if code >= 400 && code < 500 && code != 408 && code != 429 {
			return &Error{Field: FieldRepoURL, Permanent: true, Err: sayf(err, "%s answered %s", repo, statusText(code))}
		}
		return &Error{Field: FieldRepoURL, Err: sayf(err, "fetching %s: the server answered %s", repo, statusText(code))}
	}
	// Anything else (network, server errors, timeouts, broken packs) may pass: retry.
	return &Error{Field: FieldRepoURL, Err: sayf(err, "fetching %s: %s", repo, detail)}
}

// repoKey names a repository's cache directory (of its normalised URL); hashing keeps odd
// characters of the URL out of the filesystem.
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
// .git). The same (team, repoURL, commit) is fetched once: later calls answer from the cache
// without network. A branch or tag that still points at commit is fetched shallow (depth
// 1); otherwise the commit itself is asked for when the server allows, else the whole
// repository is fetched.
func (f *Fetcher) Checkout(ctx context.Context, g Git, auth *Auth, commit string) (string, error) {
	n, s, err := normalizeRepoURL(g.RepoURL)
	if err != nil {
		return "", err
	}
	g.RepoURL = n
	if !fullSHA.MatchString(commit) {
		return "", permanent(FieldRevision, "commit %q is not a full 40-hex SHA", clean(commit, 100))
	}
	if f.CacheDir == "" {
		return "", errors.New("appsource: Fetcher.CacheDir is not set")
	}
	commit = strings.ToLower(commit)
	teamDir, err := f.privateDir("teams", teamDirName(g.Team))
	if err != nil {
		return "", cacheError(err)
	}
	repoDir := filepath.Join(teamDir, repoKey(g.RepoURL))
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
	if _, err := f.privateDir("teams", teamDirName(g.Team), repoKey(g.RepoURL)); err != nil {
		return "", cacheError(err)
	}
	// Everything is written under a temp name and renamed into place only when complete, so a
	// crash or a bound never leaves a directory named after a commit that is half checked out.
	tmp, err := os.MkdirTemp(repoDir, ".tmp-"+commit[:12]+"-")
	if err != nil {
		return "", cacheError(err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o700); err != nil {
		return "", cacheError(err)
	}
	tree := filepath.Join(tmp, "tree")
	size, err := f.fetchTree(ctx, g, auth, am, commit, filepath.Join(tmp, "git"), tree)
	if err != nil {
		return "", cacheError(err)
	}
	if err := makePrivate(tree); err != nil {
		return "", cacheError(err)
	}
	if err := os.Rename(tree, final); err != nil {
		// Another process sharing the cache may have won the race; its tree is as good.
		if fi, serr := os.Stat(final); serr != nil || !fi.IsDir() {
			return "", cacheError(err)
		}
	}
	f.setSize(final, size)
	f.evict(repoDir, commit)
	f.enforceQuota(teamDir, final)
	return final, nil
}

// objectCacheBytes bounds go-git's cache of decoded objects per fetch (its default is 96 MiB,
// times the fetches running at once).
const objectCacheBytes = 16 * cache.MiByte

// fetchTree fetches commit into a fresh repository at gitDir and checks it out into tree,
// returning the bytes of its files.
func (f *Fetcher) fetchTree(ctx context.Context, g Git, auth *Auth, am transport.AuthMethod, commit, gitDir, tree string) (int64, error) {
	want := plumbing.NewHash(commit)
	var attempts []fetchAttempt
	if !fullSHA.MatchString(g.Revision) {
		refs, err := f.list(ctx, g, auth, am)
		if err != nil {
			return 0, err
		}
		name, c, err := pickRef(refs, g)
		if err != nil {
			return 0, err
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
			return 0, err
		}
		if err := os.RemoveAll(tree); err != nil {
			return 0, err
		}
		fctx, cancel := context.WithTimeout(ctx, f.timeout())
		fctx, c := f.newCall(fctx, g)
		store := filesystem.NewStorage(osfs.New(gitDir, osfs.WithBoundOS()), cache.NewObjectLRU(objectCacheBytes))
		repo, err := git.Init(guardedStorage{Storage: store, c: c}, osfs.New(tree, osfs.WithBoundOS()))
		if err != nil {
			cancel()
			return 0, err
		}
		rem, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{g.RepoURL}})
		if err != nil {
			cancel()
			return 0, err
		}
		specs := []config.RefSpec{config.RefSpec(a.spec)}
		for _, m := range a.more {
			specs = append(specs, config.RefSpec(m))
		}
		err = rem.FetchContext(fctx, &git.FetchOptions{RefSpecs: specs, Depth: a.depth, Auth: am, Tags: git.NoTags})
		cancel()
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			ge := gitError(g, auth, c, err)
			// A server that does not hand out commits by SHA (it may just hang up on the
			// request), or a ref that moved since it was listed: the next, wider attempt may
			// still find the commit. Only an unreachable server, bad credentials, or a
			// refusal of this package (a redirect, a bound) end here.
			if i < len(attempts)-1 && c.failure() == nil && !unreachable(ctx, err) && !isField(ge, FieldSecretRef) {
				continue
			}
			return 0, ge
		}
		if _, err := repo.CommitObject(want); err != nil {
			continue
		}
		size, err := f.measure(repo, want)
		if err != nil {
			return 0, err
		}
		w, err := repo.Worktree()
		if err != nil {
			return 0, err
		}
		if err := w.Checkout(&git.CheckoutOptions{Hash: want, Force: true}); err != nil {
			// go-git refuses trees that would write outside the worktree (.., .git, paths
			// through symlinks): that commit will never check out.
			bad := strings.Contains(err.Error(), "invalid path")
			return 0, &Error{Field: FieldRevision, Permanent: bad, Err: sayf(err, "checking out %s: %s", commit, clean(err.Error(), 300))}
		}
		return size, os.RemoveAll(filepath.Join(tree, ".git"))
	}
	return 0, permanent(FieldRevision, "commit %s not found in %s: the revision may have been force-pushed or deleted; use a branch, tag or full commit SHA that exists", commit, g.RepoURL)
}

// measure sums the files commit would check out from their object headers, before a byte is
// written: one file over MaxFileBytes, more files than MaxObjects, or more bytes than
// MaxCheckoutBytes (or the team's whole share of the cache) refuse the commit.
func (f *Fetcher) measure(repo *git.Repository, want plumbing.Hash) (int64, error) {
	b := f.bounds()
	c, err := repo.CommitObject(want)
	if err != nil {
		return 0, err
	}
	tree, err := c.Tree()
	if err != nil {
		return 0, err
	}
	limit, bound, flag := b.MaxCheckoutBytes, "the bound on one checkout", FlagMaxCheckoutMiB
	if b.TeamCacheBytes < limit {
		limit, bound, flag = b.TeamCacheBytes, "the team's share of the git cache", FlagTeamCacheMiB
	}
	short := want.String()[:12]
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	var total int64
	files := 0
	for {
		name, e, err := walker.Next()
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return 0, err
		}
		if e.Mode == filemode.Dir || e.Mode == filemode.Submodule {
			continue
		}
		if files++; files > b.MaxObjects {
			return 0, boundError(fmt.Sprintf("commit %s has more than %d files", short, b.MaxObjects), "the bound on objects", int64(b.MaxObjects), FlagMaxObjects)
		}
		size, err := repo.Storer.EncodedObjectSize(e.Hash)
		if err != nil {
			return 0, err
		}
		if size > b.MaxFileBytes {
			return 0, boundError(fmt.Sprintf("file %q of commit %s is %s", clean(name, 200), short, sizeOf(size)), "the bound on one file", b.MaxFileBytes, FlagMaxFileMiB)
		}
		if total += size; total > limit {
			return 0, boundError(fmt.Sprintf("commit %s has more than %s of files", short, sizeOf(limit)), bound, limit, flag)
		}
	}
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
