// Package shard splits the member clusters between the controller-manager's replicas. Each
// replica holds a Lease in the system namespace (renewed every RenewPeriod, expiring after
// LeaseDuration); the live Leases are the ring, and each cluster belongs to the live replica
// that scores highest for it (rendezvous hashing: a replica joining or leaving moves only the
// clusters it gains or held). The leader scores with LeaderWeight, so it works on a smaller
// share: it also runs the control-plane-wide controllers and keeps every Work. A replica records the clusters it works on in its Lease and takes
// a cluster only once no other live Lease lists it, and it lists a cluster until it has stopped
// working on it, so two replicas never apply to one cluster at once. A replica that cannot renew
// its Lease within LeaseDuration stops (its process exits), so its clusters move.
//
// A replica that starts announces itself and takes nothing for JoinWait. Replicas started
// together (a rollout, a restart of all) thus split the clusters from their first claim,
// instead of the first one up taking every cluster and handing most away seconds later; a
// running replica keeps the clusters of a joining one until its join ends, so a lone
// restart leaves its share unworked for no longer than today's hand-over.
//
// It owns the shard Leases only; what a replica does with its clusters (connections, informers,
// the executor) is up to the packages that ask Owns.
package shard

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
)

const (
	// ReplicaLabel marks shard Leases with their replica's identity.
	ReplicaLabel = "shard.flotilla.dev/replica"
	// AddressAnnotation is where a replica serves its Works to the others (host:port).
	AddressAnnotation = "shard.flotilla.dev/works-address"
	// ClustersAnnotation lists the clusters a replica works on, comma-separated.
	ClustersAnnotation = "shard.flotilla.dev/clusters"
	// JoiningUntilAnnotation is when a starting replica ends its join (RFC 3339).
	JoiningUntilAnnotation = "shard.flotilla.dev/joining-until"
	leasePrefix            = "flotilla-shard-"
)

// LeaseName is the name of a replica's shard Lease.
func LeaseName(identity string) string { return leasePrefix + identity }

// ValidateIdentity checks a replica identity; the error names the flag.
func ValidateIdentity(id string) error {
	if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
		return fmt.Errorf("--shard-identity %q: give a DNS label (at most 63 characters) unique to the replica, for example the pod name (%s)", id, strings.Join(errs, "; "))
	}
	return nil
}

// Replica is one live replica as its Lease says.
type Replica struct {
	Identity string
	Address  string
	Clusters []string
	Expires  time.Time
	// JoiningUntil is when the replica starts taking clusters; zero once it has.
	JoiningUntil time.Time
}

// joining says whether the replica is still announcing itself at now.
func (r Replica) joining(now time.Time) bool { return now.Before(r.JoiningUntil) }

// Ring is this replica's view of the shards.
type Ring struct {
	// Client writes this replica's Lease and reads the others' (uncached: the Leases change every
	// few seconds); Clusters lists the Clusters (a cache is fine).
	Client   client.Client
	Clusters client.Reader
	// Namespace holds the Leases; LeaderLease is the leader election Lease, whose holder is
	// the replica that runs the control-plane-wide controllers and keeps the Works.
	Namespace, LeaderLease string
	Identity, Address      string
	LeaseDuration          time.Duration
	RenewPeriod            time.Duration
	// JoinWait is how long a starting replica announces itself before taking clusters; zero
	// takes them at the first step.
	JoinWait time.Duration

	mu       sync.RWMutex
	held     []string // sorted
	replicas []Replica
	leader   string
	watchers []chan struct{}
	// joiningUntil is set at the first step of this process.
	joiningUntil time.Time
}

// Owns says whether this replica works on cluster now.
func (r *Ring) Owns(cluster string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := slices.BinarySearch(r.held, cluster)
	return ok
}

// Held is the clusters this replica works on, sorted.
func (r *Ring) Held() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.held)
}

// Leader is the replica holding the leader Lease and the address it serves Works at; ok is
// false while none is known or it has no live shard Lease.
func (r *Ring) Leader() (identity, address string, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, rep := range r.replicas {
		if rep.Identity == r.leader && rep.Address != "" {
			return rep.Identity, rep.Address, true
		}
	}
	return r.leader, "", false
}

// Replicas is the live replicas as last read.
func (r *Ring) Replicas() []Replica {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.replicas)
}

// Watch returns a channel that receives (coalesced) whenever Held or Leader changes.
func (r *Ring) Watch() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan struct{}, 1)
	r.watchers = append(r.watchers, ch)
	return ch
}

