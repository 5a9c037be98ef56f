package luavm

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// ProcessLimits bound all script calls of a process together, across every pool.
// Zero fields take the default.
type ProcessLimits struct {
	// MaxConcurrentCalls is how many calls (and compilations) run at once; the others wait,
	// honouring their context. Default 2*GOMAXPROCS, at least 4.
	MaxConcurrentCalls int
	// MaxMemory is the estimated memory the running calls may hold together. A call charges
	// what it grows before it grows it; a call that would pass the budget fails. Default 256 MiB.
	MaxMemory int64
}

// DefaultProcessLimits returns the limits the process budget starts with.
func DefaultProcessLimits() ProcessLimits {
	return ProcessLimits{MaxConcurrentCalls: max(4, 2*runtime.GOMAXPROCS(0)), MaxMemory: 256 << 20}
}

func (l ProcessLimits) withDefaults() ProcessLimits {
	d := DefaultProcessLimits()
	if l.MaxConcurrentCalls <= 0 {
		l.MaxConcurrentCalls = d.MaxConcurrentCalls
	}
	if l.MaxMemory <= 0 {
		l.MaxMemory = d.MaxMemory
	}
	return l
}

// reserveChunk is how much a call takes from the shared budget at a time, so the shared
// counter is touched a few times per call, not once per instruction.
const reserveChunk = 1 << 20

// freeOSMemoryInterval rate-limits returning memory to the OS: it forces a full collection.
const freeOSMemoryInterval = 10 * time.Second

// freeOSMemory is a variable so tests can count calls.
var freeOSMemory = debug.FreeOSMemory

// Budget is shared by the calls it admits: a number of call slots and an estimated memory
// budget. It is safe for concurrent use.
type Budget struct {
	limits   ProcessLimits
	slots    chan struct{}
	used     atomic.Int64
	lastFree atomic.Int64 // unix nanoseconds of the last FreeOSMemory
}

// NewBudget returns a budget; most callers use the process budget (SetProcessLimits).
func NewBudget(l ProcessLimits) *Budget {
	l = l.withDefaults()
	return &Budget{limits: l, slots: make(chan struct{}, l.MaxConcurrentCalls)}
}

// Limits returns the effective limits.
func (b *Budget) Limits() ProcessLimits { return b.limits }

// InUse returns the estimated bytes the running calls hold.
func (b *Budget) InUse() int64 { return b.used.Load() }

var processBudget atomic.Pointer[Budget]

func init() { processBudget.Store(NewBudget(ProcessLimits{})) }

// SetProcessLimits replaces the process budget used by every pool without its own. Calls
// already running finish against the old one. Call it at start-up, before scripts run.
func SetProcessLimits(l ProcessLimits) { processBudget.Store(NewBudget(l)) }

// ProcessBudget returns the budget pools use unless given their own.
func ProcessBudget() *Budget { return processBudget.Load() }

// acquire waits for a call slot.
func (b *Budget) acquire(ctx context.Context) error {
	select {
	case b.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for one of %d concurrent Lua call slots: %w", b.limits.MaxConcurrentCalls, ctx.Err())
	}
}

func (b *Budget) releaseSlot() { <-b.slots }

