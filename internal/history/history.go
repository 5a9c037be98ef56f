package history

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Record is one change of what runs in a member cluster.
type Record struct {
	// ID is the producer's idempotency key (1..128 characters): appending the same ID twice
	// stores one record.
	ID string
	// Time is when the change happened; stored in UTC with microsecond precision.
	Time time.Time
	// Team is the control-plane namespace of the template ("" for cluster-scoped).
	Team string
	// Application is the Application the template belongs to, "" if none.
	Application string
	// Group, Kind, Namespace and Name identify the template.
	Group, Kind, Namespace, Name string
	Cluster                      string
	// FromRevision and ToRevision are 0 for none (first apply, removal).
	FromRevision, ToRevision int64
	Images                   []string
	Commit                   string
	// Cause is release, rollback, failover, application-failover, placement, suspend,
	// unmanage, manage, adoption, apply or removal; the store does not check it.
	Cause string
	// CauseDetail says more, e.g. "release web-deployment-r2 wave 2/3".
	CauseDetail string
	// Actor is the user behind the change, if known.
	Actor string
	// Outcome is applied, healthy, rolled-back, failed or removed.
	Outcome string
	Message string
}

// Filter selects records; zero fields match everything.
type Filter struct {
	// Since is inclusive, Until exclusive; zero means open.
	Since, Until time.Time
	// Namespaces is the caller's authorization scope over Record.Team: nil allows all, an
	// empty non-nil slice allows nothing, "" in it allows cluster-scoped templates.
	Namespaces                                    []string
	Team, Application, Cluster, Cause, Kind, Name string
}

// Cursor is the position after which the next page starts, in the order Time desc, ID desc.
type Cursor struct {
	Time time.Time
	ID   string
}

// Page is one page of List; Next is nil when there are no more records.
type Page struct {
	Records []Record
	Next    *Cursor
}

// Store is the history of the fleet. Its methods are safe for concurrent use.
type Store interface {
	// Append stores recs in one transaction; a record whose ID is already stored (or
	// repeated in recs) is skipped and not counted in inserted.
	Append(ctx context.Context, recs ...Record) (inserted int, err error)
	// List returns up to limit (1..MaxLimit) records after the cursor, newest first.
	List(ctx context.Context, f Filter, after *Cursor, limit int) (Page, error)
	// Latest returns the newest record matching f per (Group, Kind, Namespace, Name,
	// Cluster): where a template runs, at which revision, since when (Until: as of then). A
	// removal record means it no longer runs there; a template whose records were all
	// pruned is absent. Sorted by Namespace, Name, Kind, Group, Cluster; unbounded, so
	// callers narrow f.
	Latest(ctx context.Context, f Filter) ([]Record, error)
	// SetActor names the actor of a stored record once it is known (the audit stream can
	// deliver the user after the record was written); an unknown ID is no error.
	SetActor(ctx context.Context, id, actor string) error
	// Prune deletes records older than maxAge, then all but the newest maxCount of each team
	// (so one team's volume never pushes out another's history); 0 means no limit for either.
	Prune(ctx context.Context, maxAge time.Duration, maxCount int) (deleted int64, err error)
	Ping(ctx context.Context) error
	Close() error
}

// MaxLimit is the largest page List returns.
const MaxLimit = 1000

// MaxIDLength is the longest Record.ID, in characters.
const MaxIDLength = 128

var (
	// ErrUnavailable marks errors where the database cannot be reached, is down, or cannot
	// take writes (disk full, read-only): retry later, an HTTP layer answers 503.
	ErrUnavailable = errors.New("history database unavailable")
	// ErrInvalid marks a bad argument (limit, record, retention): an HTTP layer answers 400.
	ErrInvalid = errors.New("invalid argument")
)

// Open connects to the history database the DSN names and migrates it up:
//
//	sqlite:///abs/path/history.db   sqlite://relative/history.db   sqlite::memory:
//	postgres://user@host:5432/db?sslmode=...   postgresql://...
func Open(ctx context.Context, dsn string) (Store, error) {
	return open(ctx, dsn, sqliteOptions{})
}

func open(ctx context.Context, dsn string, so sqliteOptions) (Store, error) {
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite:"), "//")
		return openSQLite(ctx, path, so)
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return openPostgres(ctx, dsn)
	}
	scheme := "empty"
	if i := strings.Index(dsn, ":"); i > 0 {
		scheme = fmt.Sprintf("%q", dsn[:i]) // never echo the rest: it may hold a password
	}
	return nil, fmt.Errorf("history: --history-dsn scheme %s is not supported: use sqlite:///path/to/history.db "+
		"(or sqlite://relative/path.db) or postgres://user@host:5432/dbname (or postgresql://...): %w", scheme, ErrInvalid)
}

// dbError wraps a driver error with what was being done and where; unavailable adds
// ErrUnavailable to its chain.
type dbError struct {
	msg         string
	err         error
	unavailable bool
}

func (e *dbError) Error() string { return e.msg + ": " + e.err.Error() }

func (e *dbError) Unwrap() []error {
	if e.unavailable {
		return []error{e.err, ErrUnavailable}
	}
	return []error{e.err}
}
