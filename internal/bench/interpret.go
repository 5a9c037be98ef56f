package bench

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/customization"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/luavm"
)

// benchRetain is the one operation the bundled CloneSet customization does not script.
const benchRetain = `function Retain(desiredObj, observedObj)
  if observedObj.spec ~= nil and observedObj.spec.paused ~= nil then
    desiredObj.spec.paused = observedObj.spec.paused
  end
  return desiredObj
end`

// Interpret times every operation through Lua (the bundled CloneSet customization retargeted
// at apps/v1 Deployment, VMs pooled) against the built-in Go interpreter, on the same
// Deployment, and prints median and p99 per call.
func Interpret(calls int, out io.Writer) error {
	bundled, err := customization.Bundled()
	if err != nil {
		return err
	}
	var ric *configv1alpha1.ResourceInterpreterCustomization
	for i := range bundled {
		if bundled[i].Name == "kruise-cloneset" {
			ric = bundled[i].DeepCopy()
		}
	}
	if ric == nil {
		return fmt.Errorf("the bundled kruise-cloneset customization is missing")
	}
	ric.Spec.Target = configv1alpha1.CustomizationTarget{APIVersion: "apps/v1", Kind: "Deployment"}
	ric.Spec.Customizations.Retention = &configv1alpha1.LuaScript{LuaScript: benchRetain}
	reg := interpret.NewRegistry(luavm.Limits{})
	compiled, err := reg.Compile(ric)
	if err != nil {
		return fmt.Errorf("compiling: %s", customization.Describe(err))
	}
	lua, goIn := reg.With(compiled), interpret.Builtin(schema.GroupKind{Group: "apps", Kind: "Deployment"})
	obj := benchDeployment()
	observed := obj.DeepCopy()
	observed.Object["status"] = map[string]any{"replicas": int64(4), "readyReplicas": int64(4), "availableReplicas": int64(4),
		"updatedReplicas": int64(4), "observedGeneration": int64(3)}
	st, _ := goIn.ReflectStatus(observed)
	items := []interpret.MemberStatus{
		{Cluster: "east", Status: st, Applied: true, Health: workv1alpha1.HealthHealthy},
		{Cluster: "west", Status: st, Applied: true, Health: workv1alpha1.HealthHealthy},
		{Cluster: "europe", Status: st, Applied: true, Health: workv1alpha1.HealthHealthy},
	}
	ops := []struct {
		name string
		run  func(interpret.Interpreter) error
	}{
		{configv1alpha1.OperationInterpretReplica, func(in interpret.Interpreter) error { _, _, err := in.GetReplicas(obj); return err }},
		{configv1alpha1.OperationReviseReplica, func(in interpret.Interpreter) error { return in.ReviseReplica(obj.DeepCopy(), 4) }},
		{configv1alpha1.OperationInterpretStatus, func(in interpret.Interpreter) error { _, err := in.ReflectStatus(observed); return err }},
		{configv1alpha1.OperationAggregateStatus, func(in interpret.Interpreter) error { _, err := in.AggregateStatus(obj, items); return err }},
		{configv1alpha1.OperationInterpretHealth, func(in interpret.Interpreter) error { _, err := in.Health(observed); return err }},
		{configv1alpha1.OperationRetain, func(in interpret.Interpreter) error { return in.Retain(obj.DeepCopy(), observed) }},
		{configv1alpha1.OperationInterpretDependency, func(in interpret.Interpreter) error { _, err := in.Dependencies(obj); return err }},
	}
	fmt.Fprintf(out, "Interpreter cost per call on one Deployment (%d calls each; Lua = bundled CloneSet scripts retargeted, VMs pooled)\n", calls)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tLUA P50\tLUA P99\tGO P50\tGO P99\tLUA/GO (P50)")
	for _, op := range ops {
		l, err := timeCalls(calls, func() error { return op.run(lua) })
		if err != nil {
			return fmt.Errorf("%s through Lua: %w", op.name, err)
		}
		g, err := timeCalls(calls, func() error { return op.run(goIn) })
		if err != nil {
			return fmt.Errorf("%s in Go: %w", op.name, err)
		}
		ratio := "-"
		if g[0] > 0 {
			ratio = fmt.Sprintf("%.0fx", float64(l[0])/float64(g[0]))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", op.name, l[0], l[1], g[0], g[1], ratio)
	}
	return tw.Flush()
}

// timeCalls runs fn calls times after a warm-up and returns the median and p99.
func timeCalls(calls int, fn func() error) ([2]time.Duration, error) {
	for range 20 {
		if err := fn(); err != nil {
			return [2]time.Duration{}, err
		}
	}
	d := make([]time.Duration, calls)
	for i := range d {
		start := time.Now()
		if err := fn(); err != nil {
			return [2]time.Duration{}, err
		}
		d[i] = time.Since(start)
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return [2]time.Duration{d[len(d)/2], d[min(len(d)-1, len(d)*99/100)]}, nil
}

func benchDeployment() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "generation": int64(3), "labels": map[string]any{"app": "web"}},
		"spec": map[string]any{"replicas": int64(12),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"serviceAccountName": "web",
					"containers": []any{map[string]any{"name": "web", "image": "registry.example/web:1.2",
						"resources": map[string]any{"requests": map[string]any{"cpu": "250m", "memory": "128Mi"}},
						"envFrom":   []any{map[string]any{"configMapRef": map[string]any{"name": "web-config"}}},
						"env":       []any{map[string]any{"name": "TOKEN", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "web-token", "key": "t"}}}},
					}},
					"volumes": []any{map[string]any{"name": "data", "persistentVolumeClaim": map[string]any{"claimName": "web-data"}}}}}},
	}}
}

