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
//     A single built-in Go function is not interrupted mid-way; the built-ins
//     that could run long on big inputs (string.rep, string.format widths,
//     string.gsub, table.concat) are bounded by Limits.MaxValueBytes instead.
//
//   - Call depth: Limits.CallStackSize frames; deeper recursion fails with a
//     stack overflow error. Limits.RegistryMaxSize bounds the value stack.
//
//   - Size: inputs and results are each bounded by Limits.MaxValueBytes
//     (estimated bytes) and nested at most MaxDepth levels.
//
//   - Memory: gopher-lua has no allocation hook, so the `..` operator and
//     table growth are bounded by a watchdog instead: once a call runs longer
//     than 5ms, the process heap is sampled every 2ms and the call is stopped
//     when it grew by more than Limits.MaxHeapGrowth (256 MiB by default)
//     since that moment. Short calls never start the watchdog.
//
// # Known gaps
//
// The heap watchdog measures the whole process, so it can overshoot by what a
// script allocates within one 2ms sample, and a large allocation elsewhere in
// the process during a long call can stop that call. Run interpreters in a
// process with a memory limit (GOMEMLIMIT / container limit) for defence in
// depth.
package luavm
