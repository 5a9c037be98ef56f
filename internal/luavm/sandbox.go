package luavm

import (
	"fmt"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// removedBaseFuncs are base functions that load code, reach the file system,
// the console or the collector, or let a script swap environments.
var removedBaseFuncs = []string{
	"dofile", "loadfile", "load", "loadstring", "require", "module",
	"collectgarbage", "print", "getfenv", "setfenv", "newproxy",
	"_GOPHER_LUA_VERSION",
}

// unavailable are the globals of standard Lua a script may reach for that the sandbox
// leaves out; reading one raises an error saying so instead of yielding nil. Other unknown
// globals stay nil, as Lua expects.
var unavailable = map[string]bool{
	"os": true, "io": true, "debug": true, "package": true, "coroutine": true, "channel": true,
	"dofile": true, "loadfile": true, "load": true, "loadstring": true, "module": true,
	"collectgarbage": true, "print": true, "getfenv": true, "setfenv": true, "newproxy": true,
}

// libraryNames are the global tables copied into every call's environment.
var libraryNames = []string{"string", "table", "math"}

// sandbox is one Lua state plus pristine copies of everything a script may
// see; each call gets a fresh environment built from them.
type sandbox struct {
	L *lua.LState
	// base holds the allowed base functions and preloaded non-table values.
	base map[string]lua.LValue
	// libs holds pristine library tables; each call receives shallow copies.
	libs map[string]*lua.LTable
	// modules are the preloaded names `require` may return.
	modules map[string]bool
	// envMeta and stringLibMeta name what is missing when a script reads it.
	envMeta, stringLibMeta *lua.LTable
}

func newSandbox(limits Limits, preload map[string]lua.LGFunction) (*sandbox, error) {
	L := lua.NewState(lua.Options{
		SkipOpenLibs:        true,
		CallStackSize:       limits.CallStackSize,
		RegistrySize:        256,
		RegistryMaxSize:     limits.RegistryMaxSize,
		MinimizeStackMemory: true,
	})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
	} {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			L.Close()
			return nil, fmt.Errorf("luavm: opening library %q: %w", lib.name, err)
		}
	}
	globals := L.G.Global
	for _, name := range removedBaseFuncs {
		globals.RawSetString(name, lua.LNil)
	}

	sb := &sandbox{L: L, base: map[string]lua.LValue{}, libs: map[string]*lua.LTable{}, modules: map[string]bool{}}
	strLib := globals.RawGetString("string").(*lua.LTable)
	strLib.RawSetString("dump", lua.LNil)
	strLib.RawSetString("__index", lua.LNil) // OpenString makes the lib its own metatable; we use a separate one below.
	for name, fn := range boundedStringFuncs(strLib, limits) {
		strLib.RawSetString(name, L.NewFunction(fn))
	}
	tabLib := globals.RawGetString("table").(*lua.LTable)
	tabLib.RawSetString("concat", L.NewFunction(boundedTableConcat(limits.MaxValueBytes)))
	tabLib.RawSetString("insert", L.NewFunction(charged("table.insert", slotCost, builtin(tabLib, "insert"))))
	globals.RawSetString("rawset", L.NewFunction(charged("rawset", slotCost, builtin(globals, "rawset"))))

	for _, name := range libraryNames {
		sb.libs[name] = globals.RawGetString(name).(*lua.LTable)
	}
	globals.ForEach(func(k, v lua.LValue) {
		name, ok := k.(lua.LString)
		if !ok || name == "_G" {
			return
		}
		if _, isLib := sb.libs[string(name)]; isLib {
			return
		}
		sb.base[string(name)] = v
	})

	sb.envMeta = missingMeta(L, "", unavailable)
	sb.stringLibMeta = missingMeta(L, "string.", map[string]bool{"dump": true})

	// Method calls on strings ("x"):upper() go through this metatable. It
	// points at a private copy of the library, and __metatable hides it from
	// getmetatable, so scripts cannot alter string methods for later calls.
	stringMeta := L.NewTable()
	stringMeta.RawSetString("__index", copyTable(L, strLib))
	stringMeta.RawSetString("__metatable", lua.LString("locked"))
	L.SetMetatable(lua.LString(""), stringMeta)

	for name, loader := range preload {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(loader), NRet: 1, Protect: true}, lua.LString(name)); err != nil {
			L.Close()
			return nil, fmt.Errorf("luavm: preloading module %q: %w", name, err)
		}
		mod := L.Get(-1)
		L.Pop(1)
		sb.modules[name] = true
		if t, ok := mod.(*lua.LTable); ok {
			sb.libs[name] = t
		} else {
			sb.base[name] = mod
		}
	}
	return sb, nil
}

