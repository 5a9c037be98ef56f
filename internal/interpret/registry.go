package interpret

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/event"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/luavm"
	lua "github.com/yuin/gopher-lua"
)

// operation ties an API operation to the script field and the Lua function it must define.
type operation struct {
	Name     string // configv1alpha1.Operation*
	Field    string // spec.customizations.<Field>
	Function string // the global function the script defines
	Script   func(*configv1alpha1.CustomizationRules) *configv1alpha1.LuaScript
}

// Operations lists the seven operations in API order.
var Operations = []operation{
	{configv1alpha1.OperationInterpretReplica, "replicaResource", "GetReplicas", func(c *configv1alpha1.CustomizationRules) *configv1alpha1.LuaScript { return c.ReplicaResource }},
	{configv1alpha1.OperationReviseReplica, "replicaRevision", "ReviseReplica", func(c *configv1alpha1.CustomizationRules) *configv1alpha1.LuaScript { return c.ReplicaRevision }},
	{configv1alpha1.OperationInterpretStatus, "statusReflection", "ReflectStatus", func(c *configv1alpha1.CustomizationRules) *configv1alpha1.LuaScript { return c.StatusReflection }},
	{configv1alpha1.OperationAggregateStatus, "statusAggregation", "AggregateStatus", func(c *configv1alpha1.CustomizationRules) *configv1alpha1.LuaScript { return c.StatusAggregation }},
	{configv1alpha1.OperationInterpretHealth, "healthInterpretation", "InterpretHealth", func(c *configv1alpha1.CustomizationRules) *configv1alpha1.LuaScript { return c.HealthInterpretation }},
	{configv1alpha1.OperationRetain, "retention", "Retain", func(c *configv1alpha1.CustomizationRules) *configv1alpha1.LuaScript { return c.Retention }},
	{configv1alpha1.OperationInterpretDependency, "dependencyInterpretation", "GetDependencies", func(c *configv1alpha1.CustomizationRules) *configv1alpha1.LuaScript {
		return c.DependencyInterpretation
	}},
}

// OperationByName finds an operation by its API name or its Lua function name.
func OperationByName(name string) (operation, bool) {
	for _, op := range Operations {
		if op.Name == name || op.Function == name || op.Field == name {
			return op, true
		}
	}
	return operation{}, false
}

// Customization is a compiled ResourceInterpreterCustomization.
type Customization struct {
	Name       string
	Generation int64
	Target     schema.GroupVersionKind
	scripts    map[string]*luavm.Script // by operation name
	// broken is why no version of the customization compiled; every operation then fails
	// with it rather than fall back to a built-in interpreter that would misread the kind
	// (a CloneSet read as having no replicas runs its full count in every cluster).
	broken error
	// serial is this compilation's own number in the process (see Version).
	serial uint64
}

var customizationSerial atomic.Uint64

// Version names what in interprets with, for a caller that remembers what it worked out from
// it: "builtin", or the customization's name and compilation (a new one, even of unchanged
// scripts or a customization deleted and made again, is another version).
func Version(in Interpreter) string {
	if s, ok := in.(*scripted); ok {
		return s.c.Name + "#" + strconv.FormatUint(s.c.serial, 10)
	}
	return "builtin"
}

// Has reports whether the customization scripts an operation; a broken one claims them all.
func (c *Customization) Has(op string) bool { return c.broken != nil || c.scripts[op] != nil }

// IsBroken reports a customization put in force only to fail its kind's calls.
func (c *Customization) IsBroken() bool { return c.broken != nil }

// Broken returns a customization that fails every call of its kind with err.
func Broken(name string, generation int64, target schema.GroupVersionKind, err error) *Customization {
	return &Customization{Name: name, Generation: generation, Target: target, broken: err, serial: customizationSerial.Add(1)}
}

// Registry holds the compiled customizations in force and hands out interpreters: a kind's
// customization for the operations it scripts, the built-in interpreter for the rest. A nil
// Registry serves the built-in interpreters only.
type Registry struct {
	pool *luavm.Pool
	mu   sync.RWMutex
	// byName is what the controller put in force; byTarget is derived from it.
	byName      map[string]*Customization
	byTarget    map[schema.GroupVersionKind]*Customization
	subscribers []*subscriber
}

// Subscribe returns a channel that receives an empty object of a kind whenever the
// customization in force for that kind changes, so controllers re-interpret its objects.
// Subscribe before the registry changes; the channel is never closed.
func (r *Registry) Subscribe() <-chan event.TypedGenericEvent[*unstructured.Unstructured] {
	r.mu.Lock()
	defer r.mu.Unlock()
	sub := &subscriber{out: make(chan event.TypedGenericEvent[*unstructured.Unstructured]), wake: make(chan struct{}, 1),
		pending: map[schema.GroupVersionKind]bool{}}
	go sub.pump()
	r.subscribers = append(r.subscribers, sub)
	return sub.out
}

// subscriber holds the kinds not yet delivered to one subscriber: a set, so a kind changed
// many times before delivery is delivered once, and nothing is ever dropped or blocks the
// customization controller.
type subscriber struct {
	out     chan event.TypedGenericEvent[*unstructured.Unstructured]
	wake    chan struct{}
	mu      sync.Mutex
	pending map[schema.GroupVersionKind]bool
}

