// Package pgtest starts a throwaway PostgreSQL server for tests, from Debian's postgresql
// package (or uses FLOTILLA_TEST_POSTGRES_DSN's): the history store's suite and the
// end-to-end tests run on it. It is for tests only and touches nothing but its own
// temporary directory and server.
package pgtest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" for the admin connection
)

// Server is a PostgreSQL server for tests: FLOTILLA_TEST_POSTGRES_DSN's, or a throwaway
// one started from Debian's postgresql package.
type Server struct {
	DSN  string       // a database the tests may create schemas in
	Stop func() error // nil for an external server
}

var schemaSeq atomic.Int64

// Fresh returns the DSN of an empty schema of its own; it is dropped at cleanup.
func (s *Server) Fresh(tb testing.TB) string {
	tb.Helper()
	schema := fmt.Sprintf("history_test_%d_%d", os.Getpid(), schemaSeq.Add(1))
	db, err := sql.Open("pgx", s.DSN)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		if db, err := sql.Open("pgx", s.DSN); err == nil {
			_, _ = db.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE")
			_ = db.Close()
		}
	})
	return withParam(tb, s.DSN, "search_path", schema)
}

func withParam(tb testing.TB, dsn, k, v string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("FLOTILLA_TEST_POSTGRES_DSN must be a postgres:// URL: %v", err)
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}

// Start returns a server for tb, stopped at tb's cleanup. Without binaries it
// fails, or skips when FLOTILLA_SKIP_POSTGRES=1.
func Start(tb testing.TB) *Server {
	tb.Helper()
	if dsn := os.Getenv("FLOTILLA_TEST_POSTGRES_DSN"); dsn != "" {
		return &Server{DSN: dsn}
	}
	bin := postgresBinDir()
	if bin == "" {
		msg := "PostgreSQL server binaries (initdb, postgres) not found in /usr/lib/postgresql/*/bin or PATH: " +
			"install Debian's postgresql package (apt-get install postgresql), or set FLOTILLA_TEST_POSTGRES_DSN " +
			"to a server's postgres:// URL"
		if os.Getenv("FLOTILLA_SKIP_POSTGRES") == "1" {
			tb.Skip("FLOTILLA_SKIP_POSTGRES=1: " + msg)
		}
		tb.Fatal(msg + " (or set FLOTILLA_SKIP_POSTGRES=1 to skip)")
	}

	// initdb and postgres refuse to run as root: run them as nobody, in a directory it owns
	// whose parents it can traverse (t.TempDir's are 0700).
	var cred *syscall.Credential
	tmp := os.TempDir()
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			tb.Fatalf("running as root, PostgreSQL needs an unprivileged user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if !traversable(tmp) {
			tmp = "/tmp"
		}
	}
	dir, err := os.MkdirTemp(tmp, "flotilla-history-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	env := append(os.Environ(), "LC_ALL=C", "LANG=C")

	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Env = env
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		tb.Fatalf("initdb: %v\n%s", err, out)
	}

	port := FreePort(tb)
	var log bytes.Buffer
	// Durability off: a throwaway server, and it makes the suite several times faster.
	srv := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=50")
	srv.Env = env
	srv.Stdout, srv.Stderr = &log, &log
	// Pdeathsig: the server dies with the test binary even if cleanup never runs.
	srv.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		tb.Fatalf("start postgres: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	var stopped atomic.Bool
	stop := func() error {
		if stopped.Swap(true) {
			return nil
		}
		_ = srv.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-exited:
			return nil
		case <-time.After(15 * time.Second):
			_ = srv.Process.Kill()
			<-exited
			return errors.New("postgres did not stop in 15s; killed")
		}
	}
	tb.Cleanup(func() {
		if err := stop(); err != nil {
			tb.Log(err)
		}
	})

	admin := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", port)
	db, err := sql.Open("pgx", admin)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			break
		}
		select {
		case werr := <-exited:
			tb.Fatalf("postgres exited: %v\n%s", werr, log.String())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("postgres not ready after 30s: %v\n%s", err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := db.Exec("CREATE DATABASE history"); err != nil {
		tb.Fatalf("create database: %v", err)
	}
	return &Server{
		DSN:  fmt.Sprintf("postgres://postgres@127.0.0.1:%d/history?sslmode=disable", port),
		Stop: stop,
	}
}

// postgresBinDir finds initdb and postgres: Debian keeps them out of PATH, newest first.
func postgresBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return pgMajor(b) - pgMajor(a) })
	if p, err := exec.LookPath("initdb"); err == nil {
		if p, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(p))
		}
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d
		}
	}
	return ""
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// traversable tells whether others may enter dir and all its parents.
func traversable(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// FreePort is a port nothing listens on now.
func FreePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
