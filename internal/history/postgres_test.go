package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flotilla-dev/flotilla/internal/history/pgtest"
)

func TestPostgres(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	storeSuite(t, srv.Fresh)

	if srv.Stop == nil {
		return // an external server is not ours to stop
	}
	t.Run("DownIsUnavailable", func(t *testing.T) {
		ctx := context.Background()
		s, err := Open(ctx, srv.Fresh(t))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		if err := srv.Stop(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err = s.Ping(ctx)
		t.Logf("down: %v", err)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Ping after the server stopped: %v, want ErrUnavailable", err)
		}
		_, err = s.List(ctx, Filter{}, nil, 10)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("List after the server stopped: %v, want ErrUnavailable", err)
		}
	})
}

func TestPostgresUnreachable(t *testing.T) {
	t.Parallel()
	port := pgtest.FreePort(t) // closed again: nothing listens
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Open(ctx, fmt.Sprintf("postgres://flotilla:secret@127.0.0.1:%d/history?sslmode=disable&connect_timeout=2", port))
	t.Logf("unreachable: %v", err)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open: %v, want ErrUnavailable", err)
	}
	if bytes.Contains([]byte(err.Error()), []byte("secret")) {
		t.Fatalf("error shows the password: %v", err)
	}
}

func TestClassifyPostgres(t *testing.T) {
	for _, tc := range []struct {
		err         error
		detail      string
		unavailable bool
	}{
		{&pgconn.PgError{Code: "53100"}, "disk full", true},
		{&pgconn.PgError{Code: "25006"}, "read-only", true},
		{&pgconn.PgError{Code: "57P01"}, "", true},
		{&pgconn.PgError{Code: "08006"}, "", true},
		{&pgconn.PgError{Code: "53300"}, "", true},
		{&pgconn.PgError{Code: "23505"}, "", false},
		{&pgconn.PgError{Code: "42P01"}, "", false},
		{fmt.Errorf("wrapped: %w", &net.OpError{Op: "dial", Err: errors.New("refused")}), "connection lost", true},
		{errors.New("something else"), "", false},
	} {
		detail, unavailable := classifyPostgres(tc.err)
		if detail != tc.detail || unavailable != tc.unavailable {
			t.Errorf("classifyPostgres(%v) = %q, %v; want %q, %v", tc.err, detail, unavailable, tc.detail, tc.unavailable)
		}
	}
}
