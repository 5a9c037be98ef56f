package workloadstatus

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/internal/names"
)

// A template nobody runs reads as observed with no replicas and says why; the condition keeps
// its time while it stays unplaced, so nothing is written again.
func TestUnplacedStatus(t *testing.T) {
	tmpl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "base", "generation": int64(3), "creationTimestamp": "2026-11-23T10:00:00Z"}}}
	st := unplacedStatus("Deployment", tmpl, nil, "NoPolicy", "no policy", false)
	if st["observedGeneration"] != int64(3) {
		t.Errorf("observedGeneration %v, want 3", st["observedGeneration"])
	}
	c := st["conditions"].([]any)[0].(map[string]any)
	if c["type"] != names.ConditionPropagated || c["status"] != "False" || c["reason"] != "NoPolicy" || c["lastTransitionTime"] != "2026-11-23T10:00:00Z" {
		t.Errorf("condition %v", c)
	}
	c["lastTransitionTime"] = "2026-11-23T11:00:00Z"
	again := unplacedStatus("Deployment", tmpl, st, "NoPolicy", "no policy", false)
	if got := again["conditions"].([]any)[0].(map[string]any)["lastTransitionTime"]; got != "2026-11-23T11:00:00Z" {
		t.Errorf("an unchanged condition keeps its time, got %v", got)
	}
	if rs := unplacedStatus("ReplicaSet", tmpl, nil, "NoPolicy", "no policy", false); rs["replicas"] != int64(0) {
		t.Errorf("a ReplicaSet's status needs replicas: %v", rs)
	}
	if len(st["conditions"].([]any)) != 1 {
		t.Errorf("a template no policy places has not failed: %v", st["conditions"])
	}
	// No cluster can run it: a Deployment also reads as past its progress deadline, so
	// kubectl rollout status, Argo CD and kstatus report the failure instead of waiting.
	failed := unplacedStatus("Deployment", tmpl, nil, "Unschedulable", "no cluster can run it", true)
	conds := failed["conditions"].([]any)
	if len(conds) != 2 || conds[1].(map[string]any)["reason"] != "ProgressDeadlineExceeded" || conds[0].(map[string]any)["reason"] != "Unschedulable" {
		t.Errorf("unschedulable conditions %v", conds)
	}
}