func (s *subscriber) add(gvk schema.GroupVersionKind) {
	s.mu.Lock()
	s.pending[gvk] = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// pump delivers the pending kinds, blocking on the subscriber's reads only.
func (s *subscriber) pump() {
	for range s.wake {
		s.mu.Lock()
		kinds := make([]schema.GroupVersionKind, 0, len(s.pending))
		for gvk := range s.pending {
			kinds = append(kinds, gvk)
		}
		clear(s.pending)
		s.mu.Unlock()
		for _, gvk := range kinds {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(gvk)
			s.out <- event.TypedGenericEvent[*unstructured.Unstructured]{Object: obj}
		}
	}
}

// notify tells subscribers about kinds whose interpretation changed; called with r.mu held.
func (r *Registry) notify(kinds ...schema.GroupVersionKind) {
	for _, gvk := range kinds {
		for _, s := range r.subscribers {
			s.add(gvk)
		}
	}
}

// NewRegistry returns an empty registry with a pool of sandboxed Lua states.
func NewRegistry(limits luavm.Limits) *Registry {
	return &Registry{
		pool:     luavm.NewPool(luavm.PoolOptions{Limits: limits, Preload: map[string]lua.LGFunction{"kube": loadKube}}),
		byName:   map[string]*Customization{},
		byTarget: map[schema.GroupVersionKind]*Customization{},
	}
}

// CompileError is a script that does not compile, with the operation and field it belongs to.
type CompileError struct {
	Operation, Field string
	Err              error
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("%s (spec.customizations.%s.luaScript): %v", e.Operation, e.Field, e.Err)
}

func (e *CompileError) Unwrap() error { return e.Err }

var luaLine = regexp.MustCompile(`line:(\d+)|:(\d+):`)

// Line is the Lua line the error points at, 0 when unknown.
func (e *CompileError) Line() int {
	m := luaLine.FindStringSubmatch(e.Err.Error())
	if m == nil {
		return 0
	}
	n := 0
	for _, d := range m[1] + m[2] {
		n = n*10 + int(d-'0')
	}
	return n
}

// Compile compiles every script of ric. The error names the operation, the field and the Lua
// line; a script must define its operation's function.
func (r *Registry) Compile(ric *configv1alpha1.ResourceInterpreterCustomization) (*Customization, error) {
	gv, err := schema.ParseGroupVersion(ric.Spec.Target.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("spec.target.apiVersion %q: %w", ric.Spec.Target.APIVersion, err)
	}
	c := &Customization{Name: ric.Name, Generation: ric.Generation, Target: gv.WithKind(ric.Spec.Target.Kind), scripts: map[string]*luavm.Script{},
		serial: customizationSerial.Add(1)}
	for _, op := range Operations {
		src := op.Script(&ric.Spec.Customizations)
		if src == nil {
			continue
		}
		s, err := r.pool.Compile(ric.Name+"/"+op.Name, src.LuaScript)
		if err != nil {
			return nil, &CompileError{Operation: op.Name, Field: op.Field, Err: err}
		}
		if !s.Has(op.Function) {
			return nil, &CompileError{Operation: op.Name, Field: op.Field, Err: fmt.Errorf("the script must define function %s", op.Function)}
		}
		c.scripts[op.Name] = s
	}
	return c, nil
}

// Put puts a compiled customization in force, replacing the one of the same name. When two
// customizations target the same kind, the one whose name sorts first wins; the other is
// returned as the loser ("" when none).
func (r *Registry) Put(c *Customization) (conflictsWith string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var kinds []schema.GroupVersionKind
	if old, ok := r.byName[c.Name]; ok {
		kinds = append(kinds, old.Target)
	}
	r.byName[c.Name] = c
	r.rebuild()
	r.notify(append(kinds, c.Target)...)
	if winner := r.byTarget[c.Target]; winner.Name != c.Name {
		return winner.Name
	}
	return ""
}

// Remove takes a customization out of force.
func (r *Registry) Remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.byName[name]
	delete(r.byName, name)
	r.rebuild()
	if ok {
		r.notify(old.Target)
	}
}

// Active returns the customization in force under that name.
func (r *Registry) Active(name string) (*Customization, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.byName[name]
	return c, ok
}

func (r *Registry) rebuild() {
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	r.byTarget = map[schema.GroupVersionKind]*Customization{}
	for _, n := range names {
		c := r.byName[n]
		if _, taken := r.byTarget[c.Target]; !taken {
			r.byTarget[c.Target] = c
		}
	}
}

// For returns the interpreter of a kind.
func (r *Registry) For(gvk schema.GroupVersionKind) Interpreter {
	base := Builtin(gvk.GroupKind())
	if r == nil {
		return base
	}
	r.mu.RLock()
	c := r.byTarget[gvk]
	r.mu.RUnlock()
	if c == nil {
		return base
	}
	return &scripted{c: c, pool: r.pool, base: base}
}

// With returns an interpreter of c's target kind that uses c, whether or not it is in force:
// `flotilla interpret` and tests run a customization without a control plane.
func (r *Registry) With(c *Customization) Interpreter {
	return &scripted{c: c, pool: r.pool, base: Builtin(c.Target.GroupKind())}
}
