package interpret

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/luavm"
)

// hostileCustomization compiles scripts for example.dev/v1 Widget, as a platform would install
// them, and answers the interpreter that runs them on every team's Widgets.
func hostileCustomization(t *testing.T, rules configv1alpha1.CustomizationRules) Interpreter {
	t.Helper()
	r := NewRegistry(luavm.DefaultLimits())
	c, err := r.Compile(&configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{Target: configv1alpha1.CustomizationTarget{APIVersion: "example.dev/v1", Kind: "Widget"}, Customizations: rules}})
	if err != nil {
		t.Fatal(err)
	}
	return r.With(c)
}

func widget() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "team-a"},
		"spec":     map[string]any{"replicas": int64(1), "target": "kube-system"},
	}}
}

// Flotilla applies what ReviseReplica and Retain return, in every member, with its own
// credentials: a script that returns another object (moved to the namespace a field of the
// object names, or turned into a ClusterRoleBinding) fails its call, and the object is left
// as it was.
func TestScriptsCannotMoveTheObjectTheyRevise(t *testing.T) {
	in := hostileCustomization(t, configv1alpha1.CustomizationRules{
		ReplicaRevision: &configv1alpha1.LuaScript{LuaScript: `function ReviseReplica(obj, replicas)
  obj.metadata.namespace = obj.spec.target
  obj.spec.replicas = replicas
  return obj
end`},
		Retention: &configv1alpha1.LuaScript{LuaScript: `function Retain(desired, observed)
  desired.apiVersion = "rbac.authorization.k8s.io/v1"
  desired.kind = "ClusterRoleBinding"
  desired.metadata.namespace = nil
  return desired
end`},
	})
	obj := widget()
	err := in.ReviseReplica(obj, 5)
	if err == nil || !strings.Contains(err.Error(), "must return the same object") {
		t.Errorf("ReviseReplica moving the object: %v, want it refused", err)
	}
	if obj.GetNamespace() != "team-a" || obj.Object["spec"].(map[string]any)["replicas"] != int64(1) {
		t.Errorf("after a refused ReviseReplica the object is %v, want it unchanged", obj.Object)
	}
	obj = widget()
	err = in.Retain(obj, widget())
	if err == nil || !strings.Contains(err.Error(), "must return the same object") {
		t.Errorf("Retain turning the object into a ClusterRoleBinding: %v, want it refused", err)
	}
	if obj.GetKind() != "Widget" || obj.GetNamespace() != "team-a" {
		t.Errorf("after a refused Retain the object is %v, want it unchanged", obj.Object)
	}
}

// Dependencies follow a workload into its clusters, read with Flotilla's rights: a script
// that names another namespace's Secret (here the one a field of the object names) fails its
// call, so team A's Widget cannot carry team B's Secret to team A's clusters; a dependency in
// the workload's own namespace is taken.
func TestScriptedDependenciesStayInTheWorkloadsNamespace(t *testing.T) {
	in := hostileCustomization(t, configv1alpha1.CustomizationRules{
		DependencyInterpretation: &configv1alpha1.LuaScript{LuaScript: `function GetDependencies(obj)
  if obj.spec.target == "own" then
    return {{apiVersion = "v1", kind = "ConfigMap", name = "settings"}, {apiVersion = "v1", kind = "Secret", namespace = obj.metadata.namespace, name = "db"}}
  end
  return {{apiVersion = "v1", kind = "ConfigMap", name = "settings"}, {apiVersion = "v1", kind = "Secret", namespace = obj.spec.target, name = "db"}}
end`},
	})
	for _, target := range []string{"team-b", "kube-system"} {
		obj := widget()
		obj.Object["spec"].(map[string]any)["target"] = target
		deps, err := in.Dependencies(obj)
		if err == nil || !strings.Contains(err.Error(), "dependencies must be in the workload's namespace") || len(deps) != 0 {
			t.Errorf("a dependency in %s: %v, %v; want the call refused and nothing taken", target, deps, err)
		}
	}
	obj := widget()
	obj.Object["spec"].(map[string]any)["target"] = "own"
	deps, err := in.Dependencies(obj)
	if err != nil || len(deps) != 2 || deps[1].Namespace != "team-a" {
		t.Errorf("dependencies in the workload's namespace: %+v, %v", deps, err)
	}
}
