package release

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

func TestFieldValue(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": "api", "app.kubernetes.io/version": "2.1"}},
		"spec": map[string]any{"replicas": int64(3), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "api", "image": "registry.example/api:2"}},
		}}},
	}
	tests := []struct {
		path, want, wantError string
	}{
		{path: "spec.template.spec.containers[0].image", want: "registry.example/api:2"},
		{path: "metadata.labels['app']", want: "api"},
		{path: `metadata.labels["app.kubernetes.io/version"]`, want: "2.1"},
		{path: "metadata.labels.app", want: "api"},
		{path: "spec.replicas", want: "3"},
		{path: "spec.template.spec.containers[0]", want: `{"image":"registry.example/api:2","name":"api"}`},
		{path: "spec.foo", wantError: "spec.foo not found"},
		{path: "spec.template.spec.containers[1].image", wantError: "spec.template.spec.containers[1] not found"},
		{path: "spec.replicas.x", wantError: "spec.replicas.x not found"},
		{path: "spec..x", wantError: "is not a field path"},
		{path: ".spec", wantError: "is not a field path"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := fieldValue(obj, tt.path)
			switch {
			case tt.wantError != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Errorf("error = %v, want one containing %q", err, tt.wantError)
				}
			case err != nil:
				t.Errorf("unexpected error: %v", err)
			case got != tt.want:
				t.Errorf("value = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCanaryBaselineArgs(t *testing.T) {
	args := map[string]string{}
	for _, a := range canaryBaselineArgs([]string{"west", "east", "europe"}, []string{"east", "gone"}) {
		args[a.Name] = *a.Value
	}
	want := map[string]string{"canary-clusters": "east", "canary-cluster-regex": "east",
		"baseline-clusters": "europe,west", "baseline-cluster-regex": "europe|west"}
	for k, v := range want {
		if args[k] != v {
			t.Errorf("%s = %q, want %q", k, args[k], v)
		}
	}
	last := map[string]string{}
	for _, a := range canaryBaselineArgs([]string{"east"}, []string{"east"}) {
		last[a.Name] = *a.Value
	}
	if last["baseline-cluster-regex"] != "^$" || last["baseline-clusters"] != "" {
		t.Errorf("no baseline left: %v", last)
	}
}

func TestWorkloadArgsSelectTheCanaryAndTheStablePods(t *testing.T) {
	routing := &policyv1alpha1.RolloutStrategy{TrafficRouting: &policyv1alpha1.TrafficRouting{StableService: "web", CanaryService: "web-canary"}}
	got := map[string]string{}
	for _, a := range workloadArgs("web", map[string]string{"tier": "front", "app": "web"}, routing) {
		got[a.Name] = *a.Value
	}
	want := map[string]string{
		"canary-selector": "app=web,tier=front,rollout.flotilla.dev/role=canary",
		"stable-selector": "app=web,tier=front,rollout.flotilla.dev/role!=canary",
		"canary-name":     "web-canary", "stable-name": "web",
		"canary-service": "web-canary", "stable-service": "web",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, sel := range []string{got["canary-selector"], got["stable-selector"]} {
		if _, err := labels.Parse(sel); err != nil {
			t.Errorf("%s is not a label selector: %v", sel, err)
		}
	}
}

func TestTrafficStepSizesTheCanary(t *testing.T) {
	steps := []policyv1alpha1.CanaryStep{
		{SetWeight: ptr.To[int32](20)},
		{SetCanaryScale: &policyv1alpha1.CanaryScale{Replicas: ptr.To[int32](0)}},
		{SetHeaderRoute: &policyv1alpha1.HeaderRoute{Match: []policyv1alpha1.HeaderMatch{{Name: "X-Canary", Exact: ptr.To("1")}}}},
		{SetCanaryScale: &policyv1alpha1.CanaryScale{Weight: ptr.To[int32](50)}},
		{SetCanaryScale: &policyv1alpha1.CanaryScale{MatchTrafficWeight: true}},
		{SetWeight: ptr.To[int32](60)},
	}
	for _, tt := range []struct {
		k      int
		share  int32
		weight int32
		want   int32
	}{
		{0, 10, 20, 2},
		{0, 2, 20, 1},  // ceil(0.4)
		{1, 10, 20, 1}, // replicas 0 while 20% of requests go to it: one runs
		{3, 10, 20, 5},
		{4, 10, 20, 2},
		{5, 10, 60, 6},
	} {
		ts := trafficAt(steps, tt.k)
		if ts.weight != tt.weight || ts.replicas(tt.share) != tt.want {
			t.Errorf("step %d of %d replicas: weight %d replicas %d, want %d and %d", tt.k, tt.share, ts.weight, ts.replicas(tt.share), tt.weight, tt.want)
		}
	}
	if len(trafficAt(steps, 2).header) != 1 {
		t.Error("the header route holds from its step on")
	}
}