// newEnv builds a fresh global table for one call.
func (sb *sandbox) newEnv() *lua.LTable {
	env := sb.L.CreateTable(0, len(sb.base)+len(sb.libs)+8)
	for name, v := range sb.base {
		env.RawSetString(name, v)
	}
	for name, lib := range sb.libs {
		cp := copyTable(sb.L, lib)
		if name == "string" {
			sb.L.SetMetatable(cp, sb.stringLibMeta)
		}
		env.RawSetString(name, cp)
	}
	env.RawSetString("_G", env)
	sb.L.SetMetatable(env, sb.envMeta)
	// require returns this call's copy of a preloaded module and nothing else, so scripts
	// written as `local kube = require("kube")` work while no code can be loaded.
	env.RawSetString("require", sb.L.NewFunction(func(L *lua.LState) int {
		name := L.CheckString(1)
		if !sb.modules[name] {
			L.RaiseError("require(%q): only the preloaded modules can be required", name)
		}
		L.Push(env.RawGetString(name))
		return 1
	}))
	return env
}

// missingMeta is a locked metatable whose __index raises "<prefix><name> is not available in
// customizations" for the given names and yields nil for others.
func missingMeta(L *lua.LState, prefix string, names map[string]bool) *lua.LTable {
	mt := L.NewTable()
	mt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		if name, ok := L.Get(2).(lua.LString); ok && names[string(name)] {
			L.RaiseError("%s%s is not available in customizations", prefix, name)
		}
		L.Push(lua.LNil)
		return 1
	}))
	mt.RawSetString("__metatable", lua.LString("locked"))
	return mt
}

// charged charges a fixed cost before calling fn.
func charged(name string, cost int64, fn lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		chargeL(L, cost, name)
		return fn(L)
	}
}

func copyTable(L *lua.LState, src *lua.LTable) *lua.LTable {
	dst := L.CreateTable(0, 32)
	src.ForEach(func(k, v lua.LValue) { dst.RawSet(k, v) })
	return dst
}

// builtin returns the Go implementation behind a library function so a
// bounded wrapper can delegate to it after its own checks.
func builtin(lib *lua.LTable, name string) lua.LGFunction {
	return lib.RawGetString(name).(*lua.LFunction).GFunction
}

// gsubCopyTime is what gopher-lua's gsub costs per byte it copies: it rebuilds the whole
// result for every replacement, so m matches on n bytes copy about 3*m*n bytes (measured
// 0.5-0.9ns per byte).
const gsubCopyTime = time.Nanosecond

