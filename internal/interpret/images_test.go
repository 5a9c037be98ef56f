package interpret

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestImagesOfAWorkload(t *testing.T) {
	pod := func(init []any, containers []any) map[string]any {
		spec := map[string]any{"containers": containers}
		if init != nil {
			spec["initContainers"] = init
		}
		return spec
	}
	c := func(name, image string) any { return map[string]any{"name": name, "image": image} }
	for _, tc := range []struct {
		name string
		obj  map[string]any
		want []string
	}{
		{"a Deployment with init containers and several containers", map[string]any{"kind": "Deployment", "spec": map[string]any{"template": map[string]any{
			"spec": pod([]any{c("migrate", "db:2")}, []any{c("web", "web:2"), c("proxy", "envoy:1"), c("sidecar", "envoy:1")})}}},
			[]string{"db:2", "web:2", "envoy:1"}},
		{"a CronJob", map[string]any{"kind": "CronJob", "spec": map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{
			"spec": pod(nil, []any{c("report", "report:7")})}}}}}, []string{"report:7"}},
		{"a Pod", map[string]any{"kind": "Pod", "spec": pod([]any{c("init", "init:1")}, []any{c("main", "main:1")})}, []string{"init:1", "main:1"}},
		{"a ConfigMap", map[string]any{"kind": "ConfigMap", "data": map[string]any{"image": "not:one"}}, nil},
		{"a container without an image", map[string]any{"kind": "Deployment", "spec": map[string]any{"template": map[string]any{
			"spec": pod(nil, []any{map[string]any{"name": "x"}, c("web", "web:1")})}}}, []string{"web:1"}},
	} {
		if d := cmp.Diff(tc.want, Images(&unstructured.Unstructured{Object: tc.obj})); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}
