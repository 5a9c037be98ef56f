package history

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pressly/goose/v3"
)

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrations embed.FS

// migrationsTable is goose's version table, named for this package so that a PostgreSQL
// database shared with other goose users keeps the versions apart.
const migrationsTable = "history_migrations"

func migrate(ctx context.Context, db *sql.DB, dialect goose.Dialect, dir string, opts ...goose.ProviderOption) error {
	fsys, err := fs.Sub(migrations, "migrations/"+dir)
	if err != nil {
		return err
	}
	opts = append(opts, goose.WithTableName(migrationsTable), goose.WithDisableGlobalRegistry(true))
	p, err := goose.NewProvider(dialect, db, fsys, opts...)
	if err != nil {
		return err
	}
	// Not p.Close: it would close db.
	_, err = p.Up(ctx)
	return err
}

// columns is the order of every SELECT and INSERT.
const columns = "id, occurred_at, team, application, api_group, kind, namespace, name, cluster, " +
	"from_revision, to_revision, images, git_commit, cause, cause_detail, actor, outcome, message"

const numColumns = 18

// appendBatch rows per INSERT: 18*200 parameters stay far below SQLite's 32766 and
// PostgreSQL's 65535.
const appendBatch = 200

// defaultPruneBatch rows per DELETE, each its own transaction, so a large prune never holds
// the (SQLite: only) writer for long.
const defaultPruneBatch = 5000

// backend is what differs between SQLite and PostgreSQL; the SQL itself is shared.
type backend struct {
	name  string // "sqlite" or "postgres"
	where string // path or host/database, for error messages; never a password
	// positional: "?" placeholders. SQLite parses "$N" as a name, looked up linearly: an
	// INSERT of 200 rows spent 90% of its time there.
	positional bool
	// timeArg turns a time into the occurred_at column's value.
	timeArg func(time.Time) any
	// classify names a known failure ("disk full") and tells whether it is ErrUnavailable.
	classify func(error) (detail string, unavailable bool)
	// beforeClose runs on the writer before Close (SQLite: PRAGMA optimize).
	beforeClose func(*sql.DB)
}

type sqlStore struct {
	b backend
	w *sql.DB // writes and migrations
	r *sql.DB // reads; the same as w except for a SQLite file

	pruneBatch int // 0: defaultPruneBatch; tests lower it
}

func (s *sqlStore) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		// The caller gave up: not the database's fault.
		if errors.Is(err, cerr) {
			return fmt.Errorf("history: %s: %w", op, err)
		}
		return fmt.Errorf("history: %s: %w: %w", op, cerr, err)
	}
	detail, unavailable := s.b.classify(err)
	msg := fmt.Sprintf("history: %s: %s database %s", op, s.b.name, s.b.where)
	if detail != "" {
		msg += ": " + detail
	}
	return &dbError{msg: msg, err: err, unavailable: unavailable}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("history: "+format+": %w", append(args, ErrInvalid)...)
}

// args collects query parameters and hands out their placeholders.
type args struct {
	vals       []any
	positional bool
}

func (s *sqlStore) args() *args { return &args{positional: s.b.positional} }

func (a *args) add(v any) string {
	a.vals = append(a.vals, v)
	if a.positional {
		return "?"
	}
	return "$" + strconv.Itoa(len(a.vals))
}

