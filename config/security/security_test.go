package security

import (
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// The admission policy must compare every spec field users may not change: a field added to
// a release later fails this test until the policy covers it or names it a switch. A binding's
// spec is frozen whole.
func TestAdmissionPolicyCoversEverySpecField(t *testing.T) {
	policy := string(YAML())
	if !strings.Contains(policy, "object.spec == oldObject.spec") {
		t.Error("the admission policy no longer freezes a binding's whole spec")
	}
	cases := []struct {
		spec     any
		switches map[string]bool
	}{
		{rolloutv1alpha1.ReleaseSpec{}, map[string]bool{"paused": true, "abort": true, "promotedWave": true, "promotedStep": true, "promoteFull": true, "windowOverride": true, "retry": true}},
	}
	for _, c := range cases {
		typ := reflect.TypeOf(c.spec)
		for i := range typ.NumField() {
			name := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]
			check := "object.spec.?" + name + " == oldObject.spec.?" + name
			if c.switches[name] {
				if strings.Contains(policy, check) {
					t.Errorf("%s.%s is a user switch but the policy freezes it", typ.Name(), name)
				}
				continue
			}
			if !strings.Contains(policy, check) {
				t.Errorf("%s.%s is not compared by the admission policy: add %q or make it a documented switch", typ.Name(), name, check)
			}
		}
	}
}

func TestManifestsParse(t *testing.T) {
	for i, doc := range strings.Split(string(YAML()), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
	}
}