func (b *Budget) reserve(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.limits.MaxMemory {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// returnMemory hands freed pages back to the OS after a call that was stopped for memory,
// at most once per freeOSMemoryInterval. The Go runtime would return them only slowly, and
// a spike would otherwise stay in the process's RSS for minutes.
func (b *Budget) returnMemory() {
	now := time.Now().UnixNano()
	last := b.lastFree.Load()
	if now-last < int64(freeOSMemoryInterval) || !b.lastFree.CompareAndSwap(last, now) {
		return
	}
	go freeOSMemory()
}

// account is one call's share of a Budget. It is used by the goroutine running the call only.
type account struct {
	budget   *Budget
	limit    int64 // Limits.MaxMemory of the call
	valueMax int   // Limits.MaxValueBytes, for messages about single strings
	used     int64
	reserved int64
	// stop cancels the call with the error as cause; set while the call runs.
	stop func(error)
	// stopped records that the call failed for memory, so its memory is returned to the OS;
	// the heap watchdog sets it from its own goroutine.
	stopped atomic.Bool
}

func (b *Budget) newAccount(limits Limits) *account {
	return &account{budget: b, limit: limits.MaxMemory, valueMax: limits.MaxValueBytes}
}

// memoryError is a call stopped before an allocation that would pass a memory limit.
type memoryError struct{ msg string }

func (e *memoryError) Error() string { return e.msg }

// charge accounts n more bytes before they are allocated; what is about to be built is
// named in the error. where, when not nil, prefixes the error with the Lua line.
func (a *account) charge(n int64, what string, where func() string) error {
	if n <= 0 {
		return nil
	}
	a.used += n
	if a.used > a.limit {
		return a.fail(where, fmt.Sprintf("%s would take the call past its memory limit of %d MiB (Limits.MaxMemory); build smaller tables and strings", what, a.limit>>20))
	}
	if a.used > a.reserved {
		want := (a.used - a.reserved + reserveChunk - 1) / reserveChunk * reserveChunk
		if !a.budget.reserve(want) {
			return a.fail(where, fmt.Sprintf("%s would take the Lua calls of this process past their shared memory limit of %d MiB (%d MiB in use by up to %d concurrent calls); retry later",
				what, a.budget.limits.MaxMemory>>20, a.budget.used.Load()>>20, a.budget.limits.MaxConcurrentCalls))
		}
		a.reserved += want
	}
	return nil
}

// tooLong refuses a single string over Limits.MaxValueBytes before it is built.
func (a *account) tooLong(n int64, what string, where func() string) error {
	return a.fail(where, fmt.Sprintf("%s would build a string of %d bytes, over the memory limit of %d bytes per string (Limits.MaxValueBytes); build smaller strings", what, n, a.valueMax))
}

func (a *account) fail(where func() string, msg string) error {
	if where != nil {
		msg = where() + msg
	}
	err := &memoryError{msg: msg}
	a.stopped.Store(true)
	if a.stop != nil {
		a.stop(err)
	}
	return err
}

// release gives the call's reservation back; its values are garbage once the call returns.
func (a *account) release() {
	a.budget.used.Add(-a.reserved)
	a.reserved = 0
}

// accountKey is where a state's registry holds the running call's account, so Go functions
// (bounded library functions, preloaded modules) can charge it.
const accountKey = "flotilla.account"

func setAccount(L *lua.LState, a *account) {
	ud, ok := L.G.Registry.RawGetString(accountKey).(*lua.LUserData)
	if !ok {
		ud = L.NewUserData()
		L.G.Registry.RawSetString(accountKey, ud)
	}
	ud.Value = a
}

func accountOf(L *lua.LState) *account {
	if ud, ok := L.G.Registry.RawGetString(accountKey).(*lua.LUserData); ok {
		if a, ok := ud.Value.(*account); ok {
			return a
		}
	}
	return nil
}

// chargeL charges the running call of L, raising a Lua error when over a limit. States not
// running a call (a trusted loader) are not charged.
func chargeL(L *lua.LState, n int64, what string) {
	if a := accountOf(L); a != nil {
		if err := a.charge(n, what, nil); err != nil {
			L.RaiseError("%s", err.Error())
		}
	}
}

// valueSlotBytes is one slot of a state's value stack (a Go interface).
const valueSlotBytes = 16

// RSSBound is the documented bound on what the Lua calls admitted by b may add to the
// resident memory of the process, for calls with limits l and idleStates pooled states: the
// shared memory budget plus a full value stack (Limits.RegistryMaxSize) per running or idle
// state, twice, because the Go collector lets the heap reach twice its live size (GOGC=100)
// before it collects.
func (b *Budget) RSSBound(l Limits, idleStates int) int64 {
	l = l.withDefaults()
	stacks := int64(b.limits.MaxConcurrentCalls+idleStates) * int64(l.RegistryMaxSize) * valueSlotBytes
	return 2 * (b.limits.MaxMemory + stacks)
}

// IdleStates is how many states a pool keeps.
func (p *Pool) IdleStates() int { return cap(p.idle) }