// where renders f, and the keyset position after when not nil, as a WHERE clause ("" for
// none); placeholders in text order, as SQLite's "?" need. The caller handles an empty
// Namespaces.
// where builds the WHERE clause of f; records of the excluded causes (what happened, not what
// runs, for Latest) are left out.
func (s *sqlStore) where(a *args, f Filter, after *Cursor, excluded ...string) string {
	var conds []string
	if !f.Since.IsZero() {
		conds = append(conds, "occurred_at >= "+a.add(s.b.timeArg(f.Since)))
	}
	if !f.Until.IsZero() {
		conds = append(conds, "occurred_at < "+a.add(s.b.timeArg(f.Until)))
	}
	if f.Namespaces != nil {
		ns := slices.Clone(f.Namespaces)
		slices.Sort(ns)
		ns = slices.Compact(ns)
		ph := make([]string, len(ns))
		for i, n := range ns {
			ph[i] = a.add(n)
		}
		conds = append(conds, "team IN ("+strings.Join(ph, ", ")+")")
	}
	for _, c := range []struct{ col, v string }{
		{"team", f.Team}, {"application", f.Application}, {"cluster", f.Cluster},
		{"cause", f.Cause}, {"kind", f.Kind}, {"name", f.Name},
	} {
		if c.v != "" {
			conds = append(conds, c.col+" = "+a.add(c.v))
		}
	}
	for _, c := range excluded {
		conds = append(conds, "cause <> "+a.add(c))
	}
	if after != nil {
		// A row value: both backends range-scan the (…, occurred_at DESC, id DESC) indexes.
		conds = append(conds, "(occurred_at, id) < ("+a.add(s.b.timeArg(after.Time))+", "+a.add(after.ID)+")")
	}
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

func (s *sqlStore) Append(ctx context.Context, recs ...Record) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	// Sorted by ID so that concurrent appends of overlapping IDs take PostgreSQL's row locks
	// in the same order and cannot deadlock.
	recs = slices.Clone(recs)
	slices.SortFunc(recs, func(x, y Record) int { return strings.Compare(x.ID, y.ID) })
	vals := make([]any, 0, len(recs)*numColumns)
	for i, r := range recs {
		if r.ID == "" || utf8.RuneCountInString(r.ID) > MaxIDLength {
			return 0, invalid("record %d: ID must have 1..%d characters", i, MaxIDLength)
		}
		if r.Time.IsZero() {
			return 0, invalid("record %q: Time is zero", r.ID)
		}
		// PostgreSQL refuses these in text and SQLite would store them: refuse both alike.
		for _, v := range append([]string{r.ID, r.Team, r.Application, r.Group, r.Kind, r.Namespace, r.Name,
			r.Cluster, r.Commit, r.Cause, r.CauseDetail, r.Actor, r.Outcome, r.Message}, r.Images...) {
			if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
				return 0, invalid("record %q: a field is not valid UTF-8 or holds a NUL byte", r.ID)
			}
		}
		images := "[]"
		if len(r.Images) > 0 {
			b, err := json.Marshal(r.Images)
			if err != nil {
				return 0, err
			}
			images = string(b)
		}
		vals = append(vals, r.ID, s.b.timeArg(r.Time), r.Team, r.Application, r.Group, r.Kind,
			r.Namespace, r.Name, r.Cluster, r.FromRevision, r.ToRevision, images, r.Commit,
			r.Cause, r.CauseDetail, r.Actor, r.Outcome, r.Message)
	}

	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, s.wrap(ctx, "append", err)
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit; SQLite may have rolled back already
	inserted := 0
	for start := 0; start < len(recs); start += appendBatch {
		n := min(appendBatch, len(recs)-start)
		res, err := tx.ExecContext(ctx, s.insertSQL(n), vals[start*numColumns:(start+n)*numColumns]...)
		if err != nil {
			return 0, s.wrap(ctx, "append", err)
		}
		affected, err := res.RowsAffected()
		if err != nil {
			return 0, s.wrap(ctx, "append", err)
		}
		inserted += int(affected)
	}
	if err := tx.Commit(); err != nil {
		return 0, s.wrap(ctx, "append", err)
	}
	return inserted, nil
}

func (s *sqlStore) insertSQL(rows int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO records (" + columns + ") VALUES ")
	a := s.args()
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range numColumns {
			if c > 0 {
				b.WriteString(", ")
			}
			b.WriteString(a.add(nil))
		}
		b.WriteByte(')')
	}
	b.WriteString(" ON CONFLICT (id) DO NOTHING")
	return b.String()
}

func (s *sqlStore) List(ctx context.Context, f Filter, after *Cursor, limit int) (Page, error) {
	if limit < 1 || limit > MaxLimit {
		return Page{}, invalid("limit %d is out of range 1..%d", limit, MaxLimit)
	}
	if f.Namespaces != nil && len(f.Namespaces) == 0 {
		return Page{}, nil
	}
	a := s.args()
	q := "SELECT " + columns + " FROM records" + s.where(a, f, after) +
		" ORDER BY occurred_at DESC, id DESC LIMIT " + strconv.Itoa(limit+1)
	recs, err := s.query(ctx, q, a)
	if err != nil {
		return Page{}, s.wrap(ctx, "list", err)
	}
	var p Page
	if len(recs) > limit {
		recs = recs[:limit]
		last := recs[limit-1]
		p.Next = &Cursor{Time: last.Time, ID: last.ID}
	}
	p.Records = recs
	return p, nil
}

func (s *sqlStore) Latest(ctx context.Context, f Filter) ([]Record, error) {
	if f.Namespaces != nil && len(f.Namespaces) == 0 {
		return nil, nil
	}
	a := s.args()
	// The window sorts narrow rows (key and id) only; full rows are read for the winners.
	q := "SELECT " + columns + " FROM records WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER (" +
		"PARTITION BY name, kind, namespace, api_group, cluster ORDER BY occurred_at DESC, id DESC) AS rn " +
		"FROM records" + s.where(a, f, nil, CauseDrift) + ") ranked WHERE rn = 1)"
	recs, err := s.query(ctx, q, a)
	if err != nil {
		return nil, s.wrap(ctx, "latest", err)
	}
	// Sorted here rather than in SQL so both backends use byte order.
	slices.SortFunc(recs, func(x, y Record) int {
		return cmp.Or(strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Name, y.Name),
			strings.Compare(x.Kind, y.Kind), strings.Compare(x.Group, y.Group),
			strings.Compare(x.Cluster, y.Cluster))
	})
	return recs, nil
}

