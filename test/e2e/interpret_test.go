package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// installCRD creates a namespaced CRD with a status subresource in the control plane and every
// member, and removes it when the test ends.
func installCRD(t *testing.T, g gomega.Gomega, group, kind, plural string) {
	t.Helper()
	installCRDOnly(t, g, group, kind, plural)
	grantTemplateKind(t, g, group, plural)
}

// grantTemplateKind gives the controller-manager the rights on a template kind, as a platform
// does for a CRD it propagates (docs/install.md: What the controller-manager may do).
func grantTemplateKind(t *testing.T, g gomega.Gomega, group, plural string) {
	t.Helper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "flotilla:templates:" + plural + "." + group, Labels: map[string]string{"flotilla.dev/aggregate-to-controller-manager": "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{group}, Resources: []string{plural}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{group}, Resources: []string{plural + "/status"}, Verbs: []string{"get", "update", "patch"}},
		},
	}
	g.Expect(cp.Create(context.Background(), role)).To(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), role) })
}

func installCRDOnly(t *testing.T, g gomega.Gomega, group, kind, plural string) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	clients := []client.Client{cp}
	for _, name := range fleet.Fleet().Names() {
		clients = append(clients, memberClient(t, name))
	}
	for _, c := range clients {
		g.Expect(c.Create(context.Background(), crd.DeepCopy())).To(gomega.Succeed())
		t.Cleanup(func() { _ = c.Delete(context.Background(), crd.DeepCopy()) })
	}
}

// fakeCloneSetController plays OpenKruise's controller in a member: it reports every CloneSet
// of the namespace as fully rolled out at its current generation.
func fakeCloneSetController(t *testing.T, cluster, ns string) {
	c := memberClient(t, cluster)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps.kruise.io", Version: "v1alpha1", Kind: "CloneSetList"})
			if c.List(ctx, list, client.InNamespace(ns)) == nil {
				for i := range list.Items {
					cs := &list.Items[i]
					replicas, _, _ := unstructured.NestedInt64(cs.Object, "spec", "replicas")
					want := map[string]any{"replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
						"updatedReplicas": replicas, "updatedReadyReplicas": replicas, "observedGeneration": cs.GetGeneration()}
					if st, _, _ := unstructured.NestedMap(cs.Object, "status"); st["observedGeneration"] != want["observedGeneration"] || st["replicas"] != want["replicas"] {
						cs.Object["status"] = want
						_ = c.Status().Update(ctx, cs)
					}
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
}

func cloneSetReplicas(t *testing.T, cluster, ns, name string) int64 {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps.kruise.io", Version: "v1alpha1", Kind: "CloneSet"})
	if err := memberClient(t, cluster).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		return -1
	}
	n, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	return n
}

func customizationReady(name string) func() metav1.ConditionStatus {
	return func() metav1.ConditionStatus {
		ric := &configv1alpha1.ResourceInterpreterCustomization{}
		if err := cp.Get(context.Background(), client.ObjectKey{Name: name}, ric); err != nil || ric.Status.ObservedGeneration != ric.Generation {
			return ""
		}
		if c := meta.FindStatusCondition(ric.Status.Conditions, configv1alpha1.ConditionReady); c != nil {
			return c.Status
		}
		return ""
	}
}

// A CloneSet-shaped CRD, taught by the bundled customization installed with one command, is
// divided 6/4, its status summed on the template and its health reported.
func TestCloneSetDividedByBundledCustomization(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	installCRDOnly(t, g, "apps.kruise.io", "CloneSet", "clonesets")
	out, err := flotilla("customizations", "install", "kruise-cloneset")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	t.Cleanup(func() {
		_ = cp.Delete(context.Background(), &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "kruise-cloneset"}})
	})
	g.Eventually(customizationReady("kruise-cloneset")).Should(gomega.Equal(metav1.ConditionTrue))

	ns := "kruise"
	ensureNamespace(t, cp, ns)
	for _, m := range []string{"east", "west"} {
		fakeCloneSetController(t, m, ns)
	}
	weight := func(c string, w int64) policyv1alpha1.StaticClusterWeight {
		return policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{c}}, Weight: w}
	}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "clonesets", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps.kruise.io/v1alpha1", Kind: "CloneSet"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{
					Type: policyv1alpha1.ReplicaSchedulingDivided, DivisionPreference: policyv1alpha1.DivisionWeighted,
					WeightPreference: &policyv1alpha1.WeightPreference{StaticWeightList: []policyv1alpha1.StaticClusterWeight{weight("east", 3), weight("west", 2)}},
				},
			},
		},
	}
	createAll(t, g, policy)
	// The manager holds no rights on a CRD until the platform gives them: the policy says so.
	g.Eventually(func() string {
		p := &policyv1alpha1.PropagationPolicy{}
		if err := cp.Get(ctx, client.ObjectKeyFromObject(policy), p); err != nil {
			return err.Error()
		}
		if c := meta.FindStatusCondition(p.Status.Conditions, "Ready"); c != nil && c.Status == metav1.ConditionFalse {
			return c.Message
		}
		return ""
	}).Should(gomega.ContainSubstring("the controller-manager may not list or watch clonesets.apps.kruise.io: give it get, list and watch on clonesets.apps.kruise.io"))
	grantTemplateKind(t, g, "apps.kruise.io", "clonesets")
	cs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec": map[string]any{"replicas": int64(10),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx:1.27"}}}}},
	}}
	g.Eventually(func() error { return cp.Create(ctx, cs.DeepCopy()) }).Should(gomega.Succeed())

	g.Eventually(func() []int64 {
		return []int64{cloneSetReplicas(t, "east", ns, "web"), cloneSetReplicas(t, "west", ns, "web")}
	}).
		Should(gomega.Equal([]int64{6, 4}))
	g.Expect(cloneSetReplicas(t, "europe", ns, "web")).To(gomega.Equal(int64(-1)))
	g.Eventually(func() map[string]any {
		got := cs.DeepCopy()
		if err := cp.Get(ctx, client.ObjectKeyFromObject(cs), got); err != nil {
			return nil
		}
		st, _, _ := unstructured.NestedMap(got.Object, "status")
		return map[string]any{"replicas": st["replicas"], "availableReplicas": st["availableReplicas"], "observed": st["observedGeneration"] == got.GetGeneration()}
	}).Should(gomega.Equal(map[string]any{"replicas": int64(10), "availableReplicas": int64(10), "observed": true}))
	g.Eventually(func() workv1alpha1.Health {
		return bindingNow(ctx, ns, "web-cloneset").Status.Health
	}).Should(gomega.Equal(workv1alpha1.HealthHealthy))
}

