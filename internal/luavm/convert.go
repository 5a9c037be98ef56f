package luavm

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Rough per-value costs for the byte budget. They only need to be in the
// right order of magnitude so that a huge value is refused early.
const (
	scalarCost    = 8
	containerCost = 32
	stringCost    = 16
)

// valueError carries the path to the offending value, built up while the
// recursion unwinds so the happy path never formats paths.
type valueError struct {
	path []string // innermost segment last after reverse
	msg  string
}

func (e *valueError) Error() string {
	var b strings.Builder
	for i := len(e.path) - 1; i >= 0; i-- {
		b.WriteString(e.path[i])
	}
	if b.Len() == 0 {
		return e.msg
	}
	return "at " + b.String() + ": " + e.msg
}

func errAt(err error, segment string) error {
	if ve, ok := err.(*valueError); ok {
		ve.path = append(ve.path, segment)
		return ve
	}
	return err
}

func keySegment(k string) string {
	return "." + k
}

func indexSegment(i int) string {
	return "[" + strconv.Itoa(i) + "]"
}

// budget counts down estimated bytes shared by all values of one direction of
// one call.
type budget struct {
	left  int
	limit int
}

func newBudget(limit int) *budget { return &budget{left: limit, limit: limit} }

func (b *budget) spend(n int) error {
	b.left -= n
	if b.left < 0 {
		return &valueError{msg: fmt.Sprintf("value exceeds the size limit of %d bytes (Limits.MaxValueBytes); return or pass a smaller value", b.limit)}
	}
	return nil
}

func depthError() error {
	return &valueError{msg: fmt.Sprintf("value is nested deeper than %d levels (is a table referencing itself?)", MaxDepth)}
}

// toLua converts a plain Go value into a Lua value owned by L.
func toLua(L *lua.LState, v any, depth int, b *budget) (lua.LValue, error) {
	if depth > MaxDepth {
		return nil, depthError()
	}
	switch x := v.(type) {
	case nil:
		return lua.LNil, b.spend(scalarCost)
	case bool:
		return lua.LBool(x), b.spend(scalarCost)
	case string:
		return lua.LString(x), b.spend(stringCost + len(x))
	case int64:
		return lua.LNumber(x), b.spend(scalarCost)
	case int:
		return lua.LNumber(x), b.spend(scalarCost)
	case int32:
		return lua.LNumber(x), b.spend(scalarCost)
	case float64:
		return lua.LNumber(x), b.spend(scalarCost)
	case float32:
		return lua.LNumber(x), b.spend(scalarCost)
	case map[string]any:
		if err := b.spend(containerCost); err != nil {
			return nil, err
		}
		t := L.CreateTable(0, len(x))
		for k, elem := range x {
			if elem == nil {
				continue // Lua cannot store nil in a table; absent is equivalent.
			}
			if err := b.spend(stringCost + len(k)); err != nil {
				return nil, err
			}
			lv, err := toLua(L, elem, depth+1, b)
			if err != nil {
				return nil, errAt(err, keySegment(k))
			}
			t.RawSetString(k, lv)
		}
		return t, nil
	case []any:
		if err := b.spend(containerCost); err != nil {
			return nil, err
		}
		t := L.CreateTable(len(x), 0)
		if len(x) == 0 {
			// An empty Lua table cannot tell a list from a map; the marker keeps `[]` a list
			// on the way back, so `tolerations: []` does not come back as `{}`.
			L.SetMetatable(t, emptyListMeta(L))
		}
		for i, elem := range x {
			if elem == nil {
				return nil, &valueError{path: []string{indexSegment(i)}, msg: "nil list element cannot be represented in a Lua array; remove it or use a map"}
			}
			lv, err := toLua(L, elem, depth+1, b)
			if err != nil {
				return nil, errAt(err, indexSegment(i))
			}
			t.RawSetInt(i+1, lv)
		}
		return t, nil
	default:
		return nil, &valueError{msg: fmt.Sprintf("unsupported Go type %T; use map[string]any, []any, string, bool, int64, float64 or nil", v)}
	}
}

// fromLua converts a Lua value into a plain Go value.
func fromLua(v lua.LValue, depth int, b *budget) (any, error) {
	if depth > MaxDepth {
		return nil, depthError()
	}
	switch x := v.(type) {
	case *lua.LNilType:
		return nil, b.spend(scalarCost)
	case lua.LBool:
		return bool(x), b.spend(scalarCost)
	case lua.LString:
		return string(x), b.spend(stringCost + len(x))
	case lua.LNumber:
		if err := b.spend(scalarCost); err != nil {
			return nil, err
		}
		return numberToGo(x)
	case *lua.LTable:
		if err := b.spend(containerCost); err != nil {
			return nil, err
		}
		return tableToGo(x, depth, b)
	default:
		return nil, &valueError{msg: fmt.Sprintf("a Lua %s cannot be converted; return only tables, strings, numbers, booleans or nil", v.Type())}
	}
}

