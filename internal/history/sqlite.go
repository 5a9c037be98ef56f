package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite" // pure Go: no cgo in the build
	sqlite3 "modernc.org/sqlite/lib"
)

// private makes the database file (and a WAL or shared-memory file left beside it) readable by
// its owner only: the history names every team's workloads and who changed them. SQLite gives
// the WAL and shared-memory files it creates the database file's mode, so creating the file
// 0600 before SQLite does covers them.
func private(path string) {
	// Best effort: a file that cannot be made or changed here is SQLite's to report, with the
	// classification its errors get.
	if f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		_ = f.Close()
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o077 != 0 {
			_ = os.Chmod(p, fi.Mode().Perm()&0o700)
		}
	}
}

// sqliteOptions are test hooks.
type sqliteOptions struct {
	// pragmas run on the writer connection, e.g. max_page_count(N) to cap the file so a test
	// can fill it.
	pragmas []string
}

// SQLite allows one writer at a time, so writes go through a pool of exactly one connection:
// they queue in Go instead of failing with SQLITE_BUSY, and BEGIN IMMEDIATE takes the write
// lock up front. Reads use a pool of their own, which WAL lets run beside the writer.
const sqliteReaders = 4

func openSQLite(ctx context.Context, path string, so sqliteOptions) (Store, error) {
	if path == "" || strings.Contains(path, "?") {
		return nil, invalid("--history-dsn: sqlite needs a file path without '?', e.g. sqlite:///var/lib/flotilla/history.db")
	}
	memory := path == ":memory:"
	if !memory {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("history: sqlite path %s: %w", path, err)
		}
		path = abs // fixed now, whatever the working directory is later
		private(path)
	}
	b := backend{
		name:       "sqlite",
		where:      path,
		positional: true,
		timeArg: func(t time.Time) any {
			return t.UnixMicro()
		},
		classify: classifySQLite,
		beforeClose: func(db *sql.DB) {
			// Keeps the planner's statistics fresh; cheap, and best effort.
			_, _ = db.Exec("PRAGMA optimize")
		},
	}

	// busy_timeout: wait, not fail, while another process (a backup) holds a lock.
	// foreign_keys: off by default in SQLite; on, so a later migration's keys hold.
	// cache_size: 32 MiB keeps the hot index pages of a large history in memory.
	// temp_store: the statement journal of a multi-row INSERT stays off disk (a fifth of an
	// append's time otherwise). WAL: readers and the writer do not block each other.
	// synchronous stays FULL: a commit survives power loss, the history is an audit trail.
	wq := url.Values{}
	wq.Add("_pragma", "busy_timeout(10000)")
	wq.Add("_pragma", "foreign_keys(1)")
	wq.Add("_pragma", "cache_size(-32768)")
	wq.Add("_pragma", "temp_store(MEMORY)")
	if !memory {
		wq.Add("_pragma", "journal_mode(WAL)")
	}
	for _, p := range so.pragmas {
		wq.Add("_pragma", p)
	}
	wq.Set("_txlock", "immediate")
	w, err := sql.Open("sqlite", path+"?"+wq.Encode())
	if err != nil {
		return nil, fmt.Errorf("history: sqlite database %s: %w", path, err)
	}
	// One connection, never recycled: it is the only writer, and for :memory: it is the
	// database itself.
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := &sqlStore{b: b, w: w, r: w}
	if err := w.PingContext(ctx); err != nil {
		_ = w.Close()
		return nil, s.wrap(ctx, "open", err)
	}
	if err := migrate(ctx, w, goose.DialectSQLite3, "sqlite"); err != nil {
		_ = w.Close()
		return nil, s.wrap(ctx, "migrate", err)
	}
	// Recommended once per long-lived connection: analyzes tables whose statistics are
	// stale. Best effort: the store works without.
	_, _ = w.ExecContext(ctx, "PRAGMA optimize=0x10002")
	if memory {
		return s, nil
	}

	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout(10000)")
	rq.Add("_pragma", "cache_size(-8192)")
	rq.Add("_pragma", "query_only(1)")
	r, err := sql.Open("sqlite", path+"?"+rq.Encode())
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("history: sqlite database %s: %w", path, err)
	}
	r.SetMaxOpenConns(sqliteReaders)
	r.SetMaxIdleConns(sqliteReaders)
	s.r = r
	if err := r.PingContext(ctx); err != nil {
		_ = s.Close()
		return nil, s.wrap(ctx, "open", err)
	}
	return s, nil
}

func classifySQLite(err error) (string, bool) {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return "", false
	}
	switch se.Code() & 0xff { // the primary code of an extended one
	case sqlite3.SQLITE_FULL:
		return "disk full", true
	case sqlite3.SQLITE_READONLY:
		return "read-only", true
	case sqlite3.SQLITE_CANTOPEN:
		return "cannot open the file (does its directory exist and is it writable?)", true
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return "locked by another process", true
	case sqlite3.SQLITE_IOERR:
		return "I/O error", true
	}
	return "", false
}
