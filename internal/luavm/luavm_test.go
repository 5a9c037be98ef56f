package luavm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	lua "github.com/yuin/gopher-lua"
)

func deployment() map[string]any {
	return map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata": map[string]any{
			"name": "web", "namespace": "default",
			"labels": map[string]any{"app": "web"},
		},
		"spec": map[string]any{
			"replicas": int64(3),
			"template": map[string]any{
				"spec": map[string]any{
					"containers": []any{
						map[string]any{
							"name": "web", "image": "nginx:1.27",
							"ports":     []any{map[string]any{"containerPort": int64(80)}},
							"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "64Mi"}},
						},
					},
				},
			},
		},
		"status": map[string]any{"readyReplicas": int64(2), "ratio": 0.5, "paused": false},
	}
}

const scriptSource = `
function GetReplicas(obj)
  local replica = obj.spec.replicas
  local requires = { resourceRequest = obj.spec.template.spec.containers[1].resources.requests }
  return replica, requires
end
function ReviseReplica(obj, desired)
  obj.spec.replicas = desired
  return obj
end
function InterpretHealth(observed)
  return observed.status.readyReplicas == observed.spec.replicas
end
function Echo(...) return ... end
function Boom() error("kaboom") end
function Loop() while true do end end
function Recurse() local function f(n) return 1 + f(n + 1) end return f(1) end
function Double(n) local s = "x" for i = 1, n do s = s .. s end return s end
function Rep(n) return string.rep("x", n) end
function Format() return string.format("%1000000000d", 1) end
function Gsub() local s = string.rep("x", 10000) return (s:gsub("x", "%0%0%0")) end
function Concat() local t = {} for i = 1, 100 do t[i] = string.rep("y", 100000) end return table.concat(t) end
function OsExec() return os.execute("true") end
function Load() return load("return 1")() end
function DoFile() return dofile("/etc/passwd") end
function Require() return require("os") end
function ReturnFunction() return function() end end
function Mixed() return {1, x = 2} end
function Sparse() return {[1] = "a", [3] = "c"} end
function BadKey() return {[true] = 1} end
function Cycle() local t = {} t.self = t return t end
function NaN() return 0/0 end
function Empty() return {} end
function Numbers() return 2, 2.5, 1e300 end
function PoisonString() string.upper = function() return "owned" end; return ("a"):upper() end
function UseUpper() return string.upper("a"), ("a"):upper() end
function Meta() return getmetatable("") end
function SetGlobal() leaked = "yes" return leaked end
function GetGlobal() return leaked end
`

