package history

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func sqliteDSN(tb testing.TB) string {
	return "sqlite://" + filepath.Join(tb.TempDir(), "history.db")
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	storeSuite(t, sqliteDSN)
}

func openT(t testing.TB, dsn string) Store {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func mustAppend(t testing.TB, s Store, recs ...Record) int {
	t.Helper()
	n, err := s.Append(context.Background(), recs...)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return n
}

// all pages through every record matching f.
func all(t testing.TB, s Store, f Filter, limit int) []Record {
	t.Helper()
	var out []Record
	var after *Cursor
	for {
		p, err := s.List(context.Background(), f, after, limit)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		out = append(out, p.Records...)
		if p.Next == nil {
			return out
		}
		after = p.Next
	}
}

func ids(recs []Record) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}

// rec is a release of the template in the cluster at t0+hours.
func rec(id string, hours int, team, app, kind, name, cluster, cause string) Record {
	ns := team
	group := "apps"
	if kind == "Service" || kind == "ConfigMap" {
		group = ""
	}
	if team == "" {
		group = "rbac.authorization.k8s.io"
	}
	return Record{
		ID: id, Time: t0.Add(time.Duration(hours) * time.Hour), Team: team, Application: app,
		Group: group, Kind: kind, Namespace: ns, Name: name, Cluster: cluster,
		FromRevision: int64(hours), ToRevision: int64(hours + 1), Cause: cause, Outcome: "applied",
	}
}

// fixture: two teams, a cluster-scoped template, two clusters, one record an hour.
func fixture() []Record {
	return []Record{
		rec("r1", 1, "payments", "checkout", "Deployment", "web", "eu-1", "release"),
		rec("r2", 2, "payments", "checkout", "Deployment", "web", "us-1", "rollback"),
		rec("r3", 3, "payments", "", "Service", "api", "eu-1", "apply"),
		rec("r4", 4, "search", "indexer", "Deployment", "indexer", "eu-1", "failover"),
		rec("r5", 5, "", "", "ClusterRole", "reader", "us-1", "placement"),
		rec("r6", 6, "search", "indexer", "Deployment", "indexer", "us-1", "release"),
	}
}

func storeSuite(t *testing.T, fresh func(testing.TB) string) {
	ctx := context.Background()

	t.Run("AppendRoundTripAndIdempotence", func(t *testing.T) {
		s := openT(t, fresh(t))
		full := Record{
			ID:   "release/web/eu-1/r2",
			Time: time.Date(2026, 3, 1, 13, 14, 15, 123456789, time.FixedZone("CET", 3600)),
			Team: "payments", Application: "checkout", Group: "apps", Kind: "Deployment",
			Namespace: "payments", Name: "web", Cluster: "eu-1", FromRevision: 1, ToRevision: 2,
			Images: []string{"registry.example/web:v2", "registry.example/sidecar:1.0"},
			Commit: "0123abcd", Cause: "release", CauseDetail: "release web-deployment-r2 wave 2/3",
			Actor: "alice@example.com", Outcome: "healthy", Message: "2/2 replicas ready ✓",
		}
		if n := mustAppend(t, s, full, rec("r1", 1, "payments", "checkout", "Deployment", "web", "us-1", "apply")); n != 2 {
			t.Fatalf("inserted %d, want 2", n)
		}
		// Same IDs again (different content is ignored), a new one, and a repeat within one call.
		again := full
		again.Message = "changed"
		n := mustAppend(t, s, again, rec("r1", 9, "x", "", "Service", "x", "x", "x"),
			rec("r7", 7, "payments", "", "Service", "api", "eu-1", "apply"),
			rec("r7", 7, "payments", "", "Service", "api", "eu-1", "apply"))
		if n != 1 {
			t.Fatalf("re-append inserted %d, want 1", n)
		}
		got := all(t, s, Filter{}, 10)
		if diff := cmp.Diff([]string{"r7", "r1", "release/web/eu-1/r2"}, ids(got)); diff != "" {
			t.Fatalf("records (-want +got):\n%s", diff)
		}
		want := full
		want.Time = time.Date(2026, 3, 1, 12, 14, 15, 123456000, time.UTC)
		if diff := cmp.Diff(want, got[2]); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
		if got[2].Time.Location() != time.UTC {
			t.Errorf("Time in %v, want UTC", got[2].Time.Location())
		}
		if n := mustAppend(t, s); n != 0 {
			t.Errorf("empty Append inserted %d", n)
		}
	})

	t.Run("SetActor", func(t *testing.T) {
		s := openT(t, fresh(t))
		mustAppend(t, s, fixture()...)
		if err := s.SetActor(ctx, "r2", "alice"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetActor(ctx, "no-such-record", "bob"); err != nil {
			t.Fatalf("SetActor of an unknown ID: %v", err)
		}
		for _, r := range all(t, s, Filter{}, 10) {
			want := ""
			if r.ID == "r2" {
				want = "alice"
			}
			if r.Actor != want {
				t.Errorf("record %s actor %q, want %q", r.ID, r.Actor, want)
			}
		}
	})

	t.Run("AppendInvalid", func(t *testing.T) {
		s := openT(t, fresh(t))
		good := rec("ok", 1, "payments", "checkout", "Deployment", "web", "eu-1", "release")
		for name, bad := range map[string]Record{
			"empty ID":    {Time: t0},
			"long ID":     {ID: strings.Repeat("x", MaxIDLength+1), Time: t0},
			"zero time":   {ID: "zero"},
			"unicode 129": {ID: strings.Repeat("é", MaxIDLength+1), Time: t0},
			"bad UTF-8":   {ID: "utf8", Time: t0, Message: "\xff"},
			"NUL":         {ID: "nul", Time: t0, Images: []string{"a\x00b"}},
		} {
			if _, err := s.Append(ctx, good, bad); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", name, err)
			}
		}
		if got := all(t, s, Filter{}, 10); len(got) != 0 {
			t.Fatalf("a rejected batch stored %v", ids(got))
		}
		if n := mustAppend(t, s, Record{ID: strings.Repeat("é", MaxIDLength), Time: t0}); n != 1 {
			t.Fatalf("a %d-character ID: inserted %d", MaxIDLength, n)
		}
	})

	t.Run("ListFilters", func(t *testing.T) {
		s := openT(t, fresh(t))
		mustAppend(t, s, fixture()...)
		for _, tc := range []struct {
			name string
			f    Filter
			want []string
		}{
			{"all", Filter{}, []string{"r6", "r5", "r4", "r3", "r2", "r1"}},
			{"team", Filter{Team: "payments"}, []string{"r3", "r2", "r1"}},
			{"application", Filter{Application: "checkout"}, []string{"r2", "r1"}},
			{"cluster", Filter{Cluster: "eu-1"}, []string{"r4", "r3", "r1"}},
			{"cause", Filter{Cause: "release"}, []string{"r6", "r1"}},
			{"kind", Filter{Kind: "Deployment"}, []string{"r6", "r4", "r2", "r1"}},
			{"name", Filter{Name: "web"}, []string{"r2", "r1"}},
			{"since inclusive", Filter{Since: t0.Add(3 * time.Hour)}, []string{"r6", "r5", "r4", "r3"}},
			{"until exclusive", Filter{Until: t0.Add(3 * time.Hour)}, []string{"r2", "r1"}},
			{"since and until", Filter{Since: t0.Add(3 * time.Hour), Until: t0.Add(5 * time.Hour)}, []string{"r4", "r3"}},
			{"since in another zone", Filter{Since: t0.Add(5 * time.Hour).In(time.FixedZone("X", -7*3600))}, []string{"r6", "r5"}},
			{"namespaces nil is all", Filter{Namespaces: nil}, []string{"r6", "r5", "r4", "r3", "r2", "r1"}},
			{"namespaces empty is nothing", Filter{Namespaces: []string{}}, nil},
			{"namespaces one", Filter{Namespaces: []string{"search"}}, []string{"r6", "r4"}},
			{"namespaces with cluster-scoped", Filter{Namespaces: []string{"search", "", "search"}}, []string{"r6", "r5", "r4"}},
			{"namespaces unknown", Filter{Namespaces: []string{"nobody"}}, nil},
			{"namespaces and cluster", Filter{Namespaces: []string{"payments"}, Cluster: "eu-1"}, []string{"r3", "r1"}},
			{"team outside the scope", Filter{Namespaces: []string{"payments"}, Team: "search"}, nil},
			{"several fields", Filter{Team: "search", Cluster: "us-1", Kind: "Deployment", Name: "indexer"}, []string{"r6"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p, err := s.List(ctx, tc.f, nil, 100)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, ids(p.Records), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				if p.Next != nil {
					t.Errorf("Next = %v, want nil", p.Next)
				}
			})
		}
	})

	t.Run("Paging", func(t *testing.T) {
		s := openT(t, fresh(t))
		const n = 2500
		recs := make([]Record, n)
		for i := range recs {
			// Groups of five share a time, so the ID breaks ties across page borders.
			recs[i] = rec(fmt.Sprintf("p%05d", (i*7919)%n), i/5, "payments", "checkout", "Deployment", "web",
				[]string{"eu-1", "us-1"}[i%2], "release")
		}
		if got := mustAppend(t, s, recs...); got != n {
			t.Fatalf("inserted %d, want %d", got, n)
		}
		want := slices.Clone(recs)
		slices.SortFunc(want, func(a, b Record) int {
			if c := b.Time.Compare(a.Time); c != 0 {
				return c
			}
			return strings.Compare(b.ID, a.ID)
		})

		var got []Record
		var after *Cursor
		pages := 0
		for {
			p, err := s.List(ctx, Filter{}, after, 100)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if p.Next != nil && len(p.Records) != 100 {
				t.Fatalf("page %d has %d records and a Next", pages, len(p.Records))
			}
			got = append(got, p.Records...)
			if p.Next == nil {
				break
			}
			after = p.Next
		}
		if pages != 25 {
			t.Errorf("%d pages, want 25", pages)
		}
		if diff := cmp.Diff(ids(want), ids(got)); diff != "" {
			t.Fatalf("paged order (-want +got):\n%s", diff)
		}

		last := got[len(got)-1]
		p, err := s.List(ctx, Filter{}, &Cursor{Time: last.Time, ID: last.ID}, 100)
		if err != nil || len(p.Records) != 0 || p.Next != nil {
			t.Fatalf("after the last record: %d records, Next %v, err %v", len(p.Records), p.Next, err)
		}

		// A filter and a cursor together, with an odd page size.
		var wantEU []string
		for _, r := range want {
			if r.Cluster == "eu-1" {
				wantEU = append(wantEU, r.ID)
			}
		}
		if diff := cmp.Diff(wantEU, ids(all(t, s, Filter{Cluster: "eu-1"}, 37))); diff != "" {
			t.Fatalf("paged eu-1 (-want +got):\n%s", diff)
		}
	})

	t.Run("BadLimit", func(t *testing.T) {
		s := openT(t, fresh(t))
		for _, limit := range []int{0, -1, MaxLimit + 1} {
			_, err := s.List(ctx, Filter{}, nil, limit)
			if err == nil || !strings.Contains(err.Error(), "limit") || !errors.Is(err, ErrInvalid) {
				t.Errorf("limit %d: %v, want an ErrInvalid naming limit", limit, err)
			}
		}
		if _, err := s.List(ctx, Filter{}, nil, MaxLimit); err != nil {
			t.Errorf("limit %d: %v", MaxLimit, err)
		}
	})

	t.Run("Latest", func(t *testing.T) {
		s := openT(t, fresh(t))
		mustAppend(t, s, fixture()...)
		removal := rec("r8", 8, "payments", "checkout", "Deployment", "web", "eu-1", "removal")
		removal.FromRevision, removal.ToRevision, removal.Outcome = 9, 0, "removed"
		mustAppend(t, s,
			rec("r7", 7, "payments", "checkout", "Deployment", "web", "us-1", "release"),
			removal,
			// Same name, other kind or namespace: other templates.
			rec("r9", 1, "payments", "checkout", "Service", "web", "us-1", "apply"),
			rec("r10", 2, "search", "", "Deployment", "web", "us-1", "apply"),
			// Same time as r7: the higher ID is the newer.
			rec("r7b", 7, "payments", "checkout", "Deployment", "web", "us-1", "release"),
		)
		for _, tc := range []struct {
			name string
			f    Filter
			want []string // in (Namespace, Name, Kind, Group, Cluster) order
		}{
			{"fleet", Filter{}, []string{"r5", "r3", "r8", "r7b", "r9", "r4", "r6", "r10"}},
			{"application", Filter{Application: "checkout"}, []string{"r8", "r7b", "r9"}},
			{"namespaces", Filter{Namespaces: []string{"search"}}, []string{"r4", "r6", "r10"}},
			{"namespaces empty", Filter{Namespaces: []string{}}, nil},
			{"cluster", Filter{Cluster: "eu-1"}, []string{"r3", "r8", "r4"}},
			{"as of an earlier time", Filter{Application: "checkout", Until: t0.Add(5 * time.Hour)}, []string{"r1", "r2", "r9"}},
			{"kind and name", Filter{Kind: "Deployment", Name: "web"}, []string{"r8", "r7b", "r10"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := s.Latest(ctx, tc.f)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, ids(got), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			})
		}
		got, err := s.Latest(ctx, Filter{Application: "checkout", Cluster: "eu-1"})
		if err != nil || len(got) != 1 || got[0].ToRevision != 0 || got[0].Outcome != "removed" {
			t.Fatalf("latest of a removed template: %+v, %v", got, err)
		}
		// A drift record says what happened, not what runs: the release before it stays latest.
		drift := rec("r11", 9, "payments", "checkout", "Deployment", "web", "us-1", CauseDrift)
		drift.Outcome = OutcomeCorrected
		mustAppend(t, s, drift)
		got, err = s.Latest(ctx, Filter{Kind: "Deployment", Name: "web", Cluster: "us-1"})
		if err != nil || len(got) != 2 || got[0].ID != "r7b" {
			t.Fatalf("latest with a newer drift record: %v, %v; want r7b first (and r10)", ids(got), err)
		}
		if page, err := s.List(ctx, Filter{Cause: CauseDrift}, nil, 10); err != nil || len(page.Records) != 1 {
			t.Fatalf("listing drift records: %v, %v; want r11", page.Records, err)
		}
	})

	t.Run("Prune", func(t *testing.T) {
		s := openT(t, fresh(t))
		now := time.Now()
		var recs []Record
		for i, age := range []time.Duration{72 * time.Hour, 48 * time.Hour, 47 * time.Hour, time.Hour, time.Minute, 0} {
			recs = append(recs, Record{ID: fmt.Sprintf("age-%d", i), Time: now.Add(-age)})
		}
		mustAppend(t, s, recs...)
		prune := func(maxAge time.Duration, maxCount int) int64 {
			t.Helper()
			n, err := s.Prune(ctx, maxAge, maxCount)
			if err != nil {
				t.Fatalf("Prune(%s, %d): %v", maxAge, maxCount, err)
			}
			return n
		}
		if n := prune(0, 0); n != 0 {
			t.Fatalf("no limits deleted %d", n)
		}
		if n := prune(24*time.Hour, 0); n != 3 {
			t.Fatalf("by age deleted %d, want 3", n)
		}
		if n := prune(0, 2); n != 1 {
			t.Fatalf("by count deleted %d, want 1", n)
		}
		if diff := cmp.Diff([]string{"age-5", "age-4"}, ids(all(t, s, Filter{}, 10))); diff != "" {
			t.Fatalf("kept (-want +got):\n%s", diff)
		}
		if n := prune(0, 5); n != 0 {
			t.Fatalf("count above the total deleted %d", n)
		}
		for _, bad := range [][2]int{{-1, 0}, {0, -1}} {
			if _, err := s.Prune(ctx, time.Duration(bad[0]), bad[1]); !errors.Is(err, ErrInvalid) {
				t.Errorf("Prune%v: %v, want ErrInvalid", bad, err)
			}
		}

		// Many batches, and ties on time at the cut.
		s.(*sqlStore).pruneBatch = 7
		recs = recs[:0]
		for i := range 100 {
			recs = append(recs, Record{ID: fmt.Sprintf("many-%03d", i), Time: now.Add(-time.Duration(i/3) * time.Second)})
		}
		mustAppend(t, s, recs...)
		if n := prune(0, 10); n != 92 {
			t.Fatalf("by count in batches deleted %d, want 92", n)
		}
		want := []string{"many-002", "many-001", "many-000", "age-5", "many-005", "many-004", "many-003", "many-008", "many-007", "many-006"}
		if diff := cmp.Diff(want, ids(all(t, s, Filter{}, 100))); diff != "" {
			t.Fatalf("kept (-want +got):\n%s", diff)
		}
	})

	// A noisy team keeps its own newest records; a quiet team's history is not pushed out.
	t.Run("PrunePerTeam", func(t *testing.T) {
		s := openT(t, fresh(t))
		now := time.Now()
		var recs []Record
		for i := range 50 {
			recs = append(recs, Record{ID: fmt.Sprintf("noisy-%02d", i), Team: "noisy", Time: now.Add(-time.Duration(i) * time.Second)})
		}
		for i := range 3 {
			recs = append(recs, Record{ID: fmt.Sprintf("quiet-%d", i), Team: "quiet", Time: now.Add(-time.Hour - time.Duration(i)*time.Second)})
		}
		mustAppend(t, s, recs...)
		n, err := s.Prune(ctx, 0, 5)
		if err != nil || n != 45 {
			t.Fatalf("Prune(0, 5) deleted %d, %v; want 45 of the noisy team's", n, err)
		}
		if diff := cmp.Diff([]string{"quiet-0", "quiet-1", "quiet-2"}, ids(all(t, s, Filter{Team: "quiet"}, 100))); diff != "" {
			t.Errorf("quiet team kept (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"noisy-00", "noisy-01", "noisy-02", "noisy-03", "noisy-04"}, ids(all(t, s, Filter{Team: "noisy"}, 100))); diff != "" {
			t.Errorf("noisy team kept (-want +got):\n%s", diff)
		}
	})

	t.Run("MigrateTwice", func(t *testing.T) {
		dsn := fresh(t)
		s1, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, s1, fixture()...)
		if err := s1.Close(); err != nil {
			t.Fatal(err)
		}
		s2 := openT(t, dsn)
		if got := len(all(t, s2, Filter{}, 100)); got != 6 {
			t.Fatalf("%d records after reopening, want 6", got)
		}
		var versions int
		if err := s2.(*sqlStore).r.QueryRowContext(ctx, "SELECT count(*) FROM "+migrationsTable+" WHERE version_id > 0").Scan(&versions); err != nil {
			t.Fatal(err)
		}
		if versions != 1 {
			t.Fatalf("%d migrations recorded, want 1", versions)
		}
	})

	t.Run("ConcurrentAppends", func(t *testing.T) {
		s := openT(t, fresh(t))
		const workers, batches, per = 8, 10, 20
		var wg sync.WaitGroup
		inserted := make([]int, workers)
		errs := make([]error, workers)
		for w := range workers {
			wg.Go(func() {
				for b := range batches {
					recs := make([]Record, 0, per+1)
					for i := range per {
						recs = append(recs, Record{ID: fmt.Sprintf("w%d-b%d-%d", w, b, i), Time: t0.Add(time.Duration(i) * time.Second), Cluster: "eu-1"})
					}
					// Every worker also appends the same shared ID per batch: one of them wins.
					recs = append(recs, Record{ID: fmt.Sprintf("shared-%d", b), Time: t0})
					n, err := s.Append(ctx, recs...)
					if err != nil {
						errs[w] = err
						return
					}
					inserted[w] += n
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		const want = workers*batches*per + batches
		total := 0
		for _, n := range inserted {
			total += n
		}
		if total != want {
			t.Errorf("inserted %d in all, want %d", total, want)
		}
		if got := len(all(t, s, Filter{}, MaxLimit)); got != want {
			t.Errorf("%d records stored, want %d", got, want)
		}
	})

	t.Run("CanceledIsNotUnavailable", func(t *testing.T) {
		s := openT(t, fresh(t))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.List(cctx, Filter{}, nil, 10)
		if err == nil || errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("List with a canceled context: %v, want context.Canceled and not ErrUnavailable", err)
		}
	})

	t.Run("Ping", func(t *testing.T) {
		if err := openT(t, fresh(t)).Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOpenDSN(t *testing.T) {
	ctx := context.Background()
	for _, dsn := range []string{"", "history.db", "mysql://u:hunter2@h/db", "file:///x.db", "sqlite:", "sqlite://", "sqlite:///x.db?mode=ro"} {
		_, err := Open(ctx, dsn)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "--history-dsn") {
			t.Errorf("Open(%q): %v, want an ErrInvalid naming --history-dsn", dsn, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q) shows the password: %v", dsn, err)
		}
	}
	_, err := Open(ctx, "mysql://h/db")
	for _, form := range []string{"sqlite://", "postgres://"} {
		if !strings.Contains(err.Error(), form) {
			t.Errorf("bad scheme error %q does not name %s", err, form)
		}
	}

	s := openT(t, "sqlite::memory:")
	mustAppend(t, s, fixture()...)
	if got := len(all(t, s, Filter{}, 2)); got != 6 {
		t.Errorf("memory database: %d records, want 6", got)
	}

	t.Chdir(t.TempDir())
	openT(t, "sqlite://relative.db")
	if m, _ := filepath.Glob("relative.db"); len(m) != 1 {
		t.Errorf("sqlite://relative.db did not create ./relative.db")
	}
}

// The history names every team's workloads and who changed them: its file, WAL and
// shared-memory file are the owner's only, and a file left 0644 by an older version is fixed.
func TestSQLiteFilesArePrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fresh, old := filepath.Join(dir, "history.db"), filepath.Join(dir, "old.db")
	if err := os.WriteFile(old, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fresh, old} {
		s := openT(t, "sqlite://"+path)
		mustAppend(t, s, fixture()...)
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if perm := fi.Mode().Perm(); perm&0o077 != 0 {
				t.Errorf("%s has mode %v, want no access for group or others", filepath.Base(p), perm)
			}
		}
	}
}

func TestSQLiteCannotOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "missing-dir", "history.db")
	_, err := Open(context.Background(), "sqlite://"+path)
	t.Logf("cannot open: %v", err)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open in a missing directory: %v, want ErrUnavailable naming %s", err, path)
	}
}

func TestSQLiteDiskFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	s := openT(t, "sqlite://"+path)
	mustAppend(t, s, fixture()...)
	var pages int
	if err := s.(*sqlStore).w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A few pages of room: a big batch cannot fit.
	full, err := open(ctx, "sqlite://"+path, sqliteOptions{pragmas: []string{fmt.Sprintf("max_page_count(%d)", pages+3)}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = full.Close() }()
	big := make([]Record, 500)
	for i := range big {
		big[i] = Record{ID: fmt.Sprintf("big-%03d", i), Time: t0, Message: strings.Repeat("m", 500)}
	}
	_, err = full.Append(ctx, big...)
	if err == nil {
		t.Fatal("Append into a full database succeeded")
	}
	t.Logf("disk full: %v", err)
	for _, want := range []string{"disk full", path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("disk full is not ErrUnavailable: %v", err)
	}

	// Rolled back whole; the earlier records and the database are intact, and the store
	// goes on working.
	if diff := cmp.Diff([]string{"r6", "r5", "r4", "r3", "r2", "r1"}, ids(all(t, full, Filter{}, 100))); diff != "" {
		t.Fatalf("records after disk full (-want +got):\n%s", diff)
	}
	var check string
	if err := full.(*sqlStore).w.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q, %v", check, err)
	}
	if n, err := full.Append(ctx, Record{ID: "small", Time: t0}); err != nil || n != 1 {
		t.Fatalf("a small append after disk full: %d, %v", n, err)
	}
}

func TestSQLiteReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	s := openT(t, "sqlite://"+path)
	mustAppend(t, s, fixture()...)

	// query_only stands in for a read-only file, which root could write anyway.
	ro, err := open(ctx, "sqlite://"+path, sqliteOptions{pragmas: []string{"query_only(1)"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ro.Close() }()
	_, err = ro.Append(ctx, Record{ID: "new", Time: t0})
	t.Logf("read-only: %v", err)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Append to a read-only database: %v, want ErrUnavailable naming read-only and %s", err, path)
	}
	if got := len(all(t, ro, Filter{}, 100)); got != 6 {
		t.Fatalf("%d records readable, want 6", got)
	}
}
