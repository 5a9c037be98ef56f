package historian

import (
	"context"
	"time"

	"github.com/flotilla-dev/flotilla/internal/audit"
	"github.com/flotilla-dev/flotilla/internal/history"
)

// name gives a record its actor now and, when the writes behind it may still be on their
// way from the audit stream, queues it to be named once they arrive. Records are written at
// once either way: waiting for the stream would merge changes that follow each other fast.
func (h *Historian) name(l *lazyContext, rec *history.Record, cluster string, from, to int64, now time.Time, waiting []unnamed) (string, []unnamed) {
	fixed, q := l.actor(rec.Cause, cluster, from, to, now)
	switch {
	case fixed != "":
		return fixed, waiting
	case q == nil || h.Writers == nil:
		return rec.Actor, waiting
	case h.Writers.CaughtUp(q.notAfter):
		if who := h.resolve(*q); who != "" {
			return who, waiting
		}
		return rec.Actor, waiting
	}
	return rec.Actor, append(waiting, unnamed{id: rec.ID, query: *q, provisional: rec.Actor})
}

// resolve is the newest writer of any of the query's objects, else its otherwise.
func (h *Historian) resolve(q actorQuery) string {
	var newest audit.Write
	for _, ref := range q.refs {
		if w, ok := h.Writers.Last(ref, q.notAfter); ok && w.Time.After(newest.Time) {
			newest = w
		}
	}
	if newest.User != "" {
		return newest.User
	}
	return q.otherwise
}

// await queues stored records for naming, dropping the oldest past maxUnnamed.
func (h *Historian) await(us []unnamed) {
	if len(us) == 0 {
		return
	}
	h.actorsMu.Lock()
	defer h.actorsMu.Unlock()
	h.unnamed = append(h.unnamed, us...)
	if over := len(h.unnamed) - maxUnnamed; over > 0 {
		h.unnamed = h.unnamed[over:]
	}
}

// nameLater names waiting records as the audit stream delivers their writes.
func (h *Historian) nameLater(ctx context.Context) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			h.nameWaiting(ctx)
		}
	}
}

func (h *Historian) nameWaiting(ctx context.Context) {
	h.actorsMu.Lock()
	batch := h.unnamed
	h.unnamed = nil
	h.actorsMu.Unlock()
	if len(batch) == 0 {
		return
	}
	now := h.Clock.Now()
	var keep []unnamed
	for _, u := range batch {
		late := now.Sub(u.query.notAfter)
		if !h.Writers.CaughtUp(u.query.notAfter) {
			if late < auditWait {
				keep = append(keep, u)
			}
			continue
		}
		who := h.resolve(u.query)
		if who == "" || who == u.provisional {
			continue
		}
		if err := h.Store.SetActor(ctx, u.id, who); err != nil && late < 4*auditWait {
			keep = append(keep, u) // the store is down: try again
		}
	}
	if len(keep) > 0 {
		h.heartbeat(ctx, now)
		h.await(keep)
	}
}