func (r *Ring) notify() {
	for _, ch := range r.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// NeedLeaderElection: every replica holds its shard.
func (r *Ring) NeedLeaderElection() bool { return false }

// Start renews this replica's Lease and recomputes the clusters it holds every RenewPeriod.
// It returns an error (stopping the process) when the Lease could not be renewed for
// LeaseDuration: the others take its clusters by then.
func (r *Ring) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("shard").WithValues("replica", r.Identity)
	lastRenewed := time.Now()
	t := time.NewTicker(r.RenewPeriod)
	defer t.Stop()
	for {
		if err := r.step(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Error(err, "Renewing the shard Lease")
			if time.Since(lastRenewed) > r.LeaseDuration-r.RenewPeriod {
				r.mu.Lock()
				r.held = nil
				r.notify()
				r.mu.Unlock()
				return fmt.Errorf("shard Lease %s not renewed for %s: stopping, its clusters move to the other replicas: %w", LeaseName(r.Identity), time.Since(lastRenewed).Round(time.Second), err)
			}
		} else {
			lastRenewed = time.Now()
		}
		select {
		case <-ctx.Done():
			r.release()
			return nil
		case <-t.C:
		}
	}
}

// step reads the ring, decides the clusters to hold, writes this replica's Lease and then
// tells the watchers. Clusters taken are listed before they are worked on; clusters dropped
// stop being worked on at once and leave the Lease at the next step.
func (r *Ring) step(ctx context.Context) error {
	leases := &coordinationv1.LeaseList{}
	if err := r.Client.List(ctx, leases, client.InNamespace(r.Namespace), client.HasLabels{ReplicaLabel}); err != nil {
		return err
	}
	clusters := &clusterv1alpha1.ClusterList{}
	if err := r.Clusters.List(ctx, clusters); err != nil {
		return err
	}
	now := time.Now()
	if r.joiningUntil.IsZero() {
		r.joiningUntil = now.Add(r.JoinWait)
	}
	joining := now.Before(r.joiningUntil)
	var others []Replica
	live := []string{r.Identity}
	joiningPeer := map[string]bool{}
	for i := range leases.Items {
		rep, ok := replicaOf(&leases.Items[i])
		if !ok || rep.Identity == r.Identity || !rep.Expires.After(now) {
			continue
		}
		others = append(others, rep)
		live = append(live, rep.Identity)
		joiningPeer[rep.Identity] = rep.joining(now)
	}
	heldElsewhere := map[string]bool{}
	for _, o := range others {
		for _, c := range o.Clusters {
			heldElsewhere[c] = true
		}
	}
	current := r.Held()
	// Read before deciding: the leader's share is smaller. Replicas that briefly disagree on
	// the leader cannot both hold a cluster: a cluster is taken only once no Lease lists it.
	leader := r.readLeader(ctx)
	var next, dropped []string
	for i := range clusters.Items {
		name := clusters.Items[i].Name
		_, holding := slices.BinarySearch(current, name)
		switch owner := Owner(name, live, leader); {
		case owner != r.Identity && holding && joiningPeer[owner]:
			next = append(next, name) // worked on until its owner has joined
		case owner != r.Identity:
			if holding {
				dropped = append(dropped, name)
			}
		case holding || !heldElsewhere[name] && !joining:
			next = append(next, name)
		}
	}
	for _, c := range current {
		if !slices.ContainsFunc(clusters.Items, func(cl clusterv1alpha1.Cluster) bool { return cl.Name == c }) && !slices.Contains(dropped, c) {
			dropped = append(dropped, c) // the Cluster is gone
		}
	}
	sort.Strings(next)
	// The Lease lists what is held and taken, and what is dropped now: those leave it at the
	// next step, once this replica has stopped working on them.
	listed := slices.Concat(next, dropped)
	sort.Strings(listed)
	var joiningUntil time.Time
	if joining {
		joiningUntil = r.joiningUntil
	}
	if err := r.writeLease(ctx, listed, joiningUntil, now); err != nil {
		return err
	}
	all := append([]Replica{{Identity: r.Identity, Address: r.Address, Clusters: next, Expires: now.Add(r.LeaseDuration), JoiningUntil: joiningUntil}}, others...)
	sort.Slice(all, func(i, j int) bool { return all[i].Identity < all[j].Identity })
	if !slices.Equal(current, next) {
		took := 0
		for _, c := range next {
			if _, ok := slices.BinarySearch(current, c); !ok {
				took++
			}
		}
		logf.FromContext(ctx).WithName("shard").Info("The clusters this replica works on changed",
			"replica", r.Identity, "took", took, "gaveAway", len(dropped), "holding", len(next), "live", len(live))
	}
	r.mu.Lock()
	changed := !slices.Equal(r.held, next) || r.leader != leader || !sameAddresses(r.replicas, all)
	r.held, r.leader, r.replicas = next, leader, all
	if changed {
		r.notify()
	}
	r.mu.Unlock()
	recordOwnership(r.Identity, next, leader == r.Identity)
	return nil
}

