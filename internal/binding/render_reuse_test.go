package binding

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// A pass whose inputs are those a Work was last rendered from reuses its manifests; a new
// version of the template, other overrides, another revision or a Work written since render
// again.
func TestAPassRendersAgainOnlyWhenItsInputsChanged(t *testing.T) {
	ctx := context.Background()
	store := workstore.New()
	c := &Controller{Client: store.Client(fake.NewClientBuilder().WithScheme(kube.Scheme).Build()), Works: store}
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-configmap", UID: "b1"},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "web"}}}
	tmpl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": "shop", "name": "web", "uid": "t1", "resourceVersion": "1"}, "data": map[string]any{"color": "blue"}}}
	in := interpret.Builtin(tmpl.GroupVersionKind().GroupKind())
	target := workv1alpha1.TargetCluster{Name: "east"}
	var overriders []namedOverriders
	pass := func() string {
		t.Helper()
		var w *workv1alpha1.Work
		list := &workv1alpha1.WorkList{}
		if err := c.Client.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 0 {
			w = &list.Items[0]
		}
		p := &pass{b: b, bs: &b.Spec, tmpl: tmpl, in: in}
		if _, err := c.ensureWork(ctx, b, tmpl, 0, nil, in, false, target, overriders, nil, w, renderInputs(p, 0, nil, target, overriders, nil)); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.List(ctx, list); err != nil || len(list.Items) != 1 {
			t.Fatalf("Works after the pass: %v, %v", list.Items, err)
		}
		return string(list.Items[0].Spec.Manifests[0].Raw)
	}
	if got := pass(); !strings.Contains(got, `"color":"blue"`) {
		t.Fatalf("first render: %s", got)
	}
	// The same version of the template (its resourceVersion) is not rendered again: the data
	// changed here behind the version's back shows that nothing was.
	unstructured.SetNestedField(tmpl.Object, "green", "data", "color")
	if got := pass(); !strings.Contains(got, `"color":"blue"`) {
		t.Fatalf("same inputs, rendered again: %s", got)
	}
	tmpl.SetResourceVersion("2")
	if got := pass(); !strings.Contains(got, `"color":"green"`) {
		t.Fatalf("a new version of the template, not rendered: %s", got)
	}
	overriders = []namedOverriders{{policy: "OverridePolicy shop/red", Overriders: policyv1alpha1.Overriders{
		Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: "/data/color", Operator: policyv1alpha1.OverrideReplace, Value: &policyv1alpha1.JSON{Raw: []byte(`"red"`)}}}}}}
	if got := pass(); !strings.Contains(got, `"color":"red"`) {
		t.Fatalf("new overrides, not rendered: %s", got)
	}
	// A Work written by someone else since (its generation moved) is rendered again.
	w := &workv1alpha1.Work{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: kube.ExecutionNamespacePrefix + "east", Name: WorkName(b)}, w); err != nil {
		t.Fatal(err)
	}
	w.Spec.Manifests[0].Raw = []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"shop","name":"web"},"data":{"color":"by hand"}}`)
	if err := c.Client.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	if got := pass(); !strings.Contains(got, `"color":"red"`) {
		t.Fatalf("a Work changed since its render, not rendered again: %s", got)
	}
}