func compile(t testing.TB) *Script {
	t.Helper()
	s, err := Compile("test.lua", scriptSource)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

func TestCompile(t *testing.T) {
	tests := []struct {
		name, source, wantErr string
	}{
		{"valid", "function GetReplicas(obj) return 1 end", ""},
		{"syntax error names line", "function f()\n  return 1 +\nend", "line:3"},
		{"runtime error at top level", "error('top')", "top"},
		{"infinite top level", "while true do end", "exceeded the time limit"},
		{"os at top level", "os.exit(1)", "os is not available in customizations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile("c.lua", tt.source)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if !s.Has("GetReplicas") || s.Has("ReviseReplica") || s.Has("print") || s.Has("pairs") {
					t.Errorf("Has reports wrong functions: %v", s.functions)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestCallSuccess(t *testing.T) {
	pool := NewPool(PoolOptions{})
	defer pool.Close()
	s := compile(t)
	ctx := context.Background()

	got, err := pool.Call(ctx, s, "GetReplicas", 2, deployment())
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int64(3), map[string]any{"resourceRequest": map[string]any{"cpu": "100m", "memory": "64Mi"}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("GetReplicas (-want +got):\n%s", d)
	}

	got, err = pool.Call(ctx, s, "ReviseReplica", 1, deployment(), int64(7))
	if err != nil {
		t.Fatal(err)
	}
	wantObj := deployment()
	wantObj["spec"].(map[string]any)["replicas"] = int64(7)
	if d := cmp.Diff(wantObj, got[0]); d != "" {
		t.Errorf("ReviseReplica (-want +got):\n%s", d)
	}

	got, err = pool.Call(ctx, s, "InterpretHealth", 1, deployment())
	if err != nil || got[0] != false {
		t.Errorf("InterpretHealth = %v, %v; want false", got, err)
	}
}

func TestRoundTripDeployment(t *testing.T) {
	pool := NewPool(PoolOptions{})
	s := compile(t)
	got, err := pool.Call(context.Background(), s, "Echo", 1, deployment())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(deployment(), got[0]); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
}

func TestConversions(t *testing.T) {
	pool := NewPool(PoolOptions{})
	s := compile(t)
	tests := []struct {
		fn       string
		nresults int
		want     []any
	}{
		{"Empty", 1, []any{map[string]any{}}},
		{"Numbers", 3, []any{int64(2), 2.5, 1e300}},
		{"Echo", 2, []any{nil, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.fn, func(t *testing.T) {
			got, err := pool.Call(context.Background(), s, tt.fn, tt.nresults)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestCallFailuresAreIsolated(t *testing.T) {
	limits := DefaultLimits()
	limits.Timeout = 200 * time.Millisecond
	pool := NewPool(PoolOptions{Limits: limits, MaxIdle: 1})
	defer pool.Close()
	s := compile(t)

	tests := []struct {
		fn      string
		args    []any
		wantErr string
	}{
		{"Missing", nil, `does not define function Missing`},
		{"Boom", nil, `Boom in script "test.lua": test.lua:`},
		{"Loop", nil, "Loop in script \"test.lua\" exceeded the time limit of 200ms"},
		{"Recurse", nil, "stack overflow"},
		// 2^22 bytes plus overhead: just over the default 4 MiB result budget.
		{"Double", []any{int64(22)}, "size limit of 4194304 bytes"},
		{"Rep", []any{int64(1e9)}, "string.rep would build"},
		{"Format", nil, "over 99"},
		{"Gsub", nil, "string.gsub could build"},
		{"Concat", nil, "table.concat result is over the limit"},
		{"OsExec", nil, "test.lua:23: os is not available in customizations"},
		{"Load", nil, "load is not available in customizations"},
		{"DoFile", nil, "dofile is not available in customizations"},
		{"Require", nil, "only the preloaded modules can be required"},
		{"ReturnFunction", nil, "result 1 of ReturnFunction in script \"test.lua\": a Lua function cannot be converted"},
		{"Mixed", nil, "mixes list index 1 with string key"},
		{"Sparse", nil, "without holes"},
		{"BadKey", nil, "table key true (a boolean)"},
		{"Cycle", nil, "nested deeper than 64 levels"},
		{"NaN", nil, "not finite"},
		{"Echo", []any{map[string]any{"a": []any{struct{}{}}}}, "argument 1 of Echo in script \"test.lua\": at .a[0]: unsupported Go type struct {}"},
		{"Echo", []any{strings.Repeat("x", 5<<20)}, "size limit"},
	}
	for _, tt := range tests {
		t.Run(tt.fn, func(t *testing.T) {
			_, err := pool.Call(context.Background(), s, tt.fn, 1, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
			// The pool must keep working after every kind of failure.
			got, err := pool.Call(context.Background(), s, "GetReplicas", 1, deployment())
			if err != nil || got[0] != int64(3) {
				t.Fatalf("good call after failure = %v, %v", got, err)
			}
		})
	}
}

func TestCallerContext(t *testing.T) {
	pool := NewPool(PoolOptions{})
	s := compile(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := pool.Call(ctx, s, "Loop", 0)
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("error = %v, want context canceled", err)
	}
}

func TestScriptsCannotAffectLaterCalls(t *testing.T) {
	pool := NewPool(PoolOptions{MaxIdle: 1})
	s := compile(t)
	ctx := context.Background()
	if got, err := pool.Call(ctx, s, "PoisonString", 1); err != nil || got[0] != "A" {
		t.Fatalf("PoisonString = %v, %v; method calls must use the private string table", got, err)
	}
	if got, err := pool.Call(ctx, s, "UseUpper", 2); err != nil || got[0] != "A" || got[1] != "A" {
		t.Fatalf("UseUpper after poisoning = %v, %v", got, err)
	}
	if got, err := pool.Call(ctx, s, "Meta", 1); err != nil || got[0] != "locked" {
		t.Fatalf("getmetatable(\"\") = %v, %v; want locked", got, err)
	}
	if _, err := pool.Call(ctx, s, "SetGlobal", 1); err != nil {
		t.Fatal(err)
	}
	if got, err := pool.Call(ctx, s, "GetGlobal", 1); err != nil || got[0] != nil {
		t.Fatalf("global leaked across calls: %v, %v", got, err)
	}
}

func TestPreload(t *testing.T) {
	pool := NewPool(PoolOptions{Preload: map[string]lua.LGFunction{
		"helper": func(L *lua.LState) int {
			mod := L.NewTable()
			mod.RawSetString("answer", lua.LNumber(42))
			L.Push(mod)
			return 1
		},
	}})
	s, err := Compile("p.lua", "function F() return helper.answer end")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pool.Call(context.Background(), s, "F", 1)
	if err != nil || got[0] != int64(42) {
		t.Fatalf("F = %v, %v", got, err)
	}
	// require returns the preloaded module, also at the top level under Pool.Compile.
	s, err = pool.Compile("r.lua", `local h = require("helper")
function F() return h.answer + require("helper").answer end`)
	if err != nil {
		t.Fatal(err)
	}
	got, err = pool.Call(context.Background(), s, "F", 1)
	if err != nil || got[0] != int64(84) {
		t.Fatalf("F with require = %v, %v", got, err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	pool := NewPool(PoolOptions{})
	s := compile(t)
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			_, err := pool.Call(context.Background(), s, "GetReplicas", 2, deployment())
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func BenchmarkCallGetReplicas(b *testing.B) {
	pool := NewPool(PoolOptions{})
	s := compile(b)
	obj := deployment()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pool.Call(ctx, s, "GetReplicas", 2, obj); err != nil {
			b.Fatal(err)
		}
	}
}

// An empty list stays a list through a script, also when the script leaves it alone inside
// an object it returns.
func TestEmptyListRoundTrip(t *testing.T) {
	pool := NewPool(PoolOptions{})
	s, err := Compile("l.lua", "function F(obj) return obj end\nfunction G() return {} end")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pool.Call(context.Background(), s, "F", 1, map[string]any{"tolerations": []any{}, "labels": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"tolerations": []any{}, "labels": map[string]any{}}
	if diff := cmp.Diff(want, got[0]); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if got, _ := pool.Call(context.Background(), s, "G", 1); !cmp.Equal(got[0], map[string]any{}) {
		t.Errorf("a new empty table is a map, got %#v", got[0])
	}
}

// What a script grows is charged before it is built: table growth stops at the call's memory
// limit, and a doubling string stops before the `..` that would pass the per-string limit,
// both with an error that names the memory limit, not the time limit.
func TestMemoryIsBoundedBeforeAllocation(t *testing.T) {
	pool := NewPool(PoolOptions{Limits: Limits{Timeout: 20 * time.Second, MaxMemory: 32 << 20}, Budget: NewBudget(ProcessLimits{})})
	tests := []struct{ name, src, wantErr string }{
		{"table", "function F() local t = {} local i = 0 while true do i = i + 1 t[i] = {i, i} end end", "memory limit of 32 MiB (Limits.MaxMemory)"},
		{"keys", "function F() local t = {} local i = 0 while true do i = i + 1 t['k' .. i] = i end end", "memory limit of 32 MiB (Limits.MaxMemory)"},
		{"insert", "function F() local t = {} while true do table.insert(t, 1) end end", "memory limit of 32 MiB (Limits.MaxMemory)"},
		{"concat", "function F() local s = 'x' local keep = {} while true do s = s .. s keep[#keep + 1] = s end end",
			"concat.lua:1: `..` would build a string of 8388608 bytes, over the memory limit of 4194304 bytes per string"},
		{"doubling", `function F() local s = "x" for i = 1, 30 do s = s .. s end return {s = s} end`, "over the memory limit of 4194304 bytes per string"},
		{"many strings", "function F() local t = {} while true do t[#t + 1] = string.rep('x', 1000000) end end", "memory limit of 32 MiB (Limits.MaxMemory)"},
		{"pattern stack", `function F() return string.find(string.rep("a", 4000000), "^.*$") end`, "memory limit of 32 MiB (Limits.MaxMemory)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile(tt.name+".lua", tt.src)
			if err != nil {
				t.Fatal(err)
			}
			_, err = pool.Call(context.Background(), s, "F", 1)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want it to contain %q", err, tt.wantErr)
			}
			if used := pool.Budget().InUse(); used != 0 {
				t.Errorf("budget holds %d bytes after the call, want 0", used)
			}
		})
	}
	// The pool still serves calls afterwards.
	s, _ := Compile("ok.lua", "function F() return 1 end")
	if got, err := pool.Call(context.Background(), s, "F", 1); err != nil || got[0] != int64(1) {
		t.Errorf("after the limit: %v, %v", got, err)
	}
}

// A gopher-lua upgrade that moves the VM's frame fields turns the allocation checks off; this
// test is what notices.
func TestInstructionHook(t *testing.T) {
	if !hookSupported {
		t.Fatal("gopher-lua's call frame layout is not the one hook.go reads; allocations are no longer checked before they happen")
	}
}

// Calls of all pools share the budget: its memory, and its call slots, for which a caller
// waits no longer than its context.
func TestProcessBudgetIsShared(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		b := NewBudget(ProcessLimits{MaxConcurrentCalls: 4, MaxMemory: 8 << 20})
		a, c := NewPool(PoolOptions{Budget: b}), NewPool(PoolOptions{Budget: b})
		s, err := Compile("t.lua", "function F(n) local t = {} for i = 1, n do t[i] = {} end return #t end")
		if err != nil {
			t.Fatal(err)
		}
		// 100k tables fit the call's 64 MiB but not the process's 8 MiB.
		for _, p := range []*Pool{a, c} {
			_, err := p.Call(context.Background(), s, "F", 1, int64(100000))
			if err == nil || !strings.Contains(err.Error(), "shared memory limit of 8 MiB") {
				t.Errorf("error = %v, want the shared memory limit", err)
			}
		}
		if got, err := a.Call(context.Background(), s, "F", 1, int64(100)); err != nil || got[0] != int64(100) {
			t.Errorf("small call = %v, %v; the budget must be given back after each call", got, err)
		}
	})
	t.Run("slots", func(t *testing.T) {
		b := NewBudget(ProcessLimits{MaxConcurrentCalls: 1})
		a, c := NewPool(PoolOptions{Budget: b, Limits: Limits{Timeout: time.Minute}}), NewPool(PoolOptions{Budget: b})
		s := compile(t)
		running, stop := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { _, err := a.Call(running, s, "Loop", 0); done <- err }()
		for len(b.slots) == 0 {
			time.Sleep(time.Millisecond)
		}
		waiting, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := c.Call(waiting, s, "GetReplicas", 2, deployment())
		if err == nil || !strings.Contains(err.Error(), "waiting for one of 1 concurrent Lua call slots") {
			t.Errorf("error = %v, want it to wait for the slot and give up with its context", err)
		}
		stop()
		<-done
		if _, err := c.Call(context.Background(), s, "GetReplicas", 2, deployment()); err != nil {
			t.Errorf("after the slot is free: %v", err)
		}
	})
}

// A call stopped for memory hands memory back to the OS, at most once per interval.
func TestMemoryIsReturnedAfterAStop(t *testing.T) {
	freed := make(chan struct{}, 4)
	old := freeOSMemory
	freeOSMemory = func() { freed <- struct{}{} }
	t.Cleanup(func() { freeOSMemory = old })
	pool := NewPool(PoolOptions{Budget: NewBudget(ProcessLimits{})})
	s := compile(t)
	for range 2 {
		if _, err := pool.Call(context.Background(), s, "Double", 1, int64(30)); err == nil {
			t.Fatal("Double(30) succeeded")
		}
	}
	<-freed
	select {
	case <-freed:
		t.Error("memory was returned twice within the interval")
	case <-time.After(100 * time.Millisecond):
	}
}

// Unknown globals stay nil; the standard ones the sandbox leaves out say so when read.
func TestUnavailableGlobals(t *testing.T) {
	pool := NewPool(PoolOptions{})
	tests := []struct{ src, wantErr string }{
		{`return os.execute("x")`, "os is not available in customizations"},
		{`return io.open("/etc/passwd")`, "io is not available in customizations"},
		{`return debug.getinfo(1)`, "debug is not available in customizations"},
		{`return package.loaded`, "package is not available in customizations"},
		{`return loadstring("return 1")`, "loadstring is not available in customizations"},
		{`print("x")`, "print is not available in customizations"},
		{`return string.dump(F)`, "string.dump is not available in customizations"},
		{`return require("os")`, "only the preloaded modules can be required"},
		{`return undefinedName == nil and string.nope == nil`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			s, err := Compile("g.lua", "function F() "+tt.src+" end")
			if err != nil {
				t.Fatal(err)
			}
			got, err := pool.Call(context.Background(), s, "F", 1)
			if tt.wantErr == "" {
				if err != nil || got[0] != true {
					t.Fatalf("F = %v, %v; want true", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// Pattern matching cannot be interrupted, so patterns whose worst case is over the time
// limit are refused before they run, and ordinary ones still work.
func TestPatternBounds(t *testing.T) {
	limits := Limits{Timeout: 500 * time.Millisecond}
	pool := NewPool(PoolOptions{Limits: limits})
	tests := []struct {
		name, src string
		want      any
		wantErr   string
	}{
		{"bomb", `return string.find(string.rep("a", 3000), string.rep("a*", 30) .. "b")`, nil, "matching steps, over the limit"},
		{"bomb match", `return (string.rep("a", 3000)):match(string.rep("a-", 20) .. "b")`, nil, "matching steps, over the limit"},
		{"bomb gmatch", `for x in string.gmatch(string.rep("a", 3000), string.rep("a?", 40) .. "b") do end`, nil, "matching steps, over the limit"},
		{"gsub copies", `return (string.gsub(string.rep("a", 100000), "a", "b"))`, nil, "string.gsub could copy"},
		{"gsub function copies", `return (string.gsub(string.rep("a", 100000), "a", function(c) return "b" end))`, nil, "string.gsub could copy"},
		{"trim", `return (string.match("  web-1  ", "^%s*(.-)%s*$"))`, "web-1", ""},
		{"version", `local a, b, c = string.match("v1.27.3", "^v(%d+)%.(%d+)%.(%d+)$") return a .. b .. c`, "1273", ""},
		{"image tag", `return (string.gsub("registry.example/web:1.2", ":[^:/]+$", ""))`, "registry.example/web", ""},
		{"gsub function", `return (string.gsub("a-b-c", "%a", function(c) return c:upper() end))`, "A-B-C", ""},
		{"gsub table", `return (string.gsub("$x $y", "%$(%a)", {x = "1", y = "2"}))`, "1 2", ""},
		{"plain find", `return (string.find(string.rep("a", 100000) .. "*", "*", 1, true))`, int64(100001), ""},
		{"long trim", `return #(string.match(string.rep("x", 20000) .. " ", "^%s*(.-)%s*$"))`, int64(20000), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile("p.lua", "function F() "+tt.src+" end")
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			got, err := pool.Call(context.Background(), s, "F", 1)
			// Generous: the point is that it does not run for minutes.
			if d := time.Since(start); d > 10*limits.Timeout {
				t.Errorf("took %s, want about the time limit of %s at most", d, limits.Timeout)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got[0] != tt.want {
				t.Fatalf("F = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
