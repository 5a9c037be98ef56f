package execute

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/luavm"
)

func mustObject(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(s)); err != nil {
		t.Fatal(err)
	}
	return u
}

// rendered is what the binding controller renders for a member.
const rendered = `{"apiVersion":"apps/v1","kind":"Deployment",
 "metadata":{"name":"web","namespace":"shop","labels":{"app":"web","work.flotilla.dev/managed-by":"flotilla"},
   "annotations":{"work.flotilla.dev/work-name":"web-deployment"}},
 "spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
   "template":{"metadata":{"creationTimestamp":null,"labels":{"app":"web"}},
     "spec":{"containers":[{"name":"web","image":"registry.example/web:1","args":["--port","80"],
       "env":[{"name":"MODE","value":"fast"},{"name":"LEVEL","value":"info"}],
       "resources":{"limits":{"cpu":"1000m","memory":"128Mi"}}}],
       "nodeSelector":{"disk":"ssd","zone":"a"}}}}}`

// member returns the member's copy of rendered as the API server keeps it (defaults filled
// in, quantities normalized, status and server metadata added), changed by edit.
func member(t *testing.T, edit func(m map[string]any)) *unstructured.Unstructured {
	t.Helper()
	live := mustObject(t, rendered)
	live.SetResourceVersion("41")
	live.SetGeneration(3)
	live.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "flotilla", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}}})
	spec := live.Object["spec"].(map[string]any)
	spec["revisionHistoryLimit"] = int64(10)
	spec["strategy"] = map[string]any{"type": "RollingUpdate"}
	pod := spec["template"].(map[string]any)["spec"].(map[string]any)
	pod["restartPolicy"] = "Always"
	c := pod["containers"].([]any)[0].(map[string]any)
	c["imagePullPolicy"] = "IfNotPresent"
	c["terminationMessagePath"] = "/dev/termination-log"
	c["resources"] = map[string]any{"limits": map[string]any{"cpu": "1", "memory": "128Mi"}}
	live.Object["status"] = map[string]any{"replicas": int64(2)}
	if edit != nil {
		edit(live.Object)
	}
	return live
}

func container(m map[string]any, i int) map[string]any {
	return m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[i].(map[string]any)
}

func scaledBy(manager, subresource string) func(map[string]any) {
	return func(m map[string]any) {
		m["spec"].(map[string]any)["replicas"] = int64(5)
		u := &unstructured.Unstructured{Object: m}
		u.SetManagedFields(append(u.GetManagedFields(), metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate,
			Subresource: subresource, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}}))
	}
}

func TestDriftOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(m map[string]any)
		ignore []string
		want   []string
	}{
		{name: "as applied, with server defaults and normalized quantities"},
		{name: "image changed", edit: func(m map[string]any) { container(m, 0)["image"] = "evil.example/web:pwned" },
			want: []string{"/spec/template/spec/containers/0/image"}},
		{name: "env var changed, matched by name in another order", edit: func(m map[string]any) {
			container(m, 0)["env"] = []any{map[string]any{"name": "LEVEL", "value": "info"}, map[string]any{"name": "MODE", "value": "slow"}}
		}, want: []string{"/spec/template/spec/containers/0/env/0/value"}},
		{name: "env var removed", edit: func(m map[string]any) {
			container(m, 0)["env"] = []any{map[string]any{"name": "LEVEL", "value": "info"}}
		}, want: []string{"/spec/template/spec/containers/0/env/0"}},
		{name: "a sidecar and an env var added by others are theirs", edit: func(m map[string]any) {
			pod := m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			pod["containers"] = append(pod["containers"].([]any), map[string]any{"name": "proxy", "image": "proxy:1"})
			container(m, 0)["env"] = append(container(m, 0)["env"].([]any), map[string]any{"name": "EXTRA", "value": "1"})
		}},
		{name: "args are compared whole", edit: func(m map[string]any) { container(m, 0)["args"] = []any{"--port", "80", "--debug"} },
			want: []string{"/spec/template/spec/containers/0/args"}},
		{name: "nested map value changed", edit: func(m map[string]any) {
			m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["nodeSelector"].(map[string]any)["zone"] = "b"
		}, want: []string{"/spec/template/spec/nodeSelector/zone"}},
		{name: "quantity changed", edit: func(m map[string]any) {
			container(m, 0)["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "1Gi"
		}, want: []string{"/spec/template/spec/containers/0/resources/limits/memory"}},
		{name: "replicas edited by hand", edit: func(m map[string]any) { m["spec"].(map[string]any)["replicas"] = int64(7) },
			want: []string{"/spec/replicas"}},
		{name: "replicas written through the scale subresource", edit: scaledBy("hpa", "scale")},
		{name: "replicas written by an update without the scale subresource", edit: scaledBy("kubectl-edit", ""), want: []string{"/spec/replicas"}},
		{name: "Flotilla's label removed", edit: func(m map[string]any) {
			delete(m["metadata"].(map[string]any)["labels"].(map[string]any), workv1alpha1.ManagedByLabel)
		}, want: []string{"/metadata/labels/work.flotilla.dev~1managed-by"}},
		{name: "every label removed names each", edit: func(m map[string]any) { delete(m["metadata"].(map[string]any), "labels") },
			want: []string{"/metadata/labels/app", "/metadata/labels/work.flotilla.dev~1managed-by"}},
		{name: "a label added by hand is not Flotilla's", edit: func(m map[string]any) {
			m["metadata"].(map[string]any)["labels"].(map[string]any)["team"] = "a"
		}},
		{name: "label value changed", edit: func(m map[string]any) { m["metadata"].(map[string]any)["labels"].(map[string]any)["app"] = "other" },
			want: []string{"/metadata/labels/app"}},
		{name: "ignored replicas", edit: func(m map[string]any) { m["spec"].(map[string]any)["replicas"] = int64(7) }, ignore: []string{"/spec/replicas"}},
		{name: "ignored by container name, the rest still counts", edit: func(m map[string]any) {
			container(m, 0)["image"] = "other:2"
			m["spec"].(map[string]any)["replicas"] = int64(7)
		}, ignore: []string{"/spec/template/spec/containers/web/image"}, want: []string{"/spec/replicas"}},
		{name: "ignored with a wildcard", edit: func(m map[string]any) { container(m, 0)["env"].([]any)[1].(map[string]any)["value"] = "debug" },
			ignore: []string{"/spec/template/spec/containers/*/env"}},
		{name: "ignored label with an escaped key", edit: func(m map[string]any) {
			delete(m["metadata"].(map[string]any)["labels"].(map[string]any), workv1alpha1.ManagedByLabel)
		}, ignore: []string{"/metadata/labels/work.flotilla.dev~1managed-by"}},
		{name: "status is never drift", edit: func(m map[string]any) { m["status"] = map[string]any{"replicas": int64(9)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fieldPaths(driftOf(mustObject(t, rendered), member(t, tc.edit), tc.ignore))
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
				t.Errorf("drift (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSecretStringDataIsComparedAsData(t *testing.T) {
	desired := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"a"},"stringData":{"k":"v"}}`
	for _, tc := range []struct {
		live string
		want []string
	}{
		{`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"a"},"data":{"k":"dg=="},"type":"Opaque"}`, nil},
		{`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"a"},"data":{"k":"eA=="},"type":"Opaque"}`, []string{"/data/k"}},
	} {
		got := fieldPaths(driftOf(mustObject(t, desired), mustObject(t, tc.live), nil))
		if len(got) != len(tc.want) || (len(got) > 0 && !cmp.Equal(got, tc.want)) {
			t.Errorf("live %s: drift %v, want %v", tc.live, got, tc.want)
		}
	}
}

const workflowRetain = `
function Retain(desiredObj, observedObj)
  if observedObj.spec ~= nil and observedObj.spec.suspend ~= nil then
    desiredObj.spec.suspend = observedObj.spec.suspend
  end
  return desiredObj
