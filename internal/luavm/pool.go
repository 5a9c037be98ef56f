package luavm

import (
	"context"
	"fmt"
	"runtime"

	lua "github.com/yuin/gopher-lua"
)

// PoolOptions configures a Pool. The zero value is usable.
type PoolOptions struct {
	// Limits bounds every call; zero fields take DefaultLimits.
	Limits Limits
	// Preload is the extension point for helper libraries (for example a
	// future "kube" module). Each loader runs once per new state with the
	// module name as its argument and must return one value; that value is
	// exposed to scripts as a global of that name. Table modules are copied
	// per call like the standard libraries, so scripts cannot alter them for
	// later calls. Loaders are trusted Go code and run without limits.
	Preload map[string]lua.LGFunction
	// MaxIdle is how many idle states are kept; default 2*GOMAXPROCS.
	MaxIdle int
	// Budget is shared with other pools; nil means the process budget (SetProcessLimits).
	Budget *Budget
}

// Pool reuses sandboxed Lua states across calls. It is safe for concurrent use.
type Pool struct {
	limits  Limits
	preload map[string]lua.LGFunction
	idle    chan *sandbox
	own     *Budget
}

// NewPool returns a pool; states are created lazily on demand.
func NewPool(opts PoolOptions) *Pool {
	maxIdle := opts.MaxIdle
	if maxIdle <= 0 {
		maxIdle = 2 * runtime.GOMAXPROCS(0)
	}
	return &Pool{
		limits:  opts.Limits.withDefaults(),
		preload: opts.Preload,
		idle:    make(chan *sandbox, maxIdle),
		own:     opts.Budget,
	}
}

// Budget returns the budget the pool's calls share.
func (p *Pool) Budget() *Budget {
	if p.own != nil {
		return p.own
	}
	return ProcessBudget()
}

// Limits returns the effective limits.
func (p *Pool) Limits() Limits { return p.limits }

// Close closes idle states. Calls may still run afterwards; their states are
// then simply not kept.
func (p *Pool) Close() {
	for {
		select {
		case sb := <-p.idle:
			sb.L.Close()
		default:
			return
		}
	}
}

func (p *Pool) get() (*sandbox, error) {
	select {
	case sb := <-p.idle:
		return sb, nil
	default:
		return newSandbox(p.limits, p.preload)
	}
}

func (p *Pool) put(sb *sandbox) {
	sb.L.SetTop(0)
	select {
	case p.idle <- sb:
	default:
		sb.L.Close()
	}
}

// Call runs function fn of script s with args converted to Lua and returns
// exactly nresults converted results (missing results are nil). The deadline
// is the earlier of ctx's and Limits.Timeout. The call first waits for a slot of
// the budget, then charges what it allocates to it. A state that saw any error
// is discarded rather than reused, so a failed call cannot affect later ones.
func (p *Pool) Call(ctx context.Context, s *Script, fn string, nresults int, args ...any) ([]any, error) {
	if !s.Has(fn) {
		return nil, fmt.Errorf("luavm: script %q does not define function %s", s.name, fn)
	}
	b := p.Budget()
	if err := b.acquire(ctx); err != nil {
		return nil, fmt.Errorf("luavm: %s in script %q: %w", fn, s.name, err)
	}
	defer b.releaseSlot()
	sb, err := p.get()
	if err != nil {
		return nil, err
	}
	acct := b.newAccount(p.limits)
	results, err := p.call(ctx, sb, acct, s, fn, nresults, args)
	setAccount(sb.L, nil)
	acct.release()
	if err != nil {
		sb.L.Close()
		if acct.stopped.Load() {
			b.returnMemory()
		}
		return nil, err
	}
	p.put(sb)
	return results, nil
}

func (p *Pool) call(ctx context.Context, sb *sandbox, acct *account, s *Script, fn string, nresults int, args []any) ([]any, error) {
	timed, cancelTimeout := context.WithTimeout(ctx, p.limits.Timeout)
	defer cancelTimeout()
	callCtx, cancel := context.WithCancelCause(timed)
	defer cancel(nil)
	acct.stop = cancel
	defer watchHeap(func(err error) { acct.stopped.Store(true); cancel(err) }, p.limits.MaxHeapGrowth)()
	setAccount(sb.L, acct)
	hooked := newHookCtx(callCtx, sb.L, acct)

	env, err := sb.loadScript(hooked, s)
	if err != nil {
		return nil, describeError(callCtx, ctx, p.limits, s, "", err)
	}
	target, ok := env.RawGetString(fn).(*lua.LFunction)
	if !ok {
		return nil, fmt.Errorf("luavm: script %q does not define function %s", s.name, fn)
	}

	inBudget := newBudget(p.limits.MaxValueBytes)
	luaArgs := make([]lua.LValue, len(args))
	for i, a := range args {
		if luaArgs[i], err = toLua(sb.L, a, 0, inBudget); err != nil {
			return nil, fmt.Errorf("luavm: argument %d of %s in script %q: %w", i+1, fn, s.name, err)
		}
	}
	if err := acct.charge(int64(inBudget.limit-inBudget.left), "the arguments", nil); err != nil {
		return nil, fmt.Errorf("luavm: %s in script %q: %w", fn, s.name, err)
	}

	sb.L.SetContext(hooked)
	err = sb.L.CallByParam(lua.P{Fn: target, NRet: nresults, Protect: true}, luaArgs...)
	sb.L.RemoveContext()
	if err != nil {
		return nil, describeError(callCtx, ctx, p.limits, s, fn, err)
	}

	outBudget := newBudget(p.limits.MaxValueBytes)
	results := make([]any, nresults)
	base := sb.L.GetTop() - nresults
	for i := range results {
		if results[i], err = fromLua(sb.L.Get(base+i+1), 0, outBudget); err != nil {
			return nil, fmt.Errorf("luavm: result %d of %s in script %q: %w", i+1, fn, s.name, err)
		}
	}
	sb.L.Pop(nresults)
	return results, nil
}