// workflowCustomization keeps a member's spec.suspend, the way Argo's controller and users
// suspend a Workflow in one cluster.
const workflowRetain = `
function Retain(desiredObj, observedObj)
  if observedObj.spec ~= nil and observedObj.spec.suspend ~= nil then
    desiredObj.spec.suspend = observedObj.spec.suspend
  end
  return desiredObj
end`

// A member-side spec.suspend: true on a Workflow-shaped object survives re-syncs of the
// template (Retain), while the template's other changes still arrive.
func TestRetainKeepsMemberSuspend(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	installCRD(t, g, "example.flotilla.dev", "Pipeline", "pipelines")
	ric := &configv1alpha1.ResourceInterpreterCustomization{
		ObjectMeta: metav1.ObjectMeta{Name: "pipeline-retain"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target:         configv1alpha1.CustomizationTarget{APIVersion: "example.flotilla.dev/v1alpha1", Kind: "Pipeline"},
			Customizations: configv1alpha1.CustomizationRules{Retention: &configv1alpha1.LuaScript{LuaScript: workflowRetain}},
		},
	}
	createAll(t, g, ric)
	g.Eventually(customizationReady(ric.Name)).Should(gomega.Equal(metav1.ConditionTrue))
	ns := "pipelines"
	ensureNamespace(t, cp, ns)
	createAll(t, g, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "pipelines", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "example.flotilla.dev/v1alpha1", Kind: "Pipeline"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
		},
	})
	gvk := schema.GroupVersionKind{Group: "example.flotilla.dev", Version: "v1alpha1", Kind: "Pipeline"}
	wf := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.flotilla.dev/v1alpha1", "kind": "Pipeline",
		"metadata": map[string]any{"name": "nightly", "namespace": ns},
		"spec":     map[string]any{"entrypoint": "build", "suspend": false},
	}}
	g.Eventually(func() error { return cp.Create(ctx, wf.DeepCopy()) }).Should(gomega.Succeed())
	east := memberClient(t, "east")
	memberSpec := func() map[string]any {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(gvk)
		if err := east.Get(ctx, client.ObjectKeyFromObject(wf), got); err != nil {
			return nil
		}
		spec, _, _ := unstructured.NestedMap(got.Object, "spec")
		return spec
	}
	g.Eventually(memberSpec).Should(gomega.HaveKeyWithValue("entrypoint", "build"))

	// Someone suspends it in the member, as `argo suspend` would.
	suspend := []byte(`{"spec":{"suspend":true}}`)
	g.Expect(east.Patch(ctx, wf.DeepCopy(), client.RawPatch("application/merge-patch+json", suspend))).To(gomega.Succeed())
	// A template change re-syncs the member object.
	g.Eventually(func() error {
		cur := wf.DeepCopy()
		if err := cp.Get(ctx, client.ObjectKeyFromObject(wf), cur); err != nil {
			return err
		}
		_ = unstructured.SetNestedField(cur.Object, "test", "spec", "entrypoint")
		return cp.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(memberSpec).Should(gomega.HaveKeyWithValue("entrypoint", "test"))
	g.Consistently(memberSpec).WithTimeout(3 * time.Second).Should(gomega.HaveKeyWithValue("suspend", true))
}

// Scripts that loop forever, call os.execute, allocate without bound or return the wrong type
// fail only their own call: the binding says which customization, operation and why, an event
// is emitted, and the controller-manager keeps propagating everything else. A script that does
// not compile is Stalled with the operation and the Lua line.
func TestBadScriptsFailOnlyTheirCall(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	installCRD(t, g, "example.flotilla.dev", "Gizmo", "gizmos")
	ns := "gizmos"
	ensureNamespace(t, cp, ns)

	bad := map[string]string{
		"loop":      "function InterpretHealth(obj)\n  while true do end\nend",
		"os":        "function InterpretHealth(obj)\n  os.execute('touch /tmp/flotilla-pwned')\n  return true\nend",
		"alloc":     "function InterpretHealth(obj)\n  return string.rep('x', 10000000000) ~= ''\nend",
		"wrongtype": "function InterpretHealth(obj)\n  return 42\nend",
	}
	want := map[string]string{
		"loop":      "exceeded the time limit",
		"os":        "os is not available in customizations",
		"alloc":     "over the limit",
		"wrongtype": "InterpretHealth must return true, false",
	}
	// One customization at a time targets the kind: each in turn fails its own call.
	ric := &configv1alpha1.ResourceInterpreterCustomization{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmo"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target:         configv1alpha1.CustomizationTarget{APIVersion: "example.flotilla.dev/v1alpha1", Kind: "Gizmo"},
			Customizations: configv1alpha1.CustomizationRules{HealthInterpretation: &configv1alpha1.LuaScript{LuaScript: bad["loop"]}},
		},
	}
	createAll(t, g, ric)
	g.Eventually(customizationReady(ric.Name)).Should(gomega.Equal(metav1.ConditionTrue))
	createAll(t, g, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "example.flotilla.dev/v1alpha1", Kind: "Gizmo"}, {APIVersion: "apps/v1", Kind: "Deployment"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
		},
	})
	gizmo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.flotilla.dev/v1alpha1", "kind": "Gizmo",
		"metadata": map[string]any{"name": "g1", "namespace": ns}, "spec": map[string]any{"size": int64(1)},
	}}
	g.Eventually(func() error { return cp.Create(ctx, gizmo.DeepCopy()) }).Should(gomega.Succeed())
	interpreted := func() string {
		b := bindingOf(ctx, ns, "g1-gizmo")
		if b == nil {
			return ""
		}
		if c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.ConditionInterpreted); c != nil {
			return string(c.Status) + ": " + c.Message
		}
		return ""
	}
	for i, name := range []string{"loop", "os", "alloc", "wrongtype"} {
		if i > 0 {
			g.Eventually(func() error {
				cur := &configv1alpha1.ResourceInterpreterCustomization{}
				if err := cp.Get(ctx, client.ObjectKeyFromObject(ric), cur); err != nil {
					return err
				}
				cur.Spec.Customizations.HealthInterpretation.LuaScript = bad[name]
				return cp.Update(ctx, cur)
			}).Should(gomega.Succeed())
			g.Eventually(customizationReady(ric.Name)).Should(gomega.Equal(metav1.ConditionTrue))
		}
		g.Eventually(interpreted).Should(gomega.And(
			gomega.HavePrefix("False: "), gomega.ContainSubstring("interpreter customization gizmo, operation InterpretHealth"),
			gomega.ContainSubstring(want[name])), name)
		// Meanwhile a Deployment in the same namespace propagates as ever.
		d := webDeployment(ns, 1)
		d.Name = "after-" + name
		createAll(t, g, d)
		g.Eventually(func() int32 { return memberReplicas(t, "east", ns, d.Name) }).Should(gomega.Equal(int32(1)), name)
	}
	_, err := os.Stat(filepath.Join(os.TempDir(), "flotilla-pwned"))
	g.Expect(os.IsNotExist(err)).To(gomega.BeTrue(), "os.execute must not run")
	g.Eventually(func() bool {
		events := &corev1.EventList{}
		_ = cp.List(ctx, events, client.InNamespace(ns))
		for _, e := range events.Items {
			if e.Reason == "InterpreterError" && e.InvolvedObject.Name == "g1-gizmo" {
				return true
			}
		}
		return false
	}).Should(gomega.BeTrue())

	// A script that does not compile: Stalled names the operation and the line; the previous
	// version stays in force.
	g.Eventually(func() error {
		cur := &configv1alpha1.ResourceInterpreterCustomization{}
		if err := cp.Get(ctx, client.ObjectKeyFromObject(ric), cur); err != nil {
			return err
		}
		cur.Spec.Customizations.HealthInterpretation.LuaScript = "function InterpretHealth(obj)\n  return true\n\nend end"
		return cp.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() string {
		cur := &configv1alpha1.ResourceInterpreterCustomization{}
		if err := cp.Get(ctx, client.ObjectKeyFromObject(ric), cur); err != nil {
			return ""
		}
		if c := meta.FindStatusCondition(cur.Status.Conditions, configv1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
			return c.Message
		}
		return ""
	}).Should(gomega.And(gomega.ContainSubstring("InterpretHealth"), gomega.ContainSubstring("spec.customizations.healthInterpretation.luaScript"),
		gomega.ContainSubstring("Lua line 4")))
	g.Consistently(interpreted).WithTimeout(2 * time.Second).Should(gomega.ContainSubstring("InterpretHealth must return true, false"))

	// A restarted controller-manager puts the same previous version back in force from the
	// customization's status: a Gizmo changed after the restart is interpreted by it.
	g.Expect(fleet.StopManager()).To(gomega.Succeed())
	g.Expect(fleet.StartManager(ctx)).To(gomega.Succeed())
	g.Eventually(func() error {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(gizmo.GroupVersionKind())
		if err := cp.Get(ctx, client.ObjectKeyFromObject(gizmo), cur); err != nil {
			return err
		}
		cur.Object["spec"] = map[string]any{"size": int64(2)}
		return cp.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() any {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(gizmo.GroupVersionKind())
		if err := memberClient(t, "east").Get(ctx, client.ObjectKeyFromObject(gizmo), got); err != nil {
			return nil
		}
		return got.Object["spec"]
	}).Should(gomega.Equal(map[string]any{"size": int64(2)}))
	// The binding's condition at its new generation is the restarted controller's reading.
	g.Eventually(func() string {
		b := bindingNow(ctx, ns, "g1-gizmo")
		if c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.ConditionInterpreted); c != nil && c.ObservedGeneration == b.Generation {
			return c.Message
		}
		return ""
	}).Should(gomega.ContainSubstring("InterpretHealth must return true, false"),
		"after a restart the previous version, not a failure to compile, interprets the Gizmo")

	// Fixing the script clears the binding's error.
	g.Eventually(func() error {
		cur := &configv1alpha1.ResourceInterpreterCustomization{}
		if err := cp.Get(ctx, client.ObjectKeyFromObject(ric), cur); err != nil {
			return err
		}
		cur.Spec.Customizations.HealthInterpretation.LuaScript = "function InterpretHealth(obj)\n  return 'Healthy'\nend"
		return cp.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(interpreted).Should(gomega.HavePrefix("True"))
	g.Eventually(func() workv1alpha1.Health { return bindingNow(ctx, ns, "g1-gizmo").Status.Health }).Should(gomega.Equal(workv1alpha1.HealthHealthy))
}
