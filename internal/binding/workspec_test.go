package binding

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

func TestWorkSpecEqual(t *testing.T) {
	spec := func(raws ...string) workv1alpha1.WorkSpec {
		var s workv1alpha1.WorkSpec
		for _, r := range raws {
			s.Manifests = append(s.Manifests, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(r)}})
		}
		return s
	}
	const obj = `{"kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`
	for _, tc := range []struct {
		name string
		a, b workv1alpha1.WorkSpec
		want bool
	}{
		{"the same bytes", spec(obj), spec(obj), true},
		{"rendered, ending in a newline", spec(obj + "\n"), spec(obj), true},
		{"another key order", spec(obj), spec(`{"data":{"k":"v"},"metadata":{"name":"a"},"kind":"ConfigMap"}`), true},
		{"another value", spec(obj), spec(`{"kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"w"}}`), false},
		{"a manifest more", spec(obj), spec(obj, obj), false},
		{"not JSON", spec(obj), spec(`{`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := workSpecEqual(tc.a, tc.b); got != tc.want {
				t.Errorf("workSpecEqual = %v, want %v", got, tc.want)
			}
		})
	}
}