func numberToGo(n lua.LNumber) (any, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, &valueError{msg: fmt.Sprintf("number %v is not finite and cannot be stored in an object", f)}
	}
	// 2^63 is exactly representable; anything at or beyond it overflows int64.
	if f == math.Trunc(f) && f >= -(1<<63) && f < (1<<63) {
		return int64(f), nil
	}
	return f, nil
}

// isListKey reports whether k is a positive whole number usable as a list index.
func isListKey(k lua.LValue) (int, bool) {
	n, ok := k.(lua.LNumber)
	if !ok {
		return 0, false
	}
	f := float64(n)
	if f < 1 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

func tableToGo(t *lua.LTable, depth int, b *budget) (any, error) {
	var (
		count, maxIndex   int
		strKeys, intKeys  int
		firstIntKey       lua.LValue
		firstStringKeyStr string
	)
	var badKey lua.LValue
	t.ForEach(func(k, _ lua.LValue) {
		count++
		switch kk := k.(type) {
		case lua.LString:
			if strKeys == 0 {
				firstStringKeyStr = string(kk)
			}
			strKeys++
		default:
			i, ok := isListKey(k)
			if !ok {
				if badKey == nil {
					badKey = k
				}
				return
			}
			if intKeys == 0 {
				firstIntKey = k
			}
			intKeys++
			if i > maxIndex {
				maxIndex = i
			}
		}
	})
	switch {
	case badKey != nil:
		return nil, &valueError{msg: fmt.Sprintf("table key %s (a %s) is neither a string nor a list index 1..n; use string keys", badKey.String(), badKey.Type())}
	case strKeys > 0 && intKeys > 0:
		return nil, &valueError{msg: fmt.Sprintf("table mixes list index %s with string key %q; use either a list or a map", firstIntKey.String(), firstStringKeyStr)}
	case intKeys > 0:
		if maxIndex != count {
			return nil, &valueError{msg: fmt.Sprintf("list has %d elements but index %d; list indexes must be exactly 1..n without holes", count, maxIndex)}
		}
		out := make([]any, count)
		for i := 1; i <= count; i++ {
			elem, err := fromLua(t.RawGetInt(i), depth+1, b)
			if err != nil {
				return nil, errAt(err, indexSegment(i-1))
			}
			out[i-1] = elem
		}
		return out, nil
	case count == 0 && isMarkedList(t):
		return []any{}, nil
	default:
		// Empty tables land here too: with no keys a map is the safer guess
		// for object fields.
		out := make(map[string]any, strKeys)
		var err error
		t.ForEach(func(k, v lua.LValue) {
			if err != nil {
				return
			}
			key := string(k.(lua.LString))
			if err = b.spend(stringCost + len(key)); err != nil {
				err = errAt(err, keySegment(key))
				return
			}
			var elem any
			if elem, err = fromLua(v, depth+1, b); err != nil {
				err = errAt(err, keySegment(key))
				return
			}
			out[key] = elem
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// ToGo converts a Lua value to plain Go values for trusted Go helpers (preloaded modules),
// with the default size budget.
func ToGo(v lua.LValue) (any, error) {
	return fromLua(v, 0, newBudget(DefaultLimits().MaxValueBytes))
}

// ToLua converts plain Go values to a Lua value owned by L for trusted Go helpers.
// What it builds is charged to the running call.
func ToLua(L *lua.LState, v any) (lua.LValue, error) {
	b := newBudget(DefaultLimits().MaxValueBytes)
	lv, err := toLua(L, v, 0, b)
	if err != nil {
		return nil, err
	}
	if a := accountOf(L); a != nil {
		if err := a.charge(int64(b.limit-b.left), "a preloaded module's result", nil); err != nil {
			return nil, err
		}
	}
	return lv, nil
}

// listMarker is the protected-metatable value that marks a table converted from an empty
// list; getmetatable returns it and setmetatable cannot replace it.
const listMarker = "list"

// emptyListMeta returns the state's marker metatable, created once per state.
func emptyListMeta(L *lua.LState) *lua.LTable {
	if mt, ok := L.G.Registry.RawGetString("flotilla.emptyList").(*lua.LTable); ok {
		return mt
	}
	mt := L.NewTable()
	mt.RawSetString("__metatable", lua.LString(listMarker))
	L.G.Registry.RawSetString("flotilla.emptyList", mt)
	return mt
}

func isMarkedList(t *lua.LTable) bool {
	mt, ok := t.Metatable.(*lua.LTable)
	return ok && mt.RawGetString("__metatable") == lua.LString(listMarker)
}