func sameAddresses(a, b []Replica) bool {
	return slices.EqualFunc(a, b, func(x, y Replica) bool { return x.Identity == y.Identity && x.Address == y.Address })
}

func (r *Ring) writeLease(ctx context.Context, clusters []string, joiningUntil, now time.Time) error {
	seconds := int32(r.LeaseDuration / time.Second)
	renew := metav1.NewMicroTime(now)
	lease := &coordinationv1.Lease{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: LeaseName(r.Identity)}, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: LeaseName(r.Identity)}}
	} else if err != nil {
		return err
	}
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Labels[ReplicaLabel] = r.Identity
	lease.Annotations[AddressAnnotation] = r.Address
	lease.Annotations[ClustersAnnotation] = strings.Join(clusters, ",")
	if joiningUntil.IsZero() {
		delete(lease.Annotations, JoiningUntilAnnotation)
	} else {
		lease.Annotations[JoiningUntilAnnotation] = joiningUntil.UTC().Format(time.RFC3339Nano)
	}
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = &r.Identity, &seconds, &renew
	if lease.ResourceVersion == "" {
		return r.Client.Create(ctx, lease)
	}
	return r.Client.Update(ctx, lease)
}

// release empties this replica's Lease when it stops, so its clusters move at once.
func (r *Ring) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease := &coordinationv1.Lease{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: LeaseName(r.Identity)}, lease); err != nil {
		return
	}
	_ = r.Client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion})
}

func (r *Ring) readLeader(ctx context.Context) string {
	lease := &coordinationv1.Lease{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.LeaderLease}, lease); err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	if lease.Spec.RenewTime != nil && lease.Spec.LeaseDurationSeconds != nil &&
		lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds)*time.Second).Before(time.Now()) {
		return "" // expired: a new leader is being elected
	}
	return *lease.Spec.HolderIdentity
}

// replicaOf reads a shard Lease.
func replicaOf(l *coordinationv1.Lease) (Replica, bool) {
	id := l.Labels[ReplicaLabel]
	if id == "" || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return Replica{}, false
	}
	var clusters []string
	if s := l.Annotations[ClustersAnnotation]; s != "" {
		clusters = strings.Split(s, ",")
	}
	// An unreadable join time counts as joined: the Lease's holder takes clusters anyway.
	joiningUntil, _ := time.Parse(time.RFC3339Nano, l.Annotations[JoiningUntilAnnotation])
	return Replica{Identity: id, Address: l.Annotations[AddressAnnotation], Clusters: clusters,
		Expires: l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second), JoiningUntil: joiningUntil}, true
}

// ReadReplicas lists the live replicas from their Leases, for `flotilla status`.
func ReadReplicas(ctx context.Context, c client.Reader, namespace string) ([]Replica, error) {
	leases := &coordinationv1.LeaseList{}
	if err := c.List(ctx, leases, client.InNamespace(namespace), client.HasLabels{ReplicaLabel}); err != nil {
		return nil, err
	}
	var out []Replica
	for i := range leases.Items {
		if rep, ok := replicaOf(&leases.Items[i]); ok && rep.Expires.After(time.Now()) {
			out = append(out, rep)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Identity < out[j].Identity })
	return out, nil
}

// LeaderWeight is the leader's weight in the ring, the others' being 1: with two replicas the
// leader works on about a third of the clusters, with four on about a seventh. Measured with
// two replicas at an even split, the leader's memory grew by 60% to 64% of both replicas'
// growth, its own clusters' share plus rendering, aggregating and every Work.
const LeaderWeight = 0.5

// Owner is the replica among live that cluster belongs to: the highest weighted score of
// hash(cluster, replica), the leader's weighed by LeaderWeight (leader may be empty or not
// live). Each replica's share moves only when it joins or leaves, or the leader changes.
func Owner(cluster string, live []string, leader string) string {
	var best string
	bestScore := math.Inf(-1)
	for _, id := range live {
		h := fnv.New64a()
		h.Write([]byte(cluster))
		h.Write([]byte{0})
		h.Write([]byte(id))
		// fnv mixes the tail poorly; a final avalanche spreads close identities apart.
		u := (float64(mix(h.Sum64())>>11) + 0.5) / (1 << 53) // uniform in (0, 1)
		// Weighted rendezvous: w / -ln(u) gives each replica a share in proportion to w.
		w := 1.0
		if id == leader {
			w = LeaderWeight
		}
		score := w / -math.Log(u)
		if best == "" || score > bestScore || (score == bestScore && id < best) {
			best, bestScore = id, score
		}
	}
	return best
}

func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// ErrNoLeader: no replica leads, or the leader's shard Lease is not live.
var ErrNoLeader = errors.New("no leader replica with a live shard Lease")
