package luavm

import (
	"context"
	"fmt"
	"reflect"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// gopher-lua has no allocation or instruction hook, but its VM asks the state's context for
// Done() before every instruction when a context is set. hookCtx answers that call and, before
// returning, looks at the instruction about to run: the ones that allocate (`..`, table
// constructors, stores of new keys, closures) are charged to the call's account first, and a
// `..` whose result would pass Limits.MaxValueBytes stops the call before the string exists.
//
// Which instruction is next is only in the state's unexported current frame. Its field offsets
// are looked up by name with reflect once, at start-up, and checked against the types this code
// reads; if a gopher-lua upgrade changes them, hookSupported is false, the allocating
// instructions are no longer checked (the heap watchdog still is), and TestInstructionHook
// fails.
var frameLayout struct {
	current, fn, pc uintptr
}

var hookSupported = func() bool {
	cur, ok := reflect.TypeFor[lua.LState]().FieldByName("currentFrame")
	if !ok || cur.Type.Kind() != reflect.Pointer || cur.Type.Elem().Kind() != reflect.Struct {
		return false
	}
	fn, ok1 := cur.Type.Elem().FieldByName("Fn")
	pc, ok2 := cur.Type.Elem().FieldByName("Pc")
	if !ok1 || !ok2 || fn.Type != reflect.TypeFor[*lua.LFunction]() || pc.Type != reflect.TypeFor[int]() {
		return false
	}
	frameLayout.current, frameLayout.fn, frameLayout.pc = cur.Offset, fn.Offset, pc.Offset
	return true
}()

// nextInstruction returns the function and instruction the VM is about to execute: it
// increments the frame's pc before asking for Done().
func nextInstruction(L *lua.LState) (*lua.LFunction, uint32, bool) {
	frame := *(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(L), frameLayout.current))
	if frame == nil {
		return nil, 0, false
	}
	fn := *(**lua.LFunction)(unsafe.Add(frame, frameLayout.fn))
	if fn == nil || fn.IsG || fn.Proto == nil {
		return nil, 0, false
	}
	pc := *(*int)(unsafe.Add(frame, frameLayout.pc))
	if pc < 1 || pc > len(fn.Proto.Code) {
		return nil, 0, false
	}
	return fn, fn.Proto.Code[pc-1], true
}

// Estimated costs of what the VM allocates; the right order of magnitude is enough.
const (
	tableCost   = 128 // an empty table
	slotCost    = 64  // a new array slot or hash entry, including growth slack
	closureCost = 128
	numberText  = 24 // a number converted to text by `..`
)

// hookCtx is the context a running call hands the VM.
type hookCtx struct {
	context.Context
	done <-chan struct{}
	L    *lua.LState
	acct *account
}

func newHookCtx(ctx context.Context, L *lua.LState, acct *account) *hookCtx {
	return &hookCtx{Context: ctx, done: ctx.Done(), L: L, acct: acct}
}

func (h *hookCtx) Done() <-chan struct{} {
	if hookSupported {
		if fn, inst, ok := nextInstruction(h.L); ok {
			h.check(fn, inst)
		}
	}
	return h.done
}

// check charges the instruction about to run; on failure the account cancels the call, so
// the Done channel returned next is closed and the VM raises before executing it.
func (h *hookCtx) check(fn *lua.LFunction, inst uint32) {
	L := h.L
	a := int(inst>>18) & 0xff
	b := int(inst & 0x1ff)
	c := int(inst>>9) & 0x1ff
	switch int(inst >> 26) {
	case lua.OP_CONCAT:
		var n int64
		for r := b; r <= c; r++ {
			switch v := L.Get(r + 1).(type) {
			case lua.LString:
				n += int64(len(v))
			case lua.LNumber:
				n += numberText
			}
		}
		if n > int64(h.acct.valueMax) {
			_ = h.acct.tooLong(n, "`..`", h.where)
			return
		}
		_ = h.acct.charge(n+stringCost, "`..`", h.where)
	case lua.OP_NEWTABLE:
		_ = h.acct.charge(tableCost+int64(b)*16+int64(c)*slotCost, "a table constructor", h.where)
	case lua.OP_SETLIST:
		n := b
		if n == 0 { // up to the top of the stack
			n = max(0, L.GetTop()-a-1)
		}
		_ = h.acct.charge(int64(n)*slotCost, "a table constructor", h.where)
	case lua.OP_SETTABLE, lua.OP_SETTABLEKS:
		t, ok := L.Get(a + 1).(*lua.LTable)
		if !ok || rk(L, fn, c) == lua.LNil || t.RawGet(rk(L, fn, b)) != lua.LNil {
			return // not a table, a delete, or an existing key: nothing grows
		}
		_ = h.acct.charge(slotCost, "a new table key", h.where)
	case lua.OP_SETGLOBAL:
		bx := int(inst & 0x3ffff)
		if fn.Env == nil || bx >= len(fn.Proto.Constants) || fn.Env.RawGet(fn.Proto.Constants[bx]) != lua.LNil {
			return
		}
		_ = h.acct.charge(slotCost, "a new global", h.where)
	case lua.OP_CLOSURE:
		_ = h.acct.charge(closureCost, "a function", h.where)
	}
}

// rk reads a register or a constant operand.
func rk(L *lua.LState, fn *lua.LFunction, x int) lua.LValue {
	if x&0x100 != 0 {
		if i := x & 0xff; i < len(fn.Proto.Constants) {
			return fn.Proto.Constants[i]
		}
		return lua.LNil
	}
	return L.Get(x + 1)
}

// where prefixes a message with the script and line about to run, as Lua errors do. It is
// only called to build an error.
func (h *hookCtx) where() string {
	fn, _, ok := nextInstruction(h.L)
	if !ok {
		return ""
	}
	frame := *(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(h.L), frameLayout.current))
	pc := *(*int)(unsafe.Add(frame, frameLayout.pc))
	if pc > len(fn.Proto.DbgSourcePositions) {
		return fn.Proto.SourceName + ": "
	}
	return fmt.Sprintf("%s:%d: ", fn.Proto.SourceName, fn.Proto.DbgSourcePositions[pc-1])
}
