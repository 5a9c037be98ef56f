package worksync

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// Runner keeps Mirror equal to the leader's Works of the clusters this replica holds and
// reports what this replica's executor writes to them back to the leader.
type Runner struct {
	Ring Shard
	// Mirror is what this replica's executor applies; Leader is this process's own store,
	// read in-process while this replica leads.
	Mirror, Leader *workstore.Store
	Identity       string
	Peers          PeerConfig
	// Fixed, when set, is the only upstream (a Pull member's agent follows the control plane,
	// not a replica); Leader and Peers are then unused.
	Fixed Upstream

	mu       sync.Mutex
	upstream Upstream
}

// Shard is this replica's share of the clusters and who leads (package shard's Ring).
type Shard interface {
	Held() []string
	Leader() (identity, address string, ok bool)
	Watch() <-chan struct{}
}

// NeedLeaderElection: every replica applies its clusters.
func (r *Runner) NeedLeaderElection() bool { return false }

// Start follows the leader until ctx ends, again whenever the leader or the held clusters change.
func (r *Runner) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("worksync")
	go r.reportLoop(ctx)
	changed := r.Ring.Watch()
	var lastSource string
	for ctx.Err() == nil {
		held := r.Ring.Held()
		inHeld := inClusters(held)
		// Clusters no longer held stop at once: their Works leave the mirror unapplied.
		r.Mirror.Forget(inHeld)
		leaderID, address, ok := r.Ring.Leader()
		if len(held) == 0 || !ok {
			r.wait(ctx, changed, time.Minute)
			continue
		}
		up, err := r.upstreamFor(leaderID, address)
		if err != nil {
			log.Error(err, "Reaching the leader replica", "leader", leaderID)
			r.wait(ctx, changed, time.Second)
			continue
		}
		streamCtx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-changed:
				cancel()
			case <-streamCtx.Done():
			}
		}()
		seen := map[types.NamespacedName]bool{}
		synced := false
		err = up.Follow(streamCtx, held, func(e workstore.Event) error {
			switch e.Type {
			case workstore.Added, workstore.Modified:
				if !synced {
					seen[client.ObjectKeyFromObject(e.Work)] = true
				}
				return r.Mirror.Mirror(e.Work)
			case workstore.Deleted:
				return r.Mirror.MirrorDeleted(client.ObjectKeyFromObject(e.Work), e.Work.UID)
			case workstore.Synced:
				synced = true
				r.resync(inHeld, seen, e.Source == lastSource)
				lastSource = e.Source
				log.V(1).Info("Following the leader's Works", "leader", leaderID, "clusters", held, "works", len(seen))
			}
			return nil
		})
		stopped := streamCtx.Err() != nil
		cancel()
		if ctx.Err() == nil && !stopped {
			log.Info("The leader's Works stream ended; following again", "leader", leaderID, "error", errString(err))
			r.wait(ctx, changed, time.Second)
		}
	}
	return nil
}

// resync drops the mirrored Works of held clusters the leader's snapshot lacks. The same store
// as before deleted them while the stream was down: they are deleted here too (finalizers
// run). Another store (a new leader renders again) never had them: they are forgotten.
func (r *Runner) resync(inHeld func(*workv1alpha1.Work) bool, seen map[types.NamespacedName]bool, sameSource bool) {
	if !sameSource {
		r.Mirror.Forget(func(w *workv1alpha1.Work) bool { return inHeld(w) && seen[client.ObjectKeyFromObject(w)] })
		return
	}
	for _, w := range r.Mirror.Snapshot() {
		if key := client.ObjectKeyFromObject(w); inHeld(w) && !seen[key] {
			_ = r.Mirror.MirrorDeleted(key, w.UID)
		}
	}
}

func (r *Runner) wait(ctx context.Context, changed <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-changed:
	case <-t.C:
	}
}

func (r *Runner) upstreamFor(leaderID, address string) (Upstream, error) {
	var up Upstream
	if r.Fixed != nil {
		up = r.Fixed
	} else if leaderID == r.Identity {
		up = Local{Store: r.Leader}
	} else {
		remote, err := r.Peers.Dial(address)
		if err != nil {
			return nil, err
		}
		up = remote
	}
	r.mu.Lock()
	r.upstream = up
	r.mu.Unlock()
	return up, nil
}

func (r *Runner) current() Upstream {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.upstream
}

// reportLoop sends what the executor writes to the mirror (status, finalizers) to the leader,
// newest per Work, in batches; a failed batch is sent again with anything newer.
func (r *Runner) reportLoop(ctx context.Context) {
	log := logf.FromContext(ctx).WithName("worksync")
	var mu sync.Mutex
	pending := map[types.NamespacedName]workstore.Report{}
	// last is what the leader has of each Work, as a digest: a copy of every status would
	// double what the mirror holds.
	last := map[types.NamespacedName]reportDigest{}
	go func() {
		_ = r.Mirror.Follow(ctx, func(*workv1alpha1.Work) bool { return true }, func(e workstore.Event) error {
			if e.Work == nil {
				return nil
			}
			key := client.ObjectKeyFromObject(e.Work)
			rep := workstore.ReportOf(e.Work)
			mu.Lock()
			defer mu.Unlock()
			switch e.Type {
			case workstore.Added:
				remember(last, key, rep) // as the leader has it
			case workstore.Modified:
				if l, ok := last[key]; !ok || l != digestOf(rep) {
					pending[key] = rep
				}
			case workstore.Deleted:
				delete(last, key)
				if e.Work.DeletionTimestamp != nil { // finalized here: the leader lets it go
					rep.Finalizers = nil
					pending[key] = rep
				} else {
					delete(pending, key)
				}
			case workstore.Forgotten:
				delete(last, key)
				delete(pending, key)
			}
			return nil
		})
	}()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		up := r.current()
		mu.Lock()
		if up == nil || len(pending) == 0 {
			mu.Unlock()
			continue
		}
		batch := make([]workstore.Report, 0, len(pending))
		for _, rep := range pending {
			batch = append(batch, rep)
		}
		clear(pending)
		mu.Unlock()
		sendCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := up.Report(sendCtx, batch)
		cancel()
		mu.Lock()
		for _, rep := range batch {
			key := types.NamespacedName{Namespace: rep.Namespace, Name: rep.Name}
			if err == nil {
				remember(last, key, rep)
			} else if _, newer := pending[key]; !newer {
				pending[key] = rep
			}
		}
		mu.Unlock()
		if err != nil && ctx.Err() == nil {
			log.Info("Reporting Work status to the leader failed; retrying", "works", len(batch), "error", err.Error())
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// reportDigest stands for a report's content.
type reportDigest [sha256.Size]byte

// digestOf is r's digest; the zero digest when r does not encode, which remember never keeps.
func digestOf(r workstore.Report) reportDigest {
	data, err := json.Marshal(r)
	if err != nil {
		return reportDigest{}
	}
	return sha256.Sum256(data)
}

// remember records that the leader has r; a report that does not encode is never taken as
// known, so it is sent again.
func remember(last map[types.NamespacedName]reportDigest, key types.NamespacedName, r workstore.Report) {
	if d := digestOf(r); d != (reportDigest{}) {
		last[key] = d
	} else {
		delete(last, key)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
