package render

import "testing"

func TestPointerMissesElement(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{"team/owner": "shop"}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "web", "image": "web:1"},
			map[string]any{"name": "proxy", "image": "proxy:1"},
		}}}},
	}
	for pointer, want := range map[string]bool{
		"/spec/template/spec/containers/web/image":   false,
		"/spec/template/spec/containers/1/image":     false,
		"/spec/template/spec/containers/*/image":     false,
		"/spec/template/spec/containers/web/command": false, // a field not set: not a miss
		"/spec/replicas":                              false, // left to an autoscaler
		"/metadata/annotations/team~1owner":           false,
		"/spec/template/spec/containers/nosuch/image": true,
		"/spec/template/spec/containers/2/image":      true,
		"/spec/template/spec/containers/nosuch":       true,
	} {
		if got := PointerMissesElement(obj, pointer); got != want {
			t.Errorf("%s: misses %v, want %v", pointer, got, want)
		}
	}
}