func (s *sqlStore) query(ctx context.Context, q string, a *args) ([]Record, error) {
	rows, err := s.r.QueryContext(ctx, q, a.vals...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var recs []Record
	for rows.Next() {
		var r Record
		var images string
		if err := rows.Scan(&r.ID, timeScanner{&r.Time}, &r.Team, &r.Application, &r.Group, &r.Kind,
			&r.Namespace, &r.Name, &r.Cluster, &r.FromRevision, &r.ToRevision, &images, &r.Commit,
			&r.Cause, &r.CauseDetail, &r.Actor, &r.Outcome, &r.Message); err != nil {
			return nil, err
		}
		if images != "" && images != "[]" {
			if err := json.Unmarshal([]byte(images), &r.Images); err != nil {
				return nil, fmt.Errorf("record %q: images: %w", r.ID, err)
			}
		}
		recs = append(recs, r)
	}
	return recs, rows.Err()
}

// timeScanner reads occurred_at: Unix microseconds from SQLite, a timestamptz from PostgreSQL.
type timeScanner struct{ t *time.Time }

func (ts timeScanner) Scan(v any) error {
	switch x := v.(type) {
	case int64:
		*ts.t = time.UnixMicro(x).UTC()
	case time.Time:
		*ts.t = x.UTC()
	default:
		return fmt.Errorf("occurred_at: unexpected %T", v)
	}
	return nil
}

func (s *sqlStore) Prune(ctx context.Context, maxAge time.Duration, maxCount int) (int64, error) {
	if maxAge < 0 || maxCount < 0 {
		return 0, invalid("prune: maxAge %s and maxCount %d must not be negative", maxAge, maxCount)
	}
	var deleted int64
	if maxAge > 0 {
		a := s.args()
		n, err := s.deleteBatches(ctx, "occurred_at < "+a.add(s.b.timeArg(time.Now().Add(-maxAge))), a)
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	if maxCount > 0 {
		// Per team: one team's volume never pushes another's history out.
		teams, err := s.teams(ctx)
		if err != nil {
			return deleted, err
		}
		for _, team := range teams {
			n, err := s.pruneTeam(ctx, team, maxCount)
			deleted += n
			if err != nil {
				return deleted, err
			}
		}
	}
	return deleted, nil
}

// teams lists the teams that have records (records_team_time makes it an index walk).
func (s *sqlStore) teams(ctx context.Context) ([]string, error) {
	rows, err := s.w.QueryContext(ctx, "SELECT DISTINCT team FROM records")
	if err != nil {
		return nil, s.wrap(ctx, "prune", err)
	}
	defer rows.Close()
	var teams []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, s.wrap(ctx, "prune", err)
		}
		teams = append(teams, t)
	}
	return teams, s.wrap(ctx, "prune", rows.Err())
}

// pruneTeam deletes all but the team's newest maxCount records.
func (s *sqlStore) pruneTeam(ctx context.Context, team string, maxCount int) (int64, error) {
	// The newest record past the kept ones; it and everything older of the team goes. OFFSET
	// is fine here: one index walk per prune, not per page.
	var t time.Time
	var id string
	a := s.args()
	err := s.w.QueryRowContext(ctx, "SELECT occurred_at, id FROM records WHERE team = "+a.add(team)+" ORDER BY occurred_at DESC, id DESC LIMIT 1 OFFSET "+
		strconv.Itoa(maxCount), a.vals...).Scan(timeScanner{&t}, &id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, s.wrap(ctx, "prune", err)
	}
	a = s.args()
	return s.deleteBatches(ctx, "team = "+a.add(team)+" AND (occurred_at, id) <= ("+a.add(s.b.timeArg(t))+", "+a.add(id)+")", a)
}

func (s *sqlStore) deleteBatches(ctx context.Context, cond string, a *args) (int64, error) {
	batch := cmp.Or(s.pruneBatch, defaultPruneBatch)
	q := "DELETE FROM records WHERE id IN (SELECT id FROM records WHERE " + cond + " LIMIT " + strconv.Itoa(batch) + ")"
	var deleted int64
	for {
		res, err := s.w.ExecContext(ctx, q, a.vals...)
		if err != nil {
			return deleted, s.wrap(ctx, "prune", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return deleted, s.wrap(ctx, "prune", err)
		}
		deleted += n
		if n < int64(batch) {
			return deleted, nil
		}
	}
}

func (s *sqlStore) SetActor(ctx context.Context, id, actor string) error {
	a := s.args()
	q := "UPDATE records SET actor = " + a.add(actor) + " WHERE id = " + a.add(id)
	_, err := s.w.ExecContext(ctx, q, a.vals...)
	return s.wrap(ctx, "setting a record's actor", err)
}

func (s *sqlStore) Ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return s.wrap(ctx, "ping", err)
	}
	if s.r != s.w {
		if err := s.r.PingContext(ctx); err != nil {
			return s.wrap(ctx, "ping", err)
		}
	}
	return nil
}

func (s *sqlStore) Close() error {
	if s.b.beforeClose != nil {
		s.b.beforeClose(s.w)
	}
	var errs []error
	if s.r != s.w {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	return errors.Join(errs...)
}
