// Package workloadstatus writes the status Flotilla owns on a workload template itself when
// it runs in no cluster (no policy places it, or no cluster can take it): its generation
// observed, no replicas, and why, so kubectl rollout status, Argo CD and kstatus read an honest
// answer. The detector writes it for templates no policy selects, the binding controller for
// placed ones no cluster can run. It must not import any controller.
package workloadstatus

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/names"
)

// UnplacedKinds are the workload kinds whose tools (kubectl rollout status, Argo CD, kstatus)
// read status.observedGeneration; the template of such a kind that no policy places gets an
// honest status: its generation observed, no replicas anywhere, Propagated=False.
var UnplacedKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"},
	{Group: "apps", Version: "v1", Kind: "ReplicaSet"},
}

// WriteUnplaced writes the status of a workload template that runs in no cluster, saying
// why (reason, msg). failed: nothing will run it until its policy or the fleet changes (no
// cluster can take it), so a Deployment also reads Progressing=False ProgressDeadlineExceeded
// and `kubectl rollout status`, Argo CD and kstatus report a failure instead of waiting.
// Kinds other than the built-in workloads are left alone.
func WriteUnplaced(ctx context.Context, c client.Client, tmpl *unstructured.Unstructured, reason, msg string, failed bool) error {
	if !slices.Contains(UnplacedKinds, tmpl.GroupVersionKind()) {
		return nil
	}
	current, _, _ := unstructured.NestedMap(tmpl.Object, "status")
	want := unplacedStatus(tmpl.GetKind(), tmpl, current, reason, msg, failed)
	if apiequality.Semantic.DeepEqual(normalized(current), normalized(want)) {
		return nil
	}
	// A merge patch without resourceVersion: the status is derived again on the next event.
	patch := map[string]any{"status": want}
	for k := range current {
		if _, kept := want[k]; !kept {
			want[k] = nil
		}
	}
	data, _ := json.Marshal(patch)
	return client.IgnoreNotFound(c.Status().Patch(ctx, tmpl, client.RawPatch(types.MergePatchType, data)))
}

// unplacedStatus is what is true of a template nobody runs: its generation observed, no
// replicas, and why.
func unplacedStatus(kind string, tmpl *unstructured.Unstructured, current map[string]any, reason, msg string, failed bool) map[string]any {
	cond := map[string]any{"type": names.ConditionPropagated, "status": "False", "reason": reason, "message": msg}
	since := ""
	conds, _ := current["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == names.ConditionPropagated && m["status"] == "False" {
			since, _ = m["lastTransitionTime"].(string)
		}
	}
	if since == "" {
		since = tmpl.GetCreationTimestamp().UTC().Format("2006-01-02T15:04:05Z")
		if t, ok := current["observedGeneration"]; ok && t != nil {
			since = time.Now().UTC().Format(time.RFC3339) // it was placed until now
		}
	}
	cond["lastTransitionTime"] = since
	if kind == "Deployment" {
		cond["lastUpdateTime"] = since
	}
	conditions := []any{cond}
	if failed && kind == "Deployment" {
		conditions = append(conditions, map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
			"message": msg, "lastTransitionTime": since, "lastUpdateTime": since})
	}
	out := map[string]any{"observedGeneration": tmpl.GetGeneration(), "conditions": conditions}
	if kind == "StatefulSet" || kind == "ReplicaSet" {
		out["replicas"] = int64(0) // required by their status schemas
	}
	if kind == "DaemonSet" {
		for _, f := range []string{"currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"} {
			out[f] = int64(0)
		}
	}
	return out
}

func normalized(m map[string]any) any {
	data, _ := json.Marshal(m)
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}
