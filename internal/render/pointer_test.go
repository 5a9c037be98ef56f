package render

import "testing"

func TestPointerResolves(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{"team/owner": "shop"}},
		"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "web", "image": "web:1"},
			map[string]any{"name": "proxy", "image": "proxy:1"},
		}}}},
	}
	for pointer, want := range map[string]bool{
		"/spec/replicas": true,
		"/spec/template/spec/containers/web/image":    true,
		"/spec/template/spec/containers/1/image":      true,
		"/spec/template/spec/containers/*/image":      true,
		"/metadata/annotations/team~1owner":           true,
		"/spec/template/spec/containers/nosuch/image": false,
		"/spec/template/spec/containers/2/image":      false,
		"/spec/template/spec/containers/web/command":  false,
		"/spec/paused":                                false,
		"spec/replicas":                               false,
	} {
		if got := PointerResolves(obj, pointer); got != want {
			t.Errorf("%s: resolves %v, want %v", pointer, got, want)
		}
	}
}
