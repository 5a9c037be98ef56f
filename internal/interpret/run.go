package interpret

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// Input is what one operation is run on; which fields it needs depends on the operation.
type Input struct {
	// Desired is the template (InterpretReplica, ReviseReplica, AggregateStatus, Retain,
	// InterpretDependency).
	Desired *unstructured.Unstructured
	// Observed is the member object (InterpretStatus, InterpretHealth, Retain).
	Observed *unstructured.Unstructured
	// StatusItems are the members' reflected statuses (AggregateStatus), shaped like
	// Karmada's: {clusterName, status, applied, health}.
	StatusItems []MemberStatus
	// Replicas is a cluster's share (ReviseReplica).
	Replicas int32
}

// Run runs one operation and returns its result as plain values, the shape
// `flotilla interpret` prints and golden tests compare.
func Run(in Interpreter, op string, input Input) (any, error) {
	o, ok := OperationByName(op)
	if !ok {
		return nil, fmt.Errorf("unknown operation %q; use one of InterpretReplica, ReviseReplica, InterpretStatus, AggregateStatus, InterpretHealth, Retain, InterpretDependency", op)
	}
	need := func(u *unstructured.Unstructured, flag string) error {
		if u == nil {
			return fmt.Errorf("operation %s needs %s", o.Name, flag)
		}
		return nil
	}
	switch o.Name {
	case configv1alpha1.OperationInterpretReplica:
		if err := need(input.Desired, "the desired object (--desired)"); err != nil {
			return nil, err
		}
		n, has, err := in.GetReplicas(input.Desired)
		if err != nil {
			return nil, err
		}
		if !has {
			return map[string]any{"hasReplicas": false}, nil
		}
		out := map[string]any{"replicas": int64(n)}
		req, err := in.ReplicaRequests(input.Desired)
		if err != nil {
			return nil, err
		}
		if len(req) > 0 {
			rr := map[string]any{}
			for k, q := range req {
				rr[string(k)] = q.String()
			}
			out["resourceRequest"] = rr
		}
		return out, nil
	case configv1alpha1.OperationReviseReplica:
		if err := need(input.Desired, "the desired object (--desired)"); err != nil {
			return nil, err
		}
		obj := input.Desired.DeepCopy()
		if err := in.ReviseReplica(obj, input.Replicas); err != nil {
			return nil, err
		}
		return obj.Object, nil
	case configv1alpha1.OperationInterpretStatus:
		if err := need(input.Observed, "the observed object (--observed)"); err != nil {
			return nil, err
		}
		st, err := in.ReflectStatus(input.Observed)
		return nilMap(st), err
	case configv1alpha1.OperationAggregateStatus:
		if err := need(input.Desired, "the desired object (--desired)"); err != nil {
			return nil, err
		}
		st, err := in.AggregateStatus(input.Desired, input.StatusItems)
		return nilMap(st), err
	case configv1alpha1.OperationInterpretHealth:
		if err := need(input.Observed, "the observed object (--observed)"); err != nil {
			return nil, err
		}
		h, err := in.Health(input.Observed)
		if err != nil {
			return nil, err
		}
		return map[string]any{"health": string(h)}, nil
	case configv1alpha1.OperationRetain:
		if err := need(input.Desired, "the desired object (--desired)"); err != nil {
			return nil, err
		}
		if err := need(input.Observed, "the observed object (--observed)"); err != nil {
			return nil, err
		}
		obj := input.Desired.DeepCopy()
		if err := in.Retain(obj, input.Observed); err != nil {
			return nil, err
		}
		return obj.Object, nil
	default: // InterpretDependency
		if err := need(input.Desired, "the desired object (--desired)"); err != nil {
			return nil, err
		}
		deps, err := in.Dependencies(input.Desired)
		if err != nil {
			return nil, err
		}
		out := make([]any, 0, len(deps))
		for _, d := range deps {
			ns := d.Namespace
			if ns == "" {
				ns = input.Desired.GetNamespace()
			}
			out = append(out, map[string]any{"apiVersion": d.APIVersion, "kind": d.Kind, "namespace": ns, "name": d.Name})
		}
		return out, nil
	}
}

func nilMap(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

// ParseStatusItems reads status items as `flotilla interpret --status-items` takes them.
func ParseStatusItems(items []any) ([]MemberStatus, error) {
	out := make([]MemberStatus, 0, len(items))
	for i, e := range items {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("status item [%d] must be a map with clusterName, status, applied and health", i)
		}
		ms := MemberStatus{Health: workv1alpha1.HealthUnknown, Applied: true, Current: true, Observed: true}
		ms.Cluster, _ = m["clusterName"].(string)
		if ms.Cluster == "" {
			return nil, fmt.Errorf("status item [%d]: clusterName is required", i)
		}
		if st, ok := m["status"].(map[string]any); ok {
			ms.Status = st
		}
		if a, ok := m["applied"].(bool); ok {
			ms.Applied = a
		}
		if c, ok := m["current"].(bool); ok {
			ms.Current = c
		}
		if o, ok := m["observed"].(bool); ok {
			ms.Observed = o
		}
		ms.Revision = toInt64(m["revision"])
		if h, ok := m["health"].(string); ok {
			ms.Health = workv1alpha1.Health(h)
		}
		out = append(out, ms)
	}
	return out, nil
}
