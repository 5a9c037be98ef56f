package interpret

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// job runs in every cluster it is placed in (Duplicated); it is complete when every member's
// Job is.
type job struct{ generic }

func (job) ReflectStatus(obj *unstructured.Unstructured) map[string]any {
	st, _, _ := unstructured.NestedMap(obj.Object, "status")
	out := map[string]any{}
	for _, f := range []string{"active", "succeeded", "failed", "conditions", "startTime", "completionTime"} {
		if v, ok := st[f]; ok {
			out[f] = v
		}
	}
	return out
}

// AggregateStatus writes a status the control plane's Job validation accepts: a finished Job
// carries SuccessCriteriaMet (or FailureTarget) beside Complete (or Failed), no active pods, a
// start time, and a completion time once complete; start and completion times never change
// once set, and the counters never decrease.
func (job) AggregateStatus(tmpl *unstructured.Unstructured, members []MemberStatus) map[string]any {
	// A Job placed in N clusters is one run everywhere: its completions are those every member
	// made (the least of them), its failures the most any member saw, and active pods add up.
	var active, succeeded, failed int64
	complete, anyFailed := len(members) > 0, false
	startTime, completionTime := "", ""
	for i, m := range members {
		active += toInt64(m.Status["active"])
		if s := toInt64(m.Status["succeeded"]); i == 0 || s < succeeded {
			succeeded = s
		}
		failed = max(failed, toInt64(m.Status["failed"]))
		if !hasCondition(m.Status, "Complete") {
			complete = false
		}
		if hasCondition(m.Status, "Failed") {
			anyFailed = true
		}
		if s, _ := m.Status["startTime"].(string); s != "" && (startTime == "" || s < startTime) {
			startTime = s
		}
		if c, _ := m.Status["completionTime"].(string); c > completionTime {
			completionTime = c
		}
	}
	var current map[string]any
	if tmpl != nil {
		current, _, _ = unstructured.NestedMap(tmpl.Object, "status")
	}
	succeeded = max(succeeded, toInt64(current["succeeded"]))
	failed = max(failed, toInt64(current["failed"]))
	out := map[string]any{"active": active, "succeeded": succeeded, "failed": failed}
	if s, _ := current["startTime"].(string); s != "" {
		startTime = s
	}
	if startTime != "" {
		out["startTime"] = startTime
	}
	now := completionTime
	if now == "" {
		now = startTime
	}
	condition := func(kind, reason, message string) map[string]any {
		return map[string]any{"type": kind, "status": "True", "reason": reason, "message": message, "lastProbeTime": now, "lastTransitionTime": now}
	}
	var conds []any
	switch {
	case anyFailed && startTime != "":
		out["active"] = int64(0)
		conds = append(conds, condition("FailureTarget", "FailedInACluster", "the Job failed in at least one cluster"),
			condition("Failed", "FailedInACluster", "the Job failed in at least one cluster"))
	case complete && startTime != "" && completionTime != "":
		out["active"] = int64(0)
		if c, _ := current["completionTime"].(string); c != "" {
			completionTime = c
		}
		out["completionTime"] = completionTime
		conds = append(conds, condition("SuccessCriteriaMet", "CompletedInEveryCluster", "the Job completed in every cluster"),
			condition("Complete", "CompletedInEveryCluster", "the Job completed in every cluster"))
	}
	if conds != nil {
		out["conditions"] = conds
	}
	return out
}

func (job) Health(obj *unstructured.Unstructured) workv1alpha1.Health {
	st, _, _ := unstructured.NestedMap(obj.Object, "status")
	switch {
	case hasCondition(st, "Failed"):
		return workv1alpha1.HealthDegraded
	case hasCondition(st, "Complete"):
		return workv1alpha1.HealthHealthy
	}
	return workv1alpha1.HealthProgressing
}

func hasCondition(status map[string]any, condType string) bool {
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == condType && m["status"] == "True" {
			return true
		}
	}
	return false
}

// daemonSet runs its pods on every node of every cluster it is placed in; its counts add up.
type daemonSet struct {
	generic
	counts counted
}

func (d daemonSet) ReflectStatus(obj *unstructured.Unstructured) map[string]any {
	return reflectFields(obj, d.counts.fields)
}

func (d daemonSet) AggregateStatus(template *unstructured.Unstructured, members []MemberStatus) map[string]any {
	return d.counts.aggregate(template, members)
}

func (daemonSet) Health(obj *unstructured.Unstructured) workv1alpha1.Health {
	st, _, _ := unstructured.NestedMap(obj.Object, "status")
	if toInt64(st["observedGeneration"]) < obj.GetGeneration() {
		return workv1alpha1.HealthProgressing
	}
	want := toInt64(st["desiredNumberScheduled"])
	if toInt64(st["updatedNumberScheduled"]) < want || toInt64(st["numberAvailable"]) < want {
		return workv1alpha1.HealthProgressing
	}
	return workv1alpha1.HealthHealthy
}

type pod struct{ generic }

func (pod) Health(obj *unstructured.Unstructured) workv1alpha1.Health {
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	switch phase {
	case "Succeeded":
		return workv1alpha1.HealthHealthy
	case "Failed":
		return workv1alpha1.HealthDegraded
	case "Running":
		st, _, _ := unstructured.NestedMap(obj.Object, "status")
		if hasCondition(st, "Ready") {
			return workv1alpha1.HealthHealthy
		}
	}
	return workv1alpha1.HealthProgressing
}

type pvc struct{ generic }

func (pvc) Health(obj *unstructured.Unstructured) workv1alpha1.Health {
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	switch phase {
	case "Bound":
		return workv1alpha1.HealthHealthy
	case "Lost":
		return workv1alpha1.HealthDegraded
	}
	return workv1alpha1.HealthProgressing
}

// service: healthy once it exists, except a LoadBalancer waits for an ingress address.
type service struct{ generic }

func (service) Health(obj *unstructured.Unstructured) workv1alpha1.Health {
	t, _, _ := unstructured.NestedString(obj.Object, "spec", "type")
	if t != "LoadBalancer" {
		return workv1alpha1.HealthHealthy
	}
	return ingressHealth(obj)
}

type ingress struct{ generic }

func (ingress) Health(obj *unstructured.Unstructured) workv1alpha1.Health { return ingressHealth(obj) }

func ingressHealth(obj *unstructured.Unstructured) workv1alpha1.Health {
	lb, _, _ := unstructured.NestedSlice(obj.Object, "status", "loadBalancer", "ingress")
	if len(lb) > 0 {
		return workv1alpha1.HealthHealthy
	}
	return workv1alpha1.HealthProgressing
}
