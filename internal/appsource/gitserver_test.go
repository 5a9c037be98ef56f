package appsource

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

const gitBin = "/usr/bin/git"

func requireGit(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(gitBin); err != nil {
		t.Fatal(gitBin + " is missing: these tests build and serve real repositories with it; install Debian's git (.ci/run does)")
	}
}

// gitEnv keeps the machine's git config out of the tests.
func gitEnv(home string) []string {
	return append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com")
}

// testRepo is a non-bare repository under base/name, served by the servers below as /name.
type testRepo struct {
	t          *testing.T
	base, name string
	dir        string
}

func newTestRepo(t *testing.T) *testRepo {
	t.Helper()
	requireGit(t)
	base := t.TempDir()
	r := &testRepo{t: t, base: base, name: "app", dir: filepath.Join(base, "app")}
	if err := os.Mkdir(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *testRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command(gitBin, args...)
	cmd.Dir = r.dir
	cmd.Env = gitEnv(r.base)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files (content "" deletes) and commits them, returning the commit SHA.
func (r *testRepo) commit(msg string, files map[string]string) string {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.dir, name)
		if content == "" {
			r.git("rm", "-q", name)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
		r.git("add", name)
	}
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// gitDaemon serves base over git:// on 127.0.0.1.
type gitDaemon struct {
	URL  string // git://127.0.0.1:PORT
	cmd  *exec.Cmd
	once sync.Once
}

func startDaemon(t *testing.T, base string) *gitDaemon {
	t.Helper()
	port := strconv.Itoa(freePort(t))
	cmd := exec.Command(gitBin, "daemon", "--reuseaddr", "--base-path="+base, "--export-all",
		"--listen=127.0.0.1", "--port="+port, base)
	cmd.Env = gitEnv(base)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stop kills its per-connection children too
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &gitDaemon{URL: "git://127.0.0.1:" + port, cmd: cmd}
	t.Cleanup(d.stop)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("git daemon did not listen on %s: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *gitDaemon) stop() {
	d.once.Do(func() {
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		_ = d.cmd.Wait()
	})
}

// startHTTPGit serves base over smart HTTP with git http-backend; with user set, it requires
// that basic auth.
func startHTTPGit(t *testing.T, base, user, pass string) *httptest.Server {
	t.Helper()
	backend := &cgi.Handler{
		Path: gitBin,
		Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + base, "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + base},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user != "" {
			u, p, ok := r.BasicAuth()
			if !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// sshGit is an in-process ssh server that runs git upload-pack for public-key clients.
type sshGit struct {
	Addr     string // 127.0.0.1:PORT
	HostKey  ssh.PublicKey
	ClientPK []byte // PEM private key the server accepts
}

func startSSHGit(t *testing.T, base string) *sshGit {
	t.Helper()
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	clientPub, clientPriv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(clientPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := ssh.NewPublicKey(clientPub)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(k.Marshal(), allowed.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveSSH(c, cfg, base)
		}
	}()
	return &sshGit{Addr: ln.Addr().String(), HostKey: hostSigner.PublicKey(), ClientPK: pem.EncodeToMemory(block)}
}

func (s *sshGit) knownHosts(key ssh.PublicKey) []byte {
	return []byte(knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, key) + "\n")
}

func serveSSH(c net.Conn, cfg *ssh.ServerConfig, base string) {
	defer c.Close()
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			return
		}
		go serveSession(ch, creqs, base)
	}
}

func serveSession(ch ssh.Channel, reqs <-chan *ssh.Request, base string) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			_ = req.Reply(req.Type == "env", nil)
			continue
		}
		var p struct{ Cmd string }
		if err := ssh.Unmarshal(req.Payload, &p); err != nil {
			_ = req.Reply(false, nil)
			return
		}
		prog, arg, _ := strings.Cut(p.Cmd, " ")
		if prog != "git-upload-pack" {
			_ = req.Reply(false, nil)
			return
		}
		_ = req.Reply(true, nil)
		dir := filepath.Join(base, filepath.Clean("/"+strings.Trim(arg, "'")))
		cmd := exec.Command(gitBin, "upload-pack", dir)
		cmd.Env = gitEnv(base)
		stdin, _ := cmd.StdinPipe()
		cmd.Stdout = ch
		cmd.Stderr = ch.Stderr()
		status := uint32(0)
		if err := cmd.Start(); err != nil {
			status = 127
		} else {
			go func() { _, _ = io.Copy(stdin, ch); stdin.Close() }()
			if err := cmd.Wait(); err != nil {
				status = 1
			}
		}
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
		return
	}
}

// mustPermanent asserts err is a permanent *Error about field.
func mustPermanent(t *testing.T, err error, field, contains string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *Error about %s, got %T %v", field, err, err)
	}
	if !e.Permanent || IsTransient(err) {
		t.Fatalf("want a permanent error, got transient: %v", err)
	}
	if e.Field != field {
		t.Fatalf("want field %s, got %q: %v", field, e.Field, err)
	}
	if !strings.Contains(err.Error(), contains) {
		t.Fatalf("want error containing %q, got: %v", contains, err)
	}
	return e
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		got[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func mustEqualTree(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	got := readTree(t, dir)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("tree %s:\n got %v\nwant %v", dir, got, want)
	}
}

// gitHTTP serves several repository bases over smart HTTP, each under a URL prefix ("/team-a"
// serves base/app as /team-a/app), behind an optional front that may answer a request itself
// (a redirect, an error with a body). It counts the requests that reach each base.
type gitHTTP struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func startGitHTTP(t *testing.T, bases map[string]string, front func(w http.ResponseWriter, r *http.Request) bool) *gitHTTP {
	t.Helper()
	requireGit(t)
	s := &gitHTTP{hits: map[string]int{}}
	backends := map[string]*cgi.Handler{}
	for prefix, base := range bases {
		backends[prefix] = &cgi.Handler{
			Path: gitBin, Args: []string{"http-backend"}, Root: prefix,
			Env: []string{"GIT_PROJECT_ROOT=" + base, "GIT_HTTP_EXPORT_ALL=1",
				"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + base},
		}
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if front != nil && front(w, r) {
			return
		}
		for prefix, h := range backends {
			if strings.HasPrefix(r.URL.Path, prefix+"/") {
				s.mu.Lock()
				s.hits[prefix]++
				s.mu.Unlock()
				h.ServeHTTP(w, r)
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *gitHTTP) hitsOf(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[prefix]
}

// commitZeros commits a file of size zero bytes, streamed into git (never a file on disk
// nor a buffer in this process): git stores it compressed to a few KiB.
func (r *testRepo) commitZeros(name string, size int64) string {
	r.t.Helper()
	cmd := exec.Command(gitBin, "hash-object", "-w", "--stdin")
	cmd.Dir = r.dir
	cmd.Env = gitEnv(r.base)
	cmd.Stdin = io.LimitReader(zeros{}, size)
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("git hash-object: %v", err)
	}
	r.git("update-index", "--add", "--cacheinfo", "100644,"+strings.TrimSpace(string(out))+","+name)
	r.git("commit", "-q", "-m", "zeros")
	return r.git("rev-parse", "HEAD")
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// noise is n bytes of text that does not compress.
func noise(n int) string {
	b := make([]byte, n*3/4+3)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)[:n]
}
