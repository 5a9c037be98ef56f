package interpret

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/luavm"
)

// Every compilation of a customization is a version of its own, even of the same scripts and
// generation (a customization deleted and made again): what was worked out with the old one is
// not taken for the new one's.
func TestEachCompilationIsAnotherVersion(t *testing.T) {
	r := NewRegistry(luavm.Limits{})
	ric := &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "widgets", Generation: 1},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{Target: configv1alpha1.CustomizationTarget{APIVersion: "example.com/v1", Kind: "Widget"},
			Customizations: configv1alpha1.CustomizationRules{ReplicaResource: &configv1alpha1.LuaScript{LuaScript: "function GetReplicas(obj) return 1, nil end"}}}}
	versions := map[string]bool{}
	for range 2 {
		c, err := r.Compile(ric)
		if err != nil {
			t.Fatal(err)
		}
		versions[Version(r.With(c))] = true
	}
	if len(versions) != 2 {
		t.Fatalf("two compilations of one customization share a version: %v", versions)
	}
	if got := Version(Builtin(schema.GroupKind{Group: "apps", Kind: "Deployment"})); versions[got] {
		t.Fatalf("the built-in interpreter's version %q is a customization's", got)
	}
}
