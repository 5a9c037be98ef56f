package interpret

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

var deploymentGK = schema.GroupKind{Group: "apps", Kind: "Deployment"}

func deploy(gen int64, replicas int64, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "generation": gen},
		"spec":     map[string]any{"replicas": replicas},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func TestDeploymentReplicasAndHealth(t *testing.T) {
	in := builtinKind(deploymentGK)
	r, has, err := in.GetReplicas(deploy(1, 10, nil))
	if err != nil || !has || r != 10 {
		t.Fatalf("GetReplicas = %d %v %v", r, has, err)
	}
	tests := []struct {
		name   string
		obj    *unstructured.Unstructured
		health workv1alpha1.Health
	}{
		{"not observed yet", deploy(2, 5, map[string]any{"observedGeneration": int64(1), "updatedReplicas": int64(5), "availableReplicas": int64(5)}), workv1alpha1.HealthProgressing},
		{"rolling", deploy(2, 5, map[string]any{"observedGeneration": int64(2), "updatedReplicas": int64(3), "availableReplicas": int64(5)}), workv1alpha1.HealthProgressing},
		{"available", deploy(2, 5, map[string]any{"observedGeneration": int64(2), "updatedReplicas": int64(5), "availableReplicas": int64(5)}), workv1alpha1.HealthHealthy},
	}
	for _, tt := range tests {
		if got := in.Health(tt.obj); got != tt.health {
			t.Errorf("%s: health %s, want %s", tt.name, got, tt.health)
		}
	}
}

func TestDeploymentAggregateStatus(t *testing.T) {
	in := builtinKind(deploymentGK)
	member := func(gen, observed, avail int64) MemberStatus {
		return MemberStatus{Status: in.ReflectStatus(deploy(gen, 5, map[string]any{
			"observedGeneration": observed, "replicas": int64(5), "updatedReplicas": int64(5), "readyReplicas": avail, "availableReplicas": avail,
		}))}
	}
	tmpl := deploy(7, 10, map[string]any{"observedGeneration": int64(6)})
	got := in.AggregateStatus(tmpl, []MemberStatus{member(3, 3, 5), member(1, 1, 4)})
	want := map[string]any{"replicas": int64(10), "updatedReplicas": int64(10), "readyReplicas": int64(9), "availableReplicas": int64(9),
		"unavailableReplicas": int64(0), "observedGeneration": int64(7)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("aggregate (-want +got):\n%s", diff)
	}
	// One member has not observed its latest spec: the template's observedGeneration stays.
	got = in.AggregateStatus(tmpl, []MemberStatus{member(3, 3, 5), member(2, 1, 5)})
	if got["observedGeneration"] != int64(6) {
		t.Errorf("observedGeneration = %v, want the previous 6 while a member lags", got["observedGeneration"])
	}
}

func TestJobAggregate(t *testing.T) {
	in := builtinKind(schema.GroupKind{Group: "batch", Kind: "Job"})
	done := func(start, end string) map[string]any {
		return map[string]any{"succeeded": int64(1), "startTime": start, "completionTime": end,
			"conditions": []any{map[string]any{"type": "Complete", "status": "True"}}}
	}
	running := map[string]any{"active": int64(1), "startTime": "2026-11-22T10:00:05Z"}
	got := in.AggregateStatus(nil, []MemberStatus{{Status: done("2026-11-22T10:00:00Z", "2026-11-22T10:01:00Z")}, {Status: running}})
	if got["succeeded"] != int64(1) || got["active"] != int64(1) || got["conditions"] != nil || got["startTime"] != "2026-11-22T10:00:00Z" {
		t.Errorf("partly done: %v", got)
	}
	got = in.AggregateStatus(nil, []MemberStatus{{Status: done("2026-11-22T10:00:05Z", "2026-11-22T10:01:00Z")}, {Status: done("2026-11-22T10:00:00Z", "2026-11-22T10:02:00Z")}})
	conds, _ := got["conditions"].([]any)
	if len(conds) != 2 || conds[0].(map[string]any)["type"] != "SuccessCriteriaMet" || conds[1].(map[string]any)["type"] != "Complete" {
		t.Errorf("complete everywhere must say SuccessCriteriaMet and Complete, as Job validation requires: %v", got)
	}
	if got["startTime"] != "2026-11-22T10:00:00Z" || got["completionTime"] != "2026-11-22T10:02:00Z" || got["active"] != int64(0) {
		t.Errorf("times span the members and a finished Job has no active pods: %v", got)
	}
	// Set times never change and counters never go down, whatever the members say later.
	tmpl := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
		"startTime": "2026-11-22T09:59:00Z", "completionTime": "2026-11-22T10:03:00Z", "succeeded": int64(5),
	}}}
	got = in.AggregateStatus(tmpl, []MemberStatus{{Status: done("2026-11-22T10:00:05Z", "2026-11-22T10:01:00Z")}})
	if got["startTime"] != "2026-11-22T09:59:00Z" || got["completionTime"] != "2026-11-22T10:03:00Z" || got["succeeded"] != int64(5) {
		t.Errorf("immutable times and monotonic counters: %v", got)
	}
}

func TestDependencies(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"serviceAccountName": "web-sa",
			"imagePullSecrets":   []any{map[string]any{"name": "pull"}},
			"volumes": []any{
				map[string]any{"name": "cfg", "configMap": map[string]any{"name": "web-config"}},
				map[string]any{"name": "data", "persistentVolumeClaim": map[string]any{"claimName": "web-data"}},
			},
			"containers": []any{map[string]any{"name": "web", "image": "web",
				"envFrom": []any{map[string]any{"secretRef": map[string]any{"name": "web-secrets"}}},
				"env":     []any{map[string]any{"name": "A", "valueFrom": map[string]any{"configMapKeyRef": map[string]any{"name": "web-config", "key": "a"}}}},
			}},
		}}},
	}}
	want := []Dependency{
		{APIVersion: "v1", Kind: "ConfigMap", Name: "web-config"}, {APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: "web-data"},
		{APIVersion: "v1", Kind: "Secret", Name: "pull"}, {APIVersion: "v1", Kind: "Secret", Name: "web-secrets"}, {APIVersion: "v1", Kind: "ServiceAccount", Name: "web-sa"},
	}
	if diff := cmp.Diff(want, PodDependencies(obj)); diff != "" {
		t.Errorf("dependencies (-want +got):\n%s", diff)
	}
	if got := PodDependencies(&unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap", "data": map[string]any{}}}); len(got) != 0 {
		t.Errorf("a ConfigMap has no dependencies: %v", got)
	}
}

func TestDeploymentDegraded(t *testing.T) {
	in := builtinKind(deploymentGK)
	for name, cond := range map[string]map[string]any{
		"replica failure":   {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate"},
		"deadline exceeded": {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"},
	} {
		obj := deploy(2, 3, map[string]any{"observedGeneration": int64(2), "conditions": []any{cond}})
		if got := in.Health(obj); got != workv1alpha1.HealthDegraded {
			t.Errorf("%s: health %s, want Degraded", name, got)
		}
	}
}
