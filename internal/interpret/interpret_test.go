package interpret

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/luavm"
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
		{"surging: the old pod still serves, the new one is not available", deploy(2, 1, map[string]any{"observedGeneration": int64(2), "replicas": int64(2), "updatedReplicas": int64(1), "availableReplicas": int64(1)}), workv1alpha1.HealthProgressing},
		{"rolled: only updated pods left", deploy(2, 1, map[string]any{"observedGeneration": int64(2), "replicas": int64(1), "updatedReplicas": int64(1), "availableReplicas": int64(1)}), workv1alpha1.HealthHealthy},
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
		return MemberStatus{Current: true, Observed: true, Status: in.ReflectStatus(deploy(gen, 5, map[string]any{
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
	// A member whose Work still holds the previous render answers an older template
	// generation, even though its own controller is up to date.
	stale := member(3, 3, 5)
	stale.Observed = false
	got = in.AggregateStatus(tmpl, []MemberStatus{member(3, 3, 5), stale})
	if got["observedGeneration"] != int64(6) {
		t.Errorf("observedGeneration = %v, want the previous 6 while a member's Work is not applied", got["observedGeneration"])
	}
	// A member a release keeps on the older revision is not updated, whatever it says of its
	// own spec: the template must not read "all updated" before the last wave.
	pinned := member(3, 3, 5)
	pinned.Current = false
	got = in.AggregateStatus(tmpl, []MemberStatus{member(3, 3, 5), pinned})
	if got["updatedReplicas"] != int64(5) || got["replicas"] != int64(10) || got["observedGeneration"] != int64(7) {
		t.Errorf("pinned member: updatedReplicas %v replicas %v observedGeneration %v, want 5, 10, 7", got["updatedReplicas"], got["replicas"], got["observedGeneration"])
	}
}

func TestDeploymentAggregateConditions(t *testing.T) {
	in := builtinKind(deploymentGK)
	now = func() time.Time { return time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC) }
	defer func() { now = time.Now }()
	cond := func(t, s, r, m string) any {
		return map[string]any{"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": "2026-11-23T09:00:00Z"}
	}
	member := func(cluster string, current bool, conds ...any) MemberStatus {
		return MemberStatus{Cluster: cluster, Current: current, Observed: true, Status: in.ReflectStatus(deploy(2, 5, map[string]any{
			"observedGeneration": int64(2), "replicas": int64(5), "updatedReplicas": int64(5), "availableReplicas": int64(5), "conditions": conds,
		}))}
	}
	done := []any{cond("Available", "True", "MinimumReplicasAvailable", "ok"), cond("Progressing", "True", "NewReplicaSetAvailable", "done")}
	byType := func(st map[string]any) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, c := range st["conditions"].([]any) {
			m := c.(map[string]any)
			out[m["type"].(string)] = m
		}
		return out
	}
	tmpl := deploy(2, 10, nil)
	got := byType(in.AggregateStatus(tmpl, []MemberStatus{member("m1", true, done...), member("m2", true, done...)}))
	if got["Progressing"]["status"] != "True" || got["Progressing"]["reason"] != "NewReplicaSetAvailable" || got["Available"]["status"] != "True" {
		t.Errorf("every member current and done: %v", got)
	}
	got = byType(in.AggregateStatus(tmpl, []MemberStatus{member("m1", true, done...), member("m2", false, done...)}))
	if got["Progressing"]["reason"] != "ReplicaSetUpdated" || got["Progressing"]["message"] != "1 of 2 clusters run the current revision" {
		t.Errorf("a member on the old revision keeps the template progressing: %v", got["Progressing"])
	}
	stuck := member("m2", true, cond("Progressing", "False", "ProgressDeadlineExceeded", `ReplicaSet "web-1" has timed out progressing.`),
		cond("ReplicaFailure", "True", "FailedCreate", "quota exceeded"), cond("Available", "False", "MinimumReplicasUnavailable", "none"))
	got = byType(in.AggregateStatus(tmpl, []MemberStatus{member("m1", true, done...), stuck}))
	if p := got["Progressing"]; p["status"] != "False" || p["reason"] != "ProgressDeadlineExceeded" || p["message"] != `cluster m2: ReplicaSet "web-1" has timed out progressing.` {
		t.Errorf("a stuck member makes the template's Progressing False with its reason and cluster: %v", p)
	}
	if f := got["ReplicaFailure"]; f["status"] != "True" || f["reason"] != "FailedCreate" || f["message"] != "cluster m2: quota exceeded" {
		t.Errorf("ReplicaFailure: %v", f)
	}
	if a := got["Available"]; a["status"] != "False" || a["reason"] != "MinimumReplicasUnavailable" {
		t.Errorf("Available: %v", a)
	}
	if p := got["Progressing"]; p["lastTransitionTime"] != "2026-11-23T10:00:00Z" {
		t.Errorf("a new condition starts now: %v", p)
	}
	// Unchanged conditions keep their times, so a steady fleet writes nothing.
	tmpl.Object["status"] = map[string]any{"conditions": in.AggregateStatus(tmpl, []MemberStatus{member("m1", true, done...), stuck})["conditions"]}
	now = func() time.Time { return time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC) }
	got = byType(in.AggregateStatus(tmpl, []MemberStatus{member("m1", true, done...), stuck}))
	if p := got["Progressing"]; p["lastTransitionTime"] != "2026-11-23T10:00:00Z" || p["lastUpdateTime"] != "2026-11-23T10:00:00Z" {
		t.Errorf("unchanged condition must keep its times: %v", p)
	}
	// ReplicaSet conditions have no lastUpdateTime.
	rs := builtinKind(schema.GroupKind{Group: "apps", Kind: "ReplicaSet"})
	rsStatus := rs.AggregateStatus(deploy(1, 2, nil), []MemberStatus{{Cluster: "m1", Current: true, Observed: true, Status: map[string]any{
		"conditions": []any{cond("ReplicaFailure", "True", "FailedCreate", "forbidden")}}}})
	c := rsStatus["conditions"].([]any)[0].(map[string]any)
	if _, has := c["lastUpdateTime"]; has || c["message"] != "cluster m1: forbidden" {
		t.Errorf("ReplicaSet condition: %v", c)
	}
}

