package v1alpha1

import (
	"reflect"
	"testing"
)

func TestSwitchesRoundTripThroughAnnotations(t *testing.T) {
	for _, tc := range []struct {
		name          string
		annotations   map[string]string
		wantSuspend   *Suspension
		wantUnmanaged []string
	}{
		{"none", map[string]string{"a": "b"}, nil, nil},
		{"every cluster", map[string]string{SuspendAnnotation: " * "}, &Suspension{Dispatching: true}, nil},
		{"some, messy", map[string]string{SuspendAnnotation: "west, east,,west", UnmanagedAnnotation: "europe"},
			&Suspension{Clusters: []string{"east", "west"}}, []string{"europe"}},
		{"empty values", map[string]string{SuspendAnnotation: "", UnmanagedAnnotation: " , "}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, u := SwitchesFrom(tc.annotations)
			if !reflect.DeepEqual(s, tc.wantSuspend) || !reflect.DeepEqual(u, tc.wantUnmanaged) {
				t.Fatalf("SwitchesFrom = %+v, %v; want %+v, %v", s, u, tc.wantSuspend, tc.wantUnmanaged)
			}
			back := SetSwitches(map[string]string{"a": "b"}, s, u)
			s2, u2 := SwitchesFrom(back)
			if !reflect.DeepEqual(s2, s) || !reflect.DeepEqual(u2, u) {
				t.Fatalf("round trip: %v", back)
			}
			if back["a"] != "b" {
				t.Fatal("other annotations lost")
			}
			if got := WithoutSwitches(back); got["a"] != "b" || got[SuspendAnnotation] != "" || got[UnmanagedAnnotation] != "" {
				t.Fatalf("WithoutSwitches = %v", got)
			}
		})
	}
}

// Two bindings of different namespaces never share a Work name: with a dash, shop/a-api and
// shop-a/api would both be shop-a-api.
func TestWorkNamesOfDifferentNamespacesNeverClash(t *testing.T) {
	pairs := [][2]string{{"shop", "a-api-deployment"}, {"shop-a", "api-deployment"}, {"", "shop-a.api-deployment"}, {"cluster", "x-deployment"}}
	seen := map[string][2]string{}
	for _, p := range pairs {
		n := WorkName(p[0], p[1])
		if other, ok := seen[n]; ok {
			t.Fatalf("%v and %v share the Work name %s", other, p, n)
		}
		seen[n] = p
	}
}
