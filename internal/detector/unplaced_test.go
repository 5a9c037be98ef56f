package detector

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A template nobody runs reads as observed with no replicas and says why; the condition keeps
// its time while it stays unplaced, so nothing is written again.
func TestUnplacedStatus(t *testing.T) {
	tmpl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "base", "generation": int64(3), "creationTimestamp": "2026-11-23T10:00:00Z"}}}
	st := unplacedStatus("Deployment", tmpl, nil)
	if st["observedGeneration"] != int64(3) {
		t.Errorf("observedGeneration %v, want 3", st["observedGeneration"])
	}
	c := st["conditions"].([]any)[0].(map[string]any)
	if c["type"] != ConditionPropagated || c["status"] != "False" || c["reason"] != "NoPolicy" || c["lastTransitionTime"] != "2026-11-23T10:00:00Z" {
		t.Errorf("condition %v", c)
	}
	c["lastTransitionTime"] = "2026-11-23T11:00:00Z"
	again := unplacedStatus("Deployment", tmpl, st)
	if got := again["conditions"].([]any)[0].(map[string]any)["lastTransitionTime"]; got != "2026-11-23T11:00:00Z" {
		t.Errorf("an unchanged condition keeps its time, got %v", got)
	}
	if rs := unplacedStatus("ReplicaSet", tmpl, nil); rs["replicas"] != int64(0) {
		t.Errorf("a ReplicaSet's status needs replicas: %v", rs)
	}
}