func TestDaemonSetAggregate(t *testing.T) {
	in := builtinKind(schema.GroupKind{Group: "apps", Kind: "DaemonSet"})
	member := func(current bool) MemberStatus {
		obj := deploy(4, 0, map[string]any{"observedGeneration": int64(4), "desiredNumberScheduled": int64(3), "numberAvailable": int64(3), "updatedNumberScheduled": int64(3)})
		return MemberStatus{Current: current, Observed: true, Status: in.ReflectStatus(obj)}
	}
	got := in.AggregateStatus(deploy(2, 0, nil), []MemberStatus{member(true), member(false)})
	if got["desiredNumberScheduled"] != int64(6) || got["numberAvailable"] != int64(6) || got["updatedNumberScheduled"] != int64(3) || got["observedGeneration"] != int64(2) {
		t.Errorf("daemonset aggregate: %v", got)
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
	if got["succeeded"] != int64(0) || got["active"] != int64(1) || got["conditions"] != nil || got["startTime"] != "2026-11-22T10:00:00Z" {
		t.Errorf("partly done: one run is not done until every member's is: %v", got)
	}
	got = in.AggregateStatus(nil, []MemberStatus{{Status: done("2026-11-22T10:00:05Z", "2026-11-22T10:01:00Z")}, {Status: done("2026-11-22T10:00:00Z", "2026-11-22T10:02:00Z")}})
	conds, _ := got["conditions"].([]any)
	if len(conds) != 2 || conds[0].(map[string]any)["type"] != "SuccessCriteriaMet" || conds[1].(map[string]any)["type"] != "Complete" {
		t.Errorf("complete everywhere must say SuccessCriteriaMet and Complete, as Job validation requires: %v", got)
	}
	if got["succeeded"] != int64(1) {
		t.Errorf("a Job run once in two members made one completion, not two: succeeded %v", got["succeeded"])
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

// A customization change notifies every subscriber of every kind it touches, however many
// arrive before the subscriber reads: nothing is dropped, and the customization controller is
// never blocked by a slow subscriber.
func TestRegistryNotifiesWithoutDropping(t *testing.T) {
	r := NewRegistry(luavm.Limits{})
	ch := r.Subscribe()
	const kinds = 3000 // more than any bounded buffer would hold
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.mu.Lock()
		for i := range kinds {
			r.notify(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: fmt.Sprintf("K%d", i)})
		}
		r.mu.Unlock()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("notify blocked on a subscriber that is not reading")
	}
	seen := map[string]bool{}
	for len(seen) < kinds {
		select {
		case ev := <-ch:
			seen[ev.Object.GetKind()] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("received %d of %d kinds", len(seen), kinds)
		}
	}
}

func TestAvailableReplicas(t *testing.T) {
	in := Builtin(schema.GroupKind{Group: "apps", Kind: "Deployment"})
	for _, tc := range []struct {
		name   string
		status map[string]any
		want   *int32
	}{
		{"reported", map[string]any{"replicas": int64(3), "availableReplicas": int64(1)}, ptr.To[int32](1)},
		{"none available (the API server omits a zero count)", map[string]any{"replicas": int64(3)}, ptr.To[int32](0)},
		{"no status yet", nil, nil},
	} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "status": tc.status}}
		got, err := AvailableReplicas(in, obj)
		if err != nil || !cmp.Equal(got, tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.name, ptr.Deref(got, -1), err, ptr.Deref(tc.want, -1))
		}
	}
}