end`

// A field the kind's Retain keeps from the member is not drift; the others still are. An
// unchanged member object is judged once.
func TestCheckDriftHonoursRetain(t *testing.T) {
	reg := interpret.NewRegistry(luavm.DefaultLimits())
	c, err := reg.Compile(&configv1alpha1.ResourceInterpreterCustomization{
		ObjectMeta: metav1.ObjectMeta{Name: "workflows"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target:         configv1alpha1.CustomizationTarget{APIVersion: "example.dev/v1", Kind: "Workflow"},
			Customizations: configv1alpha1.CustomizationRules{Retention: &configv1alpha1.LuaScript{LuaScript: workflowRetain}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg.Put(c)
	e := &Executor{Interpreters: reg}
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-es-east", Name: "w", UID: "u", Generation: 1}}
	key := types.NamespacedName{Namespace: w.Namespace, Name: w.Name}
	gvr := schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "workflows"}
	desired := mustObject(t, `{"apiVersion":"example.dev/v1","kind":"Workflow","metadata":{"name":"p","namespace":"a"},"spec":{"suspend":false,"steps":3}}`)
	for _, tc := range []struct {
		name, live string
		want       []string
	}{
		{"suspended in the member", `{"apiVersion":"example.dev/v1","kind":"Workflow","metadata":{"name":"p","namespace":"a","generation":2},"spec":{"suspend":true,"steps":3}}`, nil},
		{"suspended and steps changed", `{"apiVersion":"example.dev/v1","kind":"Workflow","metadata":{"name":"p","namespace":"a","generation":3},"spec":{"suspend":true,"steps":4}}`, []string{"/spec/steps"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := mustObject(t, tc.live)
			for range 2 { // the second time from the remembered verdict
				fields, err := e.checkDrift(key, "east", gvr, w, desired, live)
				if err != nil {
					t.Fatal(err)
				}
				if got := fieldPaths(fields); len(got) != len(tc.want) || (len(got) > 0 && !cmp.Equal(got, tc.want)) {
					t.Errorf("drift %v, want %v", got, tc.want)
				}
			}
		})
	}
	if got, _, _ := unstructured.NestedFieldNoCopy(desired.Object, "spec", "suspend"); got != false {
		t.Errorf("checkDrift changed the rendered object: spec.suspend is %v", got)
	}
}

// Whether a member object is Flotilla's is decided by the label, or by the Work's record of
// what it applied together with Flotilla's field manager: a label removed by hand does not
// make the object foreign.
func TestOurs(t *testing.T) {
	obj := mustObject(t, rendered)
	applied := []metav1.ManagedFieldsEntry{{Manager: "flotilla", Operation: metav1.ManagedFieldsOperationApply}}
	recorded := []workv1alpha1.AppliedObject{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", Health: workv1alpha1.HealthHealthy}}
	for _, tc := range []struct {
		name     string
		labelled bool
		managers []metav1.ManagedFieldsEntry
		recorded []workv1alpha1.AppliedObject
		want     bool
	}{
		{"labelled", true, nil, nil, true},
		{"label removed, recorded and applied by flotilla", false, applied, recorded, true},
		{"label removed, recorded, flotilla's fields gone (handed back)", false, []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}, recorded, false},
		{"never applied by this Work", false, applied, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := obj.DeepCopy()
			if !tc.labelled {
				labels := live.GetLabels()
				delete(labels, workv1alpha1.ManagedByLabel)
				live.SetLabels(labels)
			}
			live.SetManagedFields(tc.managers)
			w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-es-east", Name: "web", UID: "u"}, Status: workv1alpha1.WorkStatus{Objects: tc.recorded}}
			e := &Executor{}
			if got := e.ours(live, w, types.NamespacedName{Namespace: w.Namespace, Name: w.Name}, obj); got != tc.want {
				t.Errorf("ours = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDescribeDrift(t *testing.T) {
	got := DescribeDrift([]workv1alpha1.DriftedObject{{Kind: "Deployment", Namespace: "shop", Name: "web", Fields: []string{"/spec/replicas", "/metadata/labels/app"}}})
	want := "Deployment shop/web (/spec/replicas, /metadata/labels/app)"
	if got != want {
		t.Errorf("DescribeDrift = %q, want %q", got, want)
	}
	if _, err := json.Marshal(got); err != nil {
		t.Fatal(err)
	}
}

// Putting drift back applies the rendered object with the ignored fields as the member has
// them: by container name, by index, with a wildcard, and a field the member dropped stays
// dropped.
func TestKeepLiveLeavesIgnoredFieldsToTheMember(t *testing.T) {
	edited := func(m map[string]any) {
		container(m, 0)["image"] = "other:2"
		container(m, 0)["env"] = []any{map[string]any{"name": "LEVEL", "value": "debug"}}
		m["spec"].(map[string]any)["replicas"] = int64(7)
		delete(m["metadata"].(map[string]any)["labels"].(map[string]any), "app")
	}
	for _, tc := range []struct {
		pointer string
		check   func(obj map[string]any) string
	}{
		{"/spec/template/spec/containers/web/image", func(obj map[string]any) string { return fmt.Sprint(container(obj, 0)["image"]) }},
		{"/spec/template/spec/containers/0/image", func(obj map[string]any) string { return fmt.Sprint(container(obj, 0)["image"]) }},
		{"/spec/template/spec/containers/*/env", func(obj map[string]any) string { return fmt.Sprint(container(obj, 0)["env"]) }},
		{"/metadata/labels/app", func(obj map[string]any) string {
			_, has := obj["metadata"].(map[string]any)["labels"].(map[string]any)["app"]
			return fmt.Sprint(has)
		}},
	} {
		t.Run(tc.pointer, func(t *testing.T) {
			live := member(t, edited)
			obj := mustObject(t, rendered)
			keepLive(obj.Object, live.Object, tc.pointer)
			if got, want := tc.check(obj.Object), tc.check(live.Object); got != want {
				t.Errorf("after keepLive %s: %s, want the member's %s", tc.pointer, got, want)
			}
			if r := obj.Object["spec"].(map[string]any)["replicas"]; fmt.Sprint(r) == "7" {
				t.Errorf("replicas %v: a field not ignored must keep its rendered value", r)
			}
		})
	}
}
