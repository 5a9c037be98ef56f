package historian

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flotilla-dev/flotilla/internal/audit"
	"github.com/flotilla-dev/flotilla/internal/history"
)

// streamAt is an audit stream that has delivered writes up to a time.
type streamAt struct {
	upTo   time.Time
	writes map[audit.Ref][]audit.Write // oldest first
}

func (s *streamAt) Last(ref audit.Ref, notAfter time.Time) (audit.Write, bool) {
	ws := s.writes[ref]
	for i := len(ws) - 1; i >= 0; i-- {
		if !ws[i].Time.After(notAfter) && !ws[i].Time.After(s.upTo) {
			return ws[i], true
		}
	}
	return audit.Write{}, false
}

func (s *streamAt) CaughtUp(t time.Time) bool { return s.upTo.After(t) }

// A record written before the stream delivered the write behind it is named once it does:
// the author of the change (not a later writer), and never past the wait.
func TestRecordsAreNamedWhenTheStreamDelivers(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakePassiveClock(t0)
	web := audit.Ref{Group: "apps", Resource: "deployments", Namespace: "a", Name: "web"}
	stream := &streamAt{upTo: t0.Add(-time.Second), writes: map[audit.Ref][]audit.Write{web: {
		{User: "admin", Time: t0.Add(-time.Hour)},
		{User: "alice", Time: t0.Add(-100 * time.Millisecond)}, // the change the revision recorded
		{User: "carol", Time: t0.Add(2 * time.Second)},         // a later change
	}}}
	store := &memStore{recs: map[string]history.Record{}}
	h := &Historian{Store: store, Writers: stream, Clock: clock, Reader: fake.NewClientBuilder().Build()}
	for _, id := range []string{"release", "stale"} {
		if _, err := store.Append(ctx, history.Record{ID: id, Actor: "manager kubectl"}); err != nil {
			t.Fatal(err)
		}
	}
	h.await([]unnamed{
		{id: "release", query: actorQuery{refs: []audit.Ref{web}, notAfter: t0}, provisional: "manager kubectl"},
		{id: "stale", query: actorQuery{refs: []audit.Ref{{Name: "gone"}}, notAfter: t0, otherwise: "nobody"}, provisional: "manager kubectl"},
	})

	h.nameWaiting(ctx)
	if a := store.recs["release"].Actor; a != "manager kubectl" {
		t.Fatalf("named %q before the stream delivered the write", a)
	}
	if len(h.unnamed) != 2 {
		t.Fatalf("%d records waiting, want 2", len(h.unnamed))
	}

	stream.upTo = t0.Add(3 * time.Second) // alice's and carol's writes have arrived
	h.nameWaiting(ctx)
	if a := store.recs["release"].Actor; a != "alice" {
		t.Errorf("actor %q, want alice (carol wrote after the revision)", a)
	}
	if a := store.recs["stale"].Actor; a != "nobody" {
		t.Errorf("actor %q, want the query's otherwise", a)
	}
	if len(h.unnamed) != 0 {
		t.Errorf("%d records still waiting", len(h.unnamed))
	}

	// A stream that never catches up: the record keeps its provisional actor after the wait.
	stream.upTo = t0
	h.await([]unnamed{{id: "release", query: actorQuery{refs: []audit.Ref{web}, notAfter: t0.Add(time.Minute)}, provisional: "x"}})
	clock.SetTime(t0.Add(time.Minute + auditWait))
	h.nameWaiting(ctx)
	if len(h.unnamed) != 0 {
		t.Errorf("a record waits past auditWait")
	}
}
