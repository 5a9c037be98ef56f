// Package luavm runs untrusted, user-provided Lua (resource interpreter
// customizations) inside a sandbox with time, call-depth, stack and size
// limits.
//
// The package deliberately knows nothing about Kubernetes: it must not import
// API types or clients. Callers pass plain Go values of the shapes unstructured
// objects hold (map[string]any, []any, string, bool, int64, float64, nil) and
// get the same shapes back. Keeping Kubernetes out means a script can never
// reach the API server, and the sandbox can be reviewed on its own.
//
// # Sandbox
//
// Each state opens only the base, table, string and math libraries. The base
// functions that load code, touch files, the garbage collector, the console
// or function environments (dofile, loadfile, load, loadstring, require,
// module, collectgarbage, print, getfenv, setfenv, newproxy) are removed, as is
// string.dump. There is no os, io, debug, package, coroutine or channel
// library. Every call runs in a fresh global environment with private copies
// of the library tables, and the string metatable is locked, so one script
// cannot poison the state for the next script that reuses it.
//
// # Conversion
//
// Lua tables whose keys are exactly the integers 1..n become []any; tables
// whose keys are all strings become map[string]any. An empty Lua table has no
// keys to tell the two apart and becomes an empty map[string]any. Whole-number
// Lua numbers become int64, others float64; NaN and infinities are refused.
// Lua numbers are float64, so Go int64 values beyond ±2^53 lose precision on
// the way in. A nil map value on the way in simply leaves the key out.
//
// # What the limits guarantee
//
//   - Wall time: the VM checks the deadline (min of the caller's context and
//     Limits.Timeout) before every instruction, so pure-Lua loops stop in time.
//     A single built-in Go function is not interrupted mid-way, so the ones that
//     could run long are bounded before they start: string.rep, string.format
//     and table.concat by Limits.MaxValueBytes; string.find, match, gmatch and
//     gsub by an upper bound of the backtracking matcher's steps (pattern.go:
//     the product over quantified items of their longest run in the subject,
//     times the start positions), refused when over Timeout/25ns; gsub, which
//     copies its whole result per replacement, also by its copy volume.
//
//   - Call depth: Limits.CallStackSize frames; deeper recursion fails with a
//     stack overflow error. Limits.RegistryMaxSize bounds the value stack.
//
//   - Size: inputs and results are each bounded by Limits.MaxValueBytes
//     (estimated bytes) and nested at most MaxDepth levels. No string longer
//     than MaxValueBytes is built: `..` checks the sum of its operands before
//     concatenating.
//
//   - Memory, per call and per process: gopher-lua has no allocation hook, but
//     its VM asks the context for Done() before every instruction; the call's
//     context (hook.go) looks at the instruction about to run and charges what
//     it allocates (`..` results, table constructors, new keys, new globals,
//     closures) to the call's account first, as the string and table functions
//     and pattern matching (stack and collected matches) do for theirs. An
//     account holds at most Limits.MaxMemory (64 MiB) and reserves it from the
//     process Budget (ProcessLimits.MaxMemory, 256 MiB, shared by all pools),
//     which also admits at most ProcessLimits.MaxConcurrentCalls calls at once
//     (2*GOMAXPROCS, at least 4); callers wait for a slot as long as their
//     context allows. The charge comes before the allocation, so a call stops
//     at the limit, not past it. Reservations return when the call ends; after
//     a call stopped for memory the runtime is asked to return freed pages to
//     the OS (at most every 10s). Budget.RSSBound states what this bounds: the
//     process's RSS grows by at most 2*(ProcessLimits.MaxMemory + one full value
//     stack per running or pooled state), 768 MiB on 2 cores with the defaults.
//     The controller-manager sets both from --lua-max-concurrent-calls,
//     --lua-max-memory-mib and --lua-call-max-memory-mib.
//
// # Known gaps
//
// Charges are estimates of gopher-lua's allocations, in the right order of
// magnitude, and they count what a call allocates, not what stays live: a call
// that builds and drops many values can hit its limit with less in use.
// Preloaded modules are charged for the values they return, not for their
// own work. The instruction
// hook reads the current frame of gopher-lua's state through field offsets found
// by reflect at start-up; should an upgrade change them, the checks are off and
// TestInstructionHook fails. As a backstop for anything not charged, a watchdog
// samples the process heap every 2ms once a call runs longer than 5ms and stops
// the call when it grew by more than Limits.MaxHeapGrowth (256 MiB); it measures
// the whole process, so a large allocation elsewhere during a long call can stop
// that call. The pattern bound is a worst case: a pattern that would in fact run
// fast on a long subject can be refused.
package luavm
