package luavm

import "time"

// MaxDepth bounds the nesting of converted values; real objects stay far below
// it, and it turns a self-referencing Lua table into an error, not a hang.
const MaxDepth = 64

// Limits bounds what one call may consume. Zero fields take the default.
type Limits struct {
	// Timeout is the wall-clock limit of one call, including running the
	// script's top level to define its functions.
	Timeout time.Duration
	// CallStackSize is the maximum Lua call depth.
	CallStackSize int
	// RegistryMaxSize is the maximum number of value-stack slots.
	RegistryMaxSize int
	// MaxValueBytes bounds the estimated size of the inputs, of the results,
	// and of any single string built by string.rep, string.format,
	// string.gsub or table.concat.
	MaxValueBytes int
	// MaxMemory bounds the estimated bytes one call may allocate: strings built by `..` and
	// the string functions, tables and their new keys, closures, and the stack and matches of
	// pattern matching. Each is charged before it is built, also against the process budget
	// (ProcessLimits.MaxMemory).
	MaxMemory int64
	// MaxHeapGrowth is the backstop for allocations MaxMemory does not see: how much the
	// process heap may grow while one call runs. Checked every 2ms once a call runs longer
	// than 5ms.
	MaxHeapGrowth int64
}

// DefaultLimits returns limits suited to small per-object interpreter scripts.
func DefaultLimits() Limits {
	return Limits{
		Timeout:         500 * time.Millisecond,
		CallStackSize:   200,
		RegistryMaxSize: 1 << 20,
		MaxValueBytes:   4 << 20,
		MaxMemory:       64 << 20,
		MaxHeapGrowth:   256 << 20,
	}
}

// withDefaults fills zero (or negative) fields so callers can set only what
// they care about.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	if l.CallStackSize <= 0 {
		l.CallStackSize = d.CallStackSize
	}
	if l.RegistryMaxSize <= 0 {
		l.RegistryMaxSize = d.RegistryMaxSize
	}
	if l.MaxValueBytes <= 0 {
		l.MaxValueBytes = d.MaxValueBytes
	}
	if l.MaxMemory <= 0 {
		l.MaxMemory = d.MaxMemory
	}
	if l.MaxHeapGrowth <= 0 {
		l.MaxHeapGrowth = d.MaxHeapGrowth
	}
	return l
}
