package replicas

import (
	"errors"
	"fmt"
	"math/big"
	"sort"
)

// Target is a cluster replicas may be divided onto.
type Target struct {
	// Name of the cluster.
	Name string
	// Weight is the static weight; ignored by capacity-based and aggregated division.
	Weight int64
	// Available is how many more replicas of this workload fit in the cluster, counting the
	// ones it holds now as fitting; negative means unknown (no limit is applied).
	Available int64
}

// Assignment maps cluster names to replica counts; clusters with zero replicas are absent.
type Assignment map[string]int32

// ErrNoTargets is returned when there is nowhere to place replicas.
var ErrNoTargets = errors.New("no cluster to divide replicas onto")

// DivideByWeight divides total replicas over targets in proportion to their static weights,
// moving as few replicas as possible from current (see the package doc).
func DivideByWeight(total int32, targets []Target, current Assignment) (Assignment, error) {
	if len(targets) == 0 {
		if total == 0 {
			return Assignment{}, nil
		}
		return nil, ErrNoTargets
	}
	weights := make([]int64, len(targets))
	var sum int64
	for i, t := range targets {
		if t.Weight < 0 {
			return nil, fmt.Errorf("cluster %s: weight %d is negative", t.Name, t.Weight)
		}
		weights[i] = t.Weight
		sum += t.Weight
	}
	if sum == 0 {
		return nil, errors.New("the weights of the candidate clusters add up to zero: give at least one cluster a positive weight")
	}
	return divide(total, targets, weights, current), nil
}

// DivideByCapacity divides total replicas in proportion to what fits in each target, never
// giving a target more than fits.
func DivideByCapacity(total int32, targets []Target, current Assignment) (Assignment, error) {
	if len(targets) == 0 {
		if total == 0 {
			return Assignment{}, nil
		}
		return nil, ErrNoTargets
	}
	var room int64
	weights := make([]int64, len(targets))
	for i, t := range targets {
		if t.Available < 0 {
			return nil, fmt.Errorf("cluster %s: its available capacity is unknown; wait for its resource summary", t.Name)
		}
		weights[i] = t.Available
		room += t.Available
	}
	if room < int64(total) {
		return nil, fmt.Errorf("not enough capacity: %d replicas requested, %d fit in %d clusters", total, room, len(targets))
	}
	out := divide(total, targets, weights, current)
	// Proportional shares can exceed a target's room by rounding; move overflow to targets
	// with room, again preferring those that hold replicas now.
	overflow := int32(0)
	for _, t := range targets {
		if int64(out[t.Name]) > t.Available {
			overflow += out[t.Name] - int32(t.Available)
			setCount(out, t.Name, int32(t.Available))
		}
	}
	for overflow > 0 {
		best := -1
		for i, t := range targets {
			if int64(out[t.Name]) >= t.Available {
				continue
			}
			if best < 0 || preferForExtra(t, targets[best], out, current) {
				best = i
			}
		}
		setCount(out, targets[best].Name, out[targets[best].Name]+1)
		overflow--
	}
	return out, nil
}

func preferForExtra(a, b Target, out, current Assignment) bool {
	da, db := current[a.Name]-out[a.Name], current[b.Name]-out[b.Name]
	if da != db {
		return da > db
	}
	if a.Available-int64(out[a.Name]) != b.Available-int64(out[b.Name]) {
		return a.Available-int64(out[a.Name]) > b.Available-int64(out[b.Name])
	}
	return a.Name < b.Name
}

// Aggregate places total replicas on as few targets as possible: targets already holding
// replicas first (so nothing moves while they fit), then the roomiest.
func Aggregate(total int32, targets []Target, current Assignment) (Assignment, error) {
	if total == 0 {
		return Assignment{}, nil
	}
	if len(targets) == 0 {
		return nil, ErrNoTargets
	}
	order := append([]Target(nil), targets...)
	sort.SliceStable(order, func(i, j int) bool {
		hi, hj := current[order[i].Name] > 0, current[order[j].Name] > 0
		if hi != hj {
			return hi
		}
		if ai, aj := roomOf(order[i]), roomOf(order[j]); ai != aj {
			return ai > aj
		}
		return order[i].Name < order[j].Name
	})
	out := Assignment{}
	left := int64(total)
	for _, t := range order {
		if left == 0 {
			break
		}
		n := min(left, roomOf(t))
		if n <= 0 {
			continue
		}
		out[t.Name] = int32(n)
		left -= n
	}
	if left > 0 {
		return nil, fmt.Errorf("not enough capacity: %d replicas requested, %d fit in %d clusters", total, int64(total)-left, len(targets))
	}
	return out, nil
}

func roomOf(t Target) int64 {
	if t.Available < 0 {
		return int64(^uint32(0) >> 1)
	}
	return t.Available
}

// divide is the floor-plus-remainder division of the package doc.
func divide(total int32, targets []Target, weights []int64, current Assignment) Assignment {
	var sum int64
	for _, w := range weights {
		sum += w
	}
	type share struct {
		name  string
		floor int64
		frac  *big.Rat // fractional part of the exact quota
		cur   int32
	}
	shares := make([]share, len(targets))
	assigned := int64(0)
	for i, t := range targets {
		q := new(big.Rat).SetFrac(big.NewInt(int64(total)*weights[i]), big.NewInt(sum))
		floor := new(big.Int).Quo(q.Num(), q.Denom()).Int64()
		frac := new(big.Rat).Sub(q, new(big.Rat).SetInt64(floor))
		shares[i] = share{name: t.Name, floor: floor, frac: frac, cur: current[t.Name]}
		assigned += floor
	}
	sort.SliceStable(shares, func(i, j int) bool {
		a, b := shares[i], shares[j]
		// Only targets with a positive share may take an extra replica.
		if (a.frac.Sign() > 0) != (b.frac.Sign() > 0) {
			return a.frac.Sign() > 0
		}
		if ea, eb := int64(a.cur)-a.floor, int64(b.cur)-b.floor; ea != eb {
			return ea > eb
		}
		if c := a.frac.Cmp(b.frac); c != 0 {
			return c > 0
		}
		return a.name < b.name
	})
	out := Assignment{}
	extra := int64(total) - assigned
	for i, s := range shares {
		n := s.floor
		if int64(i) < extra {
			n++
		}
		setCount(out, s.name, int32(n))
	}
	return out
}

func setCount(a Assignment, name string, n int32) {
	if n <= 0 {
		delete(a, name)
		return
	}
	a[name] = n
}

// Moves counts the replicas that change cluster between two assignments.
func Moves(from, to Assignment) int32 {
	var added int32
	for name, n := range to {
		if d := n - from[name]; d > 0 {
			added += d
		}
	}
	var removed int32
	for name, n := range from {
		if d := n - to[name]; d > 0 {
			removed += d
		}
	}
	return max(added, removed)
}
