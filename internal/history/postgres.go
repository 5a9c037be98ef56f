package history

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// PostgreSQL goes through database/sql (pgx's stdlib adapter) rather than pgxpool: the
// queries are shared with SQLite, goose migrates a *sql.DB, and the extra layer costs
// nothing next to a network round trip.

const (
	postgresMaxConns = 8
	// migrationLockID is the advisory lock that makes replicas starting together migrate
	// one after the other.
	migrationLockID = 0x666c6f74696c6c61 // "flotilla"
)

func openPostgres(ctx context.Context, dsn string) (Store, error) {
	cfg, err := pgx.ParseConfig(dsn) // its errors redact the password
	if err != nil {
		return nil, fmt.Errorf("history: --history-dsn: %w: %w", err, ErrInvalid)
	}
	b := backend{
		name:  "postgres",
		where: fmt.Sprintf("%s on %s:%d", cfg.Database, cfg.Host, cfg.Port),
		timeArg: func(t time.Time) any {
			return t.UTC().Truncate(time.Microsecond) // what timestamptz keeps
		},
		classify: classifyPostgres,
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(postgresMaxConns)
	db.SetMaxIdleConns(postgresMaxConns / 2)
	db.SetConnMaxIdleTime(5 * time.Minute)
	db.SetConnMaxLifetime(time.Hour) // follows a failover or DNS change eventually
	s := &sqlStore{b: b, w: db, r: db}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, s.wrap(ctx, "open", err)
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID), lock.WithLockTimeout(1, 300))
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := migrate(ctx, db, goose.DialectPostgres, "postgres", goose.WithSessionLocker(locker)); err != nil {
		_ = db.Close()
		return nil, s.wrap(ctx, "migrate", err)
	}
	return s, nil
}

func classifyPostgres(err error) (string, bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100":
			return "disk full", true
		case pe.Code == "25006": // read_only_sql_transaction: a standby
			return "read-only", true
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			pe.Code == "53300",                                         // too_many_connections
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // shutting down, starting up
			return "", true
		}
		return "", false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		return "cannot connect", true
	case errors.As(err, &ne), errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), pgconn.SafeToRetry(err):
		return "connection lost", true
	}
	return "", false
}
