package luavm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// Script is Lua source compiled once; it is immutable and safe to share
// between goroutines and calls.
type Script struct {
	name      string
	proto     *lua.FunctionProto
	functions map[string]bool
}

// Name is the chunk name used in error messages.
func (s *Script) Name() string { return s.name }

// Has reports whether the script's top level defines a global function fn.
func (s *Script) Has(fn string) bool { return s.functions[fn] }

// Compile parses and compiles source so syntax errors surface at admission,
// with the line number, instead of at the first call. It then runs the top
// level once in a fresh sandbox under DefaultLimits to learn which functions
// the script defines; a top level that fails or loops is an error here too.
// Preloaded modules are not available to package Compile; Pool.Compile has them.
func Compile(name, source string) (*Script, error) {
	return compileScript(name, source, DefaultLimits(), nil, ProcessBudget())
}

// Compile is the package Compile with the pool's limits and preloaded modules available to
// the script's top level.
func (p *Pool) Compile(name, source string) (*Script, error) {
	return compileScript(name, source, p.limits, p.preload, p.Budget())
}

func compileScript(name, source string, limits Limits, preload map[string]lua.LGFunction, b *Budget) (*Script, error) {
	if len(source) > limits.MaxValueBytes {
		return nil, fmt.Errorf("luavm: script %q is %d bytes, over the limit of %d bytes", name, len(source), limits.MaxValueBytes)
	}
	chunk, err := parse.Parse(strings.NewReader(source), name)
	if err != nil {
		return nil, fmt.Errorf("luavm: syntax error in script %q: %w", name, err)
	}
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		return nil, fmt.Errorf("luavm: compiling script %q: %w", name, err)
	}
	s := &Script{name: name, proto: proto, functions: map[string]bool{}}

	if err := b.acquire(context.Background()); err != nil {
		return nil, err
	}
	defer b.releaseSlot()
	sb, err := newSandbox(limits, preload)
	if err != nil {
		return nil, err
	}
	defer sb.L.Close()
	acct := b.newAccount(limits)
	defer acct.release()
	timed, cancelTimeout := context.WithTimeout(context.Background(), limits.Timeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(timed)
	defer cancel(nil)
	acct.stop = cancel
	defer watchHeap(cancel, limits.MaxHeapGrowth)()
	setAccount(sb.L, acct)
	env, err := sb.loadScript(newHookCtx(ctx, sb.L, acct), s)
	if err != nil {
		return nil, describeError(ctx, context.Background(), limits, s, "", err)
	}
	env.ForEach(func(k, v lua.LValue) {
		if _, ok := v.(*lua.LFunction); !ok {
			return
		}
		if name, ok := k.(lua.LString); ok && sb.base[string(name)] != v && name != "require" {
			s.functions[string(name)] = true
		}
	})
	return s, nil
}

// loadScript runs the script's top level in a fresh environment so its
// functions are defined, and returns that environment.
func (sb *sandbox) loadScript(ctx context.Context, s *Script) (*lua.LTable, error) {
	env := sb.newEnv()
	chunk := sb.L.NewFunctionFromProto(s.proto)
	chunk.Env = env
	sb.L.SetContext(ctx)
	defer sb.L.RemoveContext()
	if err := sb.L.CallByParam(lua.P{Fn: chunk, NRet: 0, Protect: true}); err != nil {
		return nil, err
	}
	return env, nil
}

// describeError turns a gopher-lua error into one that names the function,
// the script and the limit that was hit. callCtx carries the effective
// deadline; parent is the caller's context.
func describeError(callCtx, parent context.Context, limits Limits, s *Script, fn string, err error) error {
	where := fmt.Sprintf("script %q", s.name)
	if fn != "" {
		where = fmt.Sprintf("%s in script %q", fn, s.name)
	}
	if parent.Err() != nil {
		return fmt.Errorf("luavm: %s: %w", where, parent.Err())
	}
	if errors.Is(context.Cause(callCtx), errHeapLimit) {
		return heapLimitError(where, limits)
	}
	var memErr *memoryError
	if errors.As(context.Cause(callCtx), &memErr) {
		// A Go function raised it with the Lua line; the instruction hook put the line in it.
		msg := memErr.msg
		if apiErr, ok := err.(*lua.ApiError); ok && strings.Contains(apiErr.Object.String(), memErr.msg) {
			msg = apiErr.Object.String()
		}
		return fmt.Errorf("luavm: %s: %s", where, msg)
	}
	if callCtx.Err() != nil {
		return fmt.Errorf("luavm: %s exceeded the time limit of %s; make the script do less work per call", where, limits.Timeout)
	}
	msg := err.Error()
	if apiErr, ok := err.(*lua.ApiError); ok {
		msg = apiErr.Object.String() // drop the Go stack trace; it helps no script author
	}
	if strings.Contains(msg, "stack overflow") {
		return fmt.Errorf("luavm: %s: stack overflow (call depth over %d frames); check for unbounded recursion: %s", where, limits.CallStackSize, msg)
	}
	return fmt.Errorf("luavm: %s: %s", where, msg)
}
