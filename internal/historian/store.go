package historian

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/flotilla-dev/flotilla/internal/history"
)

// LazyStore opens the history store in the background and retries until it answers, so a
// database that is down at start delays history, not delivery: until then every call fails
// with history.ErrUnavailable (the API answers 503, the historian retries).
type LazyStore struct {
	store atomic.Pointer[history.Store]
}

// OpenLazy opens dsn, and when the database cannot be reached yet keeps trying in the
// background and returns at once. A DSN that can never work (bad form) is an error now.
func OpenLazy(ctx context.Context, dsn string, log logr.Logger) (*LazyStore, error) {
	l := &LazyStore{}
	s, err := history.Open(ctx, dsn)
	if err == nil {
		l.store.Store(&s)
		return l, nil
	}
	if errors.Is(err, history.ErrInvalid) {
		return nil, err
	}
	log.Error(err, "opening the history store; delivery goes on, history waits")
	go func() {
		for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			s, err := history.Open(ctx, dsn)
			if err == nil {
				l.store.Store(&s)
				log.Info("history store open")
				return
			}
			log.Error(err, "opening the history store; delivery goes on, history waits", "retryIn", delay)
		}
	}()
	return l, nil
}

func (l *LazyStore) get() (history.Store, error) {
	if s := l.store.Load(); s != nil {
		return *s, nil
	}
	return nil, history.ErrUnavailable
}

// Append implements history.Store.
func (l *LazyStore) Append(ctx context.Context, recs ...history.Record) (int, error) {
	s, err := l.get()
	if err != nil {
		return 0, err
	}
	return s.Append(ctx, recs...)
}

// List implements history.Store.
func (l *LazyStore) List(ctx context.Context, f history.Filter, after *history.Cursor, limit int) (history.Page, error) {
	s, err := l.get()
	if err != nil {
		return history.Page{}, err
	}
	return s.List(ctx, f, after, limit)
}

// Latest implements history.Store.
func (l *LazyStore) Latest(ctx context.Context, f history.Filter) ([]history.Record, error) {
	s, err := l.get()
	if err != nil {
		return nil, err
	}
	return s.Latest(ctx, f)
}

// SetActor implements history.Store.
func (l *LazyStore) SetActor(ctx context.Context, id, actor string) error {
	s, err := l.get()
	if err != nil {
		return err
	}
	return s.SetActor(ctx, id, actor)
}

// Prune implements history.Store.
func (l *LazyStore) Prune(ctx context.Context, maxAge time.Duration, maxCount int) (int64, error) {
	s, err := l.get()
	if err != nil {
		return 0, err
	}
	return s.Prune(ctx, maxAge, maxCount)
}

// Ping implements history.Store.
func (l *LazyStore) Ping(ctx context.Context) error {
	s, err := l.get()
	if err != nil {
		return err
	}
	return s.Ping(ctx)
}

// Close implements history.Store.
func (l *LazyStore) Close() error {
	if s := l.store.Load(); s != nil {
		return (*s).Close()
	}
	return nil
}

// Retain prunes the store by age and count every interval until ctx ends.
func Retain(ctx context.Context, s history.Store, maxAge time.Duration, maxCount int, every time.Duration, log logr.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := s.Prune(ctx, maxAge, maxCount); err != nil {
			log.V(1).Info("pruning history", "error", err.Error())
		} else if n > 0 {
			log.Info("pruned history", "records", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