func boundedStringFuncs(strLib *lua.LTable, limits Limits) map[string]lua.LGFunction {
	maxBytes := limits.MaxValueBytes
	format := builtin(strLib, "format")
	gsub := builtin(strLib, "gsub")
	find := builtin(strLib, "find")
	match := builtin(strLib, "match")
	gmatch := builtin(strLib, "gmatch")
	maxCopy := float64(limits.Timeout / gsubCopyTime)
	patterned := func(name string, impl lua.LGFunction, allMatches bool) lua.LGFunction {
		return func(L *lua.LState) int {
			if name == "string.find" && lua.LVAsBool(L.Get(4)) {
				return impl(L) // plain search, no pattern
			}
			if err := checkPattern(name, L.CheckString(2), L.CheckString(1), allMatches, limits, chargeFunc(L)); err != nil {
				L.RaiseError("%s", err)
			}
			return impl(L)
		}
	}
	sameSize := func(name string, impl lua.LGFunction) lua.LGFunction {
		return func(L *lua.LState) int {
			chargeL(L, int64(len(L.CheckString(1))+stringCost), name)
			return impl(L)
		}
	}
	return map[string]lua.LGFunction{
		"rep": func(L *lua.LState) int {
			s := L.CheckString(1)
			n := L.CheckInt(2)
			if n <= 0 || s == "" {
				L.Push(lua.LString(""))
				return 1
			}
			if n > maxBytes/len(s) {
				L.RaiseError("string.rep would build %d*%d bytes, over the limit of %d bytes (Limits.MaxValueBytes)", len(s), n, maxBytes)
			}
			chargeL(L, int64(len(s)*n+stringCost), "string.rep")
			L.Push(lua.LString(strings.Repeat(s, n)))
			return 1
		},
		"format": func(L *lua.LState) int {
			f := L.CheckString(1)
			if err := checkFormatWidths(f); err != nil {
				L.RaiseError("string.format: %s", err)
			}
			// Each directive prints at most its argument's text or 99 columns plus a number.
			size := len(f)
			for i := 2; i <= L.GetTop(); i++ {
				size += 128
				if s, ok := L.Get(i).(lua.LString); ok {
					size += len(s)
				}
			}
			if size > maxBytes {
				L.RaiseError("string.format could build %d bytes, over the limit of %d bytes (Limits.MaxValueBytes)", size, maxBytes)
			}
			chargeL(L, int64(size), "string.format")
			return format(L)
		},
		"upper":   sameSize("string.upper", builtin(strLib, "upper")),
		"lower":   sameSize("string.lower", builtin(strLib, "lower")),
		"reverse": sameSize("string.reverse", builtin(strLib, "reverse")),
		"find":    patterned("string.find", find, false),
		"match":   patterned("string.match", match, false),
		"gmatch":  patterned("string.gmatch", gmatch, true),
		"gsub": func(L *lua.LState) int {
			s := L.CheckString(1)
			pat := L.CheckString(2)
			if err := checkPattern("string.gsub", pat, s, true, limits, chargeFunc(L)); err != nil {
				L.RaiseError("%s", err)
			}
			bound, _ := boundPattern(pat, s)
			matches := bound.matches
			if n := L.OptInt(4, -1); n >= 0 {
				matches = min(matches, float64(n))
			}
			copyCost := func(result int) float64 { return 3 * matches * float64(max(len(s), result)) }
			switch repl := L.Get(3).(type) {
			case lua.LString:
				// Each capture reference (%0-%9) can expand to the whole subject.
				perMatch := len(repl) + strings.Count(string(repl), "%")*len(s)
				worst := len(s) + (len(s)+1)*perMatch
				if worst > maxBytes || worst < 0 {
					L.RaiseError("string.gsub could build up to %d bytes, over the limit of %d bytes (Limits.MaxValueBytes); use a shorter subject or replacement", worst, maxBytes)
				}
				if c := copyCost(len(s) + int(matches)*perMatch); c > maxCopy {
					L.RaiseError("string.gsub could copy %.3g bytes for up to %.0f replacements, over the limit of %.3g for the time limit of %s; use a shorter subject or fewer matches", c, matches, maxCopy, limits.Timeout)
				}
			case *lua.LTable, *lua.LFunction:
				// The replacements come from Lua; count them as they are returned.
				built := len(s)
				L.Replace(3, L.NewFunction(func(L *lua.LState) int {
					var v lua.LValue
					if t, ok := repl.(*lua.LTable); ok {
						v = L.GetTable(t, L.Get(1))
					} else {
						nargs := L.GetTop()
						L.Push(repl)
						for i := 1; i <= nargs; i++ {
							L.Push(L.Get(i))
						}
						L.Call(nargs, 1)
						v = L.Get(-1)
					}
					if lua.LVCanConvToString(v) {
						built += len(lua.LVAsString(v))
					}
					if built > maxBytes {
						L.RaiseError("string.gsub result is over the limit of %d bytes (Limits.MaxValueBytes); use a shorter subject or replacement", maxBytes)
					}
					if c := copyCost(built); c > maxCopy {
						L.RaiseError("string.gsub could copy %.3g bytes for up to %.0f replacements, over the limit of %.3g for the time limit of %s; use a shorter subject or fewer matches", c, matches, maxCopy, limits.Timeout)
					}
					L.Push(v)
					return 1
				}))
			}
			// The result is bounded above; gsub holds about three copies of it while building.
			n := gsub(L)
			if out, ok := L.Get(-n).(lua.LString); ok {
				chargeL(L, int64(3*len(out)+stringCost), "string.gsub")
			}
			return n
		},
	}
}

// chargeFunc charges L's running call, raising a Lua error when over a limit.
func chargeFunc(L *lua.LState) func(int64, string) {
	return func(n int64, what string) { chargeL(L, n, what) }
}

// checkFormatWidths refuses widths or precisions over 99, as C Lua does; Go's
// fmt would otherwise pad to any width, e.g. "%1000000000d".
func checkFormatWidths(format string) error {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		run := 0
		for i++; i < len(format) && strings.IndexByte("0123456789.-+ #", format[i]) >= 0; i++ {
			if format[i] >= '0' && format[i] <= '9' {
				run++
				if run > 2 {
					return fmt.Errorf("width or precision in %q is over 99", format)
				}
			} else {
				run = 0
			}
		}
	}
	return nil
}

// boundedTableConcat adds up the result size before building it.
func boundedTableConcat(maxBytes int) lua.LGFunction {
	return func(L *lua.LState) int {
		t := L.CheckTable(1)
		sep := L.OptString(2, "")
		first := L.OptInt(3, 1)
		last := L.OptInt(4, t.Len())
		if first > last {
			L.Push(lua.LString(""))
			return 1
		}
		parts := make([]string, 0, min(last-first+1, 1024))
		total := 0
		for i := first; i <= last; i++ {
			var part string
			switch v := t.RawGetInt(i).(type) {
			case lua.LString:
				part = string(v)
			case lua.LNumber:
				part = v.String()
			default:
				L.RaiseError("table.concat: invalid value (a %s) at index %d; only strings and numbers can be joined", v.Type(), i)
			}
			total += len(part)
			if i > first {
				total += len(sep)
			}
			if total > maxBytes {
				L.RaiseError("table.concat result is over the limit of %d bytes (Limits.MaxValueBytes)", maxBytes)
			}
			parts = append(parts, part)
		}
		chargeL(L, int64(total+stringCost), "table.concat")
		L.Push(lua.LString(strings.Join(parts, sep)))
		return 1
	}
}
