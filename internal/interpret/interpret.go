package interpret

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// MemberStatus is one member's reflected status of an object.
type MemberStatus struct {
	Cluster string
	Status  map[string]any
	Applied bool
	Health  workv1alpha1.Health
	// Revision is the template revision the member runs; 0 when revisions are not tracked.
	Revision int64
	// Current: the member runs the template as it is now (its latest revision, no canary
	// beside it, no change waiting for a release). Only current members count as updated.
	Current bool
	// Observed: the member applied Flotilla's latest render for it, so its status answers the
	// template's generation (even when a release keeps it on an older revision).
	Observed bool
}

// Interpreter is what the rest of Flotilla asks about a kind. Every method may fail when a
// Lua customization does; built-in interpreters fail only on malformed objects.
type Interpreter interface {
	// GetReplicas returns the replica count and whether the kind has replicas at all.
	GetReplicas(obj *unstructured.Unstructured) (int32, bool, error)
	// ReplicaRequests returns what one replica requests (cpu, memory...), for capacity division;
	// nil when unknown.
	ReplicaRequests(obj *unstructured.Unstructured) (corev1.ResourceList, error)
	// ReviseReplica sets a cluster's share of the replicas on a rendered copy.
	ReviseReplica(obj *unstructured.Unstructured, replicas int32) error
	// ReflectStatus picks what of a member object's status goes back to the control plane.
	ReflectStatus(obj *unstructured.Unstructured) (map[string]any, error)
	// AggregateStatus folds the members' statuses into the template's status; nil means the
	// template's status is not written.
	AggregateStatus(template *unstructured.Unstructured, members []MemberStatus) (map[string]any, error)
	// Health judges a member object.
	Health(obj *unstructured.Unstructured) (workv1alpha1.Health, error)
	// Retain copies into desired the fields of the live member object that member-side
	// controllers own, so applying desired does not undo them.
	Retain(desired, observed *unstructured.Unstructured) error
	// Dependencies lists the objects the workload needs beside it in every cluster.
	Dependencies(obj *unstructured.Unstructured) ([]Dependency, error)
}

// kind is a built-in interpreter of one kind; builtin adapts it to Interpreter.
type kind interface {
	GetReplicas(obj *unstructured.Unstructured) (int32, bool, error)
	ReviseReplica(obj *unstructured.Unstructured, replicas int32) error
	ReflectStatus(obj *unstructured.Unstructured) map[string]any
	AggregateStatus(template *unstructured.Unstructured, members []MemberStatus) map[string]any
	Health(obj *unstructured.Unstructured) workv1alpha1.Health
}

type builtin struct{ kind }

func (b builtin) ReflectStatus(obj *unstructured.Unstructured) (map[string]any, error) {
	return b.kind.ReflectStatus(obj), nil
}

func (b builtin) AggregateStatus(t *unstructured.Unstructured, m []MemberStatus) (map[string]any, error) {
	return b.kind.AggregateStatus(t, m), nil
}

func (b builtin) Health(obj *unstructured.Unstructured) (workv1alpha1.Health, error) {
	return b.kind.Health(obj), nil
}

// Retain: built-in kinds have nothing to retain beyond what server-side apply ownership and
// the executor's scale-subresource rule already keep.
func (builtin) Retain(_, _ *unstructured.Unstructured) error { return nil }

func (builtin) Dependencies(obj *unstructured.Unstructured) ([]Dependency, error) {
	return PodDependencies(obj), nil
}

func (builtin) ReplicaRequests(obj *unstructured.Unstructured) (corev1.ResourceList, error) {
	raw, found, _ := unstructured.NestedMap(obj.Object, podSpecPath(obj.GetKind())...)
	if !found {
		return nil, nil
	}
	return podRequests(raw)
}

// Builtin returns the built-in Go interpreter of a kind.
func Builtin(gk schema.GroupKind) Interpreter { return builtin{builtinKind(gk)} }

func builtinKind(gk schema.GroupKind) kind {
	switch gk {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
		return replicated{counts: []string{"replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas"},
			updatedField: "updatedReplicas", availableField: "availableReplicas", conditions: true}
	case schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}:
		return replicated{counts: []string{"replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas"},
			availableField: "availableReplicas", conditions: true}
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		return replicated{counts: []string{"replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas"},
			updatedField: "updatedReplicas", availableField: "availableReplicas"}
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		return job{}
	case schema.GroupKind{Group: "apps", Kind: "DaemonSet"}:
		return daemonSet{counts: counted{fields: []string{"desiredNumberScheduled", "currentNumberScheduled", "numberReady", "numberAvailable",
			"numberUnavailable", "numberMisscheduled", "updatedNumberScheduled"}, updatedField: "updatedNumberScheduled"}}
	case schema.GroupKind{Kind: "Pod"}:
		return pod{}
	case schema.GroupKind{Kind: "PersistentVolumeClaim"}:
		return pvc{}
	case schema.GroupKind{Kind: "Service"}:
		return service{}
	case schema.GroupKind{Group: "networking.k8s.io", Kind: "Ingress"}:
		return ingress{}
	}
	return generic{}
}

