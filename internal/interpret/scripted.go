package interpret

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/luavm"
)

// scripted runs a customization's scripts and falls back to the built-in interpreter for the
// operations it does not script. A failing script fails only its call, with an error that
// names the customization, the operation and the Lua line.
type scripted struct {
	c    *Customization
	pool *luavm.Pool
	base Interpreter
}

// OpError is a failed call of a customization's script.
type OpError struct {
	Customization, Operation string
	Err                      error
}

func (e *OpError) Error() string {
	return fmt.Sprintf("interpreter customization %s, operation %s: %v", e.Customization, e.Operation, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

func (s *scripted) call(op string, nresults int, args ...any) ([]any, error) {
	if s.c.broken != nil {
		return nil, &OpError{s.c.Name, op, fmt.Errorf("no version of the customization compiles (%v); the kind is not interpreted until it is fixed", s.c.broken)}
	}
	o, _ := OperationByName(op)
	out, err := s.pool.Call(context.Background(), s.c.scripts[op], o.Function, nresults, args...)
	if err != nil {
		return nil, &OpError{s.c.Name, op, err}
	}
	return out, nil
}

func (s *scripted) fail(op, format string, args ...any) error {
	return &OpError{s.c.Name, op, fmt.Errorf(format, args...)}
}

func (s *scripted) GetReplicas(obj *unstructured.Unstructured) (int32, bool, error) {
	const op = configv1alpha1.OperationInterpretReplica
	if !s.c.Has(op) {
		return s.base.GetReplicas(obj)
	}
	out, err := s.call(op, 2, obj.Object)
	if err != nil {
		return 0, true, err
	}
	n, ok := out[0].(int64)
	if !ok || n < 0 || n > 1<<31-1 {
		return 0, true, s.fail(op, "GetReplicas must return a whole number of replicas from 0 as its first result, got %s", describe(out[0]))
	}
	return int32(n), true, nil
}

func (s *scripted) ReplicaRequests(obj *unstructured.Unstructured) (corev1.ResourceList, error) {
	const op = configv1alpha1.OperationInterpretReplica
	if !s.c.Has(op) {
		return s.base.ReplicaRequests(obj)
	}
	out, err := s.call(op, 2, obj.Object)
	if err != nil {
		return nil, err
	}
	if out[1] == nil {
		return nil, nil
	}
	req, ok := out[1].(map[string]any)
	if !ok {
		return nil, s.fail(op, "GetReplicas must return a table of requirements or nil as its second result, got %s", describe(out[1]))
	}
	raw, _ := req["resourceRequest"].(map[string]any)
	list := corev1.ResourceList{}
	for name, v := range raw {
		q, err := resource.ParseQuantity(fmt.Sprint(v))
		if err != nil {
			return nil, s.fail(op, "requirements.resourceRequest.%s: %v", name, err)
		}
		list[corev1.ResourceName(name)] = q
	}
	return list, nil
}

func (s *scripted) ReviseReplica(obj *unstructured.Unstructured, replicas int32) error {
	const op = configv1alpha1.OperationReviseReplica
	if !s.c.Has(op) {
		return s.base.ReviseReplica(obj, replicas)
	}
	out, err := s.call(op, 1, obj.Object, int64(replicas))
	if err != nil {
		return err
	}
	revised, err := s.sameObject(op, "ReviseReplica", obj, out[0])
	if err != nil {
		return err
	}
	obj.Object = revised
	return nil
}

func (s *scripted) ReflectStatus(obj *unstructured.Unstructured) (map[string]any, error) {
	const op = configv1alpha1.OperationInterpretStatus
	if !s.c.Has(op) {
		return s.base.ReflectStatus(obj)
	}
	out, err := s.call(op, 1, obj.Object)
	if err != nil {
		return nil, err
	}
	if out[0] == nil {
		return nil, nil
	}
	st, ok := out[0].(map[string]any)
	if !ok {
		return nil, s.fail(op, "ReflectStatus must return a table or nil, got %s", describe(out[0]))
	}
	return st, nil
}

func (s *scripted) AggregateStatus(tmpl *unstructured.Unstructured, members []MemberStatus) (map[string]any, error) {
	const op = configv1alpha1.OperationAggregateStatus
	if !s.c.Has(op) {
		return s.base.AggregateStatus(tmpl, members)
	}
	items := make([]any, 0, len(members))
	for _, m := range members {
		// Karmada's fields, and the revision information a rollout-aware script needs.
		item := map[string]any{"clusterName": m.Cluster, "applied": m.Applied, "health": string(m.Health),
			"revision": m.Revision, "current": m.Current, "observed": m.Observed}
		if m.Status != nil {
			item["status"] = m.Status
		}
		items = append(items, item)
	}
	out, err := s.call(op, 1, tmpl.Object, items)
	if err != nil {
		return nil, err
	}
	aggregated, err := s.sameObject(op, "AggregateStatus", tmpl, out[0])
	if err != nil {
		return nil, err
	}
	st, _ := aggregated["status"].(map[string]any)
	return st, nil
}

// ReplacesStatus reports a scripted AggregateStatus: its result is the whole status, so the
// fields it leaves out are removed from the template's status.
func (s *scripted) ReplacesStatus() bool { return s.c.Has(configv1alpha1.OperationAggregateStatus) }

func (s *scripted) Health(obj *unstructured.Unstructured) (workv1alpha1.Health, error) {
	const op = configv1alpha1.OperationInterpretHealth
	if !s.c.Has(op) {
		return s.base.Health(obj)
	}
	out, err := s.call(op, 1, obj.Object)
	if err != nil {
		return workv1alpha1.HealthUnknown, err
	}
	switch v := out[0].(type) {
	case bool:
		if v {
			return workv1alpha1.HealthHealthy, nil
		}
		return workv1alpha1.HealthProgressing, nil
	case string: // Flotilla's extension: a script may name the health itself.
		switch h := workv1alpha1.Health(v); h {
		case workv1alpha1.HealthHealthy, workv1alpha1.HealthProgressing, workv1alpha1.HealthDegraded, workv1alpha1.HealthUnknown:
			return h, nil
		}
	}
	return workv1alpha1.HealthUnknown, s.fail(op, "InterpretHealth must return true, false or one of \"Healthy\", \"Progressing\", \"Degraded\", \"Unknown\", got %s", describe(out[0]))
}

func (s *scripted) Retain(desired, observed *unstructured.Unstructured) error {
	const op = configv1alpha1.OperationRetain
	if !s.c.Has(op) {
		return s.base.Retain(desired, observed)
	}
	out, err := s.call(op, 1, desired.Object, observed.Object)
	if err != nil {
		return err
	}
	retained, err := s.sameObject(op, "Retain", desired, out[0])
	if err != nil {
		return err
	}
	desired.Object = retained
	return nil
}

func (s *scripted) Dependencies(obj *unstructured.Unstructured) ([]Dependency, error) {
	const op = configv1alpha1.OperationInterpretDependency
	if !s.c.Has(op) {
		return s.base.Dependencies(obj)
	}
	out, err := s.call(op, 1, obj.Object)
	if err != nil {
		return nil, err
	}
	var list []any
	switch v := out[0].(type) {
	case nil:
		return nil, nil
	case []any:
		list = v
	case map[string]any:
		if len(v) != 0 { // an empty Lua table converts as a map
			return nil, s.fail(op, "GetDependencies must return a list of {apiVersion, kind, namespace, name}, got a table with keys")
		}
	default:
		return nil, s.fail(op, "GetDependencies must return a list, got %s", describe(out[0]))
	}
	deps := make([]Dependency, 0, len(list))
	for i, e := range list {
		m, _ := e.(map[string]any)
		d := Dependency{}
		d.APIVersion, _ = m["apiVersion"].(string)
		d.Kind, _ = m["kind"].(string)
		d.Namespace, _ = m["namespace"].(string)
		d.Name, _ = m["name"].(string)
		if d.APIVersion == "" || d.Kind == "" || d.Name == "" {
			return nil, s.fail(op, "GetDependencies result [%d] must have apiVersion, kind and name strings, got %s", i+1, describe(e))
		}
		if d.Namespace != "" && d.Namespace != obj.GetNamespace() {
			return nil, s.fail(op, "GetDependencies result [%d] is in namespace %q; dependencies must be in the workload's namespace %q", i+1, d.Namespace, obj.GetNamespace())
		}
		deps = append(deps, d)
	}
	return deps, nil
}

// sameObject checks that a script returned the object it was given, not another one.
func (s *scripted) sameObject(op, fn string, in *unstructured.Unstructured, result any) (map[string]any, error) {
	m, ok := result.(map[string]any)
	if !ok {
		return nil, s.fail(op, "%s must return the object, got %s", fn, describe(result))
	}
	u := unstructured.Unstructured{Object: m}
	if u.GetAPIVersion() != in.GetAPIVersion() || u.GetKind() != in.GetKind() || u.GetName() != in.GetName() || u.GetNamespace() != in.GetNamespace() {
		return nil, s.fail(op, "%s must return the same object (apiVersion, kind, namespace and name unchanged), got %s %s %s/%s",
			fn, u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
	}
	return m, nil
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "nil"
	case string:
		return fmt.Sprintf("the string %q", x)
	case map[string]any:
		return "a table"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%T %v", v, v)
}
