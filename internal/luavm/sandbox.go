package luavm

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// removedBaseFuncs are base functions that load code, reach the file system,
// the console or the collector, or let a script swap environments.
var removedBaseFuncs = []string{
	"dofile", "loadfile", "load", "loadstring", "require", "module",
	"collectgarbage", "print", "getfenv", "setfenv", "newproxy",
	"_GOPHER_LUA_VERSION",
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
	for name, fn := range boundedStringFuncs(strLib, limits.MaxValueBytes) {
		strLib.RawSetString(name, L.NewFunction(fn))
	}
	tabLib := globals.RawGetString("table").(*lua.LTable)
	tabLib.RawSetString("concat", L.NewFunction(boundedTableConcat(limits.MaxValueBytes)))

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
		env.RawSetString(name, copyTable(sb.L, lib))
	}
	env.RawSetString("_G", env)
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

func boundedStringFuncs(strLib *lua.LTable, maxBytes int) map[string]lua.LGFunction {
	format := builtin(strLib, "format")
	gsub := builtin(strLib, "gsub")
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
			L.Push(lua.LString(strings.Repeat(s, n)))
			return 1
		},
		"format": func(L *lua.LState) int {
			if err := checkFormatWidths(L.CheckString(1)); err != nil {
				L.RaiseError("string.format: %s", err)
			}
			return format(L)
		},
		"gsub": func(L *lua.LState) int {
			s := L.CheckString(1)
			if repl, ok := L.Get(3).(lua.LString); ok {
				// Each capture reference (%0-%9) can expand to the whole subject.
				perMatch := len(repl) + strings.Count(string(repl), "%")*len(s)
				worst := len(s) + (len(s)+1)*perMatch
				if worst > maxBytes || worst < 0 {
					L.RaiseError("string.gsub could build up to %d bytes, over the limit of %d bytes (Limits.MaxValueBytes); use a shorter subject or replacement", worst, maxBytes)
				}
			}
			// Table and function replacements return strings that were
			// themselves built by bounded functions or by `..`.
			return gsub(L)
		},
	}
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
		L.Push(lua.LString(strings.Join(parts, sep)))
		return 1
	}
}