// generic: no replicas, status reflected whole, health from a Ready condition or existence.
type generic struct{}

func (generic) GetReplicas(*unstructured.Unstructured) (int32, bool, error) { return 0, false, nil }
func (generic) ReviseReplica(*unstructured.Unstructured, int32) error       { return nil }
func (generic) ReflectStatus(obj *unstructured.Unstructured) map[string]any {
	st, _, _ := unstructured.NestedMap(obj.Object, "status")
	return st
}
func (generic) AggregateStatus(*unstructured.Unstructured, []MemberStatus) map[string]any { return nil }
func (generic) Health(obj *unstructured.Unstructured) workv1alpha1.Health {
	conds, found, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if !found {
		return workv1alpha1.HealthHealthy // ConfigMap, Secret, ServiceAccount...: existing is healthy
	}
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			if m["status"] == "True" {
				return workv1alpha1.HealthHealthy
			}
			return workv1alpha1.HealthProgressing
		}
	}
	return workv1alpha1.HealthHealthy
}

// replicated covers kinds whose spec.replicas divides and whose status counts add up.
type replicated struct {
	counts         []string // status fields summed over members
	updatedField   string   // status field of replicas at the latest spec; "" if none
	availableField string
	conditions     bool // the members' Progressing, Available and ReplicaFailure are aggregated
}

func (r replicated) Health(obj *unstructured.Unstructured) workv1alpha1.Health {
	return replicasHealth(obj, r.updatedField, r.availableField)
}

func (replicated) GetReplicas(obj *unstructured.Unstructured) (int32, bool, error) {
	r, found, err := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if err != nil {
		return 0, true, fmt.Errorf("spec.replicas: %w", err)
	}
	if !found {
		return 1, true, nil // the API default
	}
	return int32(r), true, nil
}

func (replicated) ReviseReplica(obj *unstructured.Unstructured, replicas int32) error {
	return unstructured.SetNestedField(obj.Object, int64(replicas), "spec", "replicas")
}

func (r replicated) ReflectStatus(obj *unstructured.Unstructured) map[string]any {
	fields := r.counts
	if r.conditions {
		fields = append(slices.Clip(fields), "conditions")
	}
	return reflectFields(obj, fields)
}

// AggregateStatus sums the counts and folds the members' conditions; see counted.aggregate.
func (r replicated) AggregateStatus(template *unstructured.Unstructured, members []MemberStatus) map[string]any {
	out := counted{fields: r.counts, updatedField: r.updatedField}.aggregate(template, members)
	if r.conditions {
		if conds := aggregateConditions(template, members, r.updatedField != ""); len(conds) > 0 {
			out["conditions"] = conds
		}
	}
	return out
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	case int32:
		return int64(n)
	case float64:
		return int64(n)
	}
	return 0
}

func getPath(obj map[string]any, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	return v
}

// replicasHealth: Progressing until the controller observed the spec and the updated and
// available counts reach the desired replicas.
func replicasHealth(obj *unstructured.Unstructured, updatedField, availableField string) workv1alpha1.Health {
	want, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if !found {
		want = 1
	}
	st, _, _ := unstructured.NestedMap(obj.Object, "status")
	if toInt64(st["observedGeneration"]) < obj.GetGeneration() {
		return workv1alpha1.HealthProgressing
	}
	// Pods that cannot be created (quota, admission) or a rollout past its progress deadline
	// will not heal by waiting: Degraded, which application failover acts on.
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if (m["type"] == "ReplicaFailure" && m["status"] == "True") ||
			(m["type"] == "Progressing" && m["status"] == "False" && m["reason"] == "ProgressDeadlineExceeded") {
			return workv1alpha1.HealthDegraded
		}
	}
	if updatedField != "" && toInt64(st[updatedField]) < want {
		return workv1alpha1.HealthProgressing
	}
	// Old replicas still running beside the updated ones (a surge rollout, whose new pod is
	// counted updated before it is available while the old one still counts available).
	if _, counted := st["replicas"]; counted && updatedField != "" && toInt64(st["replicas"]) > toInt64(st[updatedField]) {
		return workv1alpha1.HealthProgressing
	}
	if toInt64(st[availableField]) < want {
		return workv1alpha1.HealthProgressing
	}
	return workv1alpha1.HealthHealthy
}

// AvailableReplicas is how many of obj's replicas are available as in reflects its status
// (the availableReplicas every built-in replicated kind reports); nil when it reports none.
func AvailableReplicas(in Interpreter, obj *unstructured.Unstructured) (*int32, error) {
	st, err := in.ReflectStatus(obj)
	if err != nil {
		return nil, err
	}
	v, ok := st["availableReplicas"]
	if !ok {
		if _, has := st["replicas"]; !has {
			return nil, nil
		}
		v = int64(0) // the API server omits a zero count
	}
	n := int32(toInt64(v))
	return &n, nil
}
