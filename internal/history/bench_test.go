package history

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/internal/history/pgtest"
)

// Fixture shape: 50 teams x 10 applications, 4 templates each, each application on 8 of 40
// clusters, one record every 30 s over about a year.
const (
	benchRecords  = 1_000_000
	benchApps     = 500
	benchClusters = 40
	benchLoad     = 5000 // records per Append while loading
)

func benchRecord(i int) Record {
	app := i % benchApps
	tpl := (i / benchApps) % 4
	cluster := (app*7 + (i/(benchApps*4))%8) % benchClusters
	kind := []string{"Deployment", "Service", "ConfigMap", "HorizontalPodAutoscaler"}[tpl]
	team := fmt.Sprintf("team-%02d", app/10)
	return Record{
		ID:   fmt.Sprintf("bench-%08d", i),
		Time: t0.Add(time.Duration(i) * 30 * time.Second), Team: team,
		Application: fmt.Sprintf("app-%03d", app), Group: "apps", Kind: kind, Namespace: team,
		Name: fmt.Sprintf("app-%03d", app), Cluster: fmt.Sprintf("cluster-%02d", cluster),
		FromRevision: int64(i / 1000), ToRevision: int64(i/1000 + 1),
		Images: []string{fmt.Sprintf("registry.example/app-%03d:v%d", app, i/1000)},
		Commit: fmt.Sprintf("%040x", i), Cause: "release", CauseDetail: "release r2 wave 2/3",
		Actor: "ci@example.com", Outcome: "healthy",
	}
}

// BenchmarkHistory measures queries over 1,000,000 records (loaded once per backend, which
// takes a while) and the cost of appending to them:
//
//	go test ./internal/history/ -run '^$' -bench History -benchtime 200x
func BenchmarkHistory(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		benchStore(b, "sqlite://"+filepath.Join(b.TempDir(), "history.db"))
	})
	b.Run("postgres", func(b *testing.B) {
		benchStore(b, pgtest.Start(b).Fresh(b))
	})
}

func benchStore(b *testing.B, dsn string) {
	ctx := context.Background()
	s, err := Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()

	start := time.Now()
	batch := make([]Record, 0, benchLoad)
	for i := range benchRecords {
		batch = append(batch, benchRecord(i))
		if len(batch) == benchLoad {
			if _, err := s.Append(ctx, batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	// What autovacuum or PRAGMA optimize would have done by now in a long-running store.
	if _, err := s.(*sqlStore).w.ExecContext(ctx, "ANALYZE"); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d records in %s", benchRecords, time.Since(start).Round(time.Millisecond))

	page := func(f func(i int) Filter) func(b *testing.B) {
		return func(b *testing.B) {
			i := 0
			lat := &latencies{}
			for b.Loop() {
				t := time.Now()
				p, err := s.List(ctx, f(i), nil, 100)
				lat.add(time.Since(t))
				if err != nil || len(p.Records) != 100 {
					b.Fatalf("%d records, %v", len(p.Records), err)
				}
				i++
			}
			lat.report(b)
		}
	}
	b.Run("PageApplication", page(func(i int) Filter {
		return Filter{Application: fmt.Sprintf("app-%03d", i*37%benchApps)}
	}))
	b.Run("PageCluster", page(func(i int) Filter {
		return Filter{Cluster: fmt.Sprintf("cluster-%02d", i%benchClusters)}
	}))
	// A user of three teams: the scope every non-admin query carries.
	b.Run("PageNamespaces", page(func(i int) Filter {
		t := i % 48
		return Filter{Namespaces: []string{fmt.Sprintf("team-%02d", t), fmt.Sprintf("team-%02d", t+1), fmt.Sprintf("team-%02d", t+2)}}
	}))
	b.Run("PageApplicationDeep", func(b *testing.B) {
		// Half a year back: keyset paging costs the same at any depth.
		after := &Cursor{Time: t0.Add(benchRecords / 2 * 30 * time.Second), ID: "~"}
		i := 0
		lat := &latencies{}
		for b.Loop() {
			t := time.Now()
			p, err := s.List(ctx, Filter{Application: fmt.Sprintf("app-%03d", i*37%benchApps)}, after, 100)
			lat.add(time.Since(t))
			if err != nil || len(p.Records) != 100 {
				b.Fatalf("%d records, %v", len(p.Records), err)
			}
			i++
		}
		lat.report(b)
	})
	b.Run("LatestApplication", func(b *testing.B) {
		i := 0
		lat := &latencies{}
		for b.Loop() {
			t := time.Now()
			recs, err := s.Latest(ctx, Filter{Application: fmt.Sprintf("app-%03d", i*37%benchApps)})
			lat.add(time.Since(t))
			if err != nil || len(recs) != 32 { // 4 templates on 8 clusters
				b.Fatalf("%d records, %v", len(recs), err)
			}
			i++
		}
		lat.report(b)
	})
	b.Run("LatestNamespaces", func(b *testing.B) {
		i := 0
		for b.Loop() {
			t := i % 48
			recs, err := s.Latest(ctx, Filter{Namespaces: []string{fmt.Sprintf("team-%02d", t), fmt.Sprintf("team-%02d", t+1), fmt.Sprintf("team-%02d", t+2)}})
			if err != nil || len(recs) != 3*10*32 {
				b.Fatalf("%d records, %v", len(recs), err)
			}
			i++
		}
	})
	b.Run("Append100", func(b *testing.B) {
		const per = 100
		next := benchRecords
		for b.Loop() {
			b.StopTimer()
			recs := make([]Record, per)
			for j := range recs {
				recs[j] = benchRecord(next)
				next++
			}
			b.StartTimer()
			if n, err := s.Append(ctx, recs...); err != nil || n != per {
				b.Fatalf("inserted %d, %v", n, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*per), "ns/record")
	})
}

// latencies collects per-call times so a benchmark reports p50 and p99, not only the mean.
type latencies struct{ d []time.Duration }

func (l *latencies) add(d time.Duration) { l.d = append(l.d, d) }

func (l *latencies) report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	at := func(q float64) float64 {
		return float64(l.d[min(len(l.d)-1, int(q*float64(len(l.d))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}