// DoublingStatus is the ReflectStatus of the Lua memory incident: it doubles a string 30
// times, to 1 GiB were nothing to stop it.
const DoublingStatus = `function ReflectStatus(observedObj)
  local s = "x"
  for i = 1, 30 do s = s .. s end
  return {s = s}
end`

// InterpretMemory runs DoublingStatus on n objects at once, for each n, through an interpreter
// registry built as the controller-manager builds it (process budget, pooled states), and
// prints the process's peak RSS against the bound luavm documents.
func InterpretMemory(objects []int, out io.Writer) error {
	ric := &configv1alpha1.ResourceInterpreterCustomization{}
	ric.Name = "doubling"
	ric.Spec.Target = configv1alpha1.CustomizationTarget{APIVersion: "example.com/v1", Kind: "Gizmo"}
	ric.Spec.Customizations.StatusReflection = &configv1alpha1.LuaScript{LuaScript: DoublingStatus}
	reg := interpret.NewRegistry(luavm.Limits{})
	compiled, err := reg.Compile(ric)
	if err != nil {
		return fmt.Errorf("compiling: %s", customization.Describe(err))
	}
	in := reg.With(compiled)
	budget, limits := luavm.ProcessBudget(), luavm.DefaultLimits()
	bound := budget.RSSBound(limits, 2*runtime.GOMAXPROCS(0))

	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	idle := peakRSS(os.Getpid())
	fmt.Fprintf(out, "Peak RSS of ReflectStatus doubling a string 30 times on N objects at once (%d call slots, %d MiB shared, %d MiB per call, %d MiB per string)\n",
		budget.Limits().MaxConcurrentCalls, budget.Limits().MaxMemory>>20, limits.MaxMemory>>20, limits.MaxValueBytes>>20)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OBJECTS\tSTOPPED FOR MEMORY\tOTHER RESULTS\tTIME\tPEAK RSS\tBOUND (IDLE + LUA)")
	for _, n := range objects {
		runtime.GC()
		resetPeakRSS()
		var stopped, other atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for i := range n {
			wg.Go(func() {
				obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Gizmo",
					"metadata": map[string]any{"name": fmt.Sprintf("g%d", i), "namespace": "default"}}}
				if _, err := in.ReflectStatus(obj); err != nil && strings.Contains(err.Error(), "memory limit") {
					stopped.Add(1)
				} else {
					other.Add(1)
				}
			})
		}
		wg.Wait()
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%d MiB\t%d MiB (%d + %d)\n", n, stopped.Load(), other.Load(), time.Since(start).Round(time.Millisecond),
			peakRSS(os.Getpid())>>20, (idle+bound)>>20, idle>>20, bound>>20)
	}
	return tw.Flush()
}

// resetPeakRSS starts a new high-water mark of this process's RSS (Linux clear_refs); where
// that is not possible the peaks are cumulative.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }
