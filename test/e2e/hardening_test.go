package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

func policyReady(ns, name string) func() string {
	return func() string {
		p := &policyv1alpha1.PropagationPolicy{}
		if err := cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return ""
		}
		if c := meta.FindStatusCondition(p.Status.Conditions, "Ready"); c != nil {
			return string(c.Status) + ": " + c.Message
		}
		return ""
	}
}

func eventSays(ns, involved, reason string, contains ...string) func() bool {
	return func() bool {
		events := &corev1.EventList{}
		_ = cp.List(context.Background(), events, client.InNamespace(ns))
	next:
		for _, e := range events.Items {
			if e.Reason != reason || e.InvolvedObject.Name != involved {
				continue
			}
			for _, c := range contains {
				if !strings.Contains(e.Message, c) {
					continue next
				}
			}
			return true
		}
		return false
	}
}

// Given policies whose selectors can never select anything as written (a kind the control
// plane does not serve, another namespace from a namespaced policy), when they are applied,
// then the policy itself says so, naming the field and the fix.
func TestPolicySelectorProblemsAreReported(t *testing.T) {
	g := newG(t)
	ns := "selector-problems"
	ensureNamespace(t, cp, ns)
	unserved := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "unserved", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{
			{APIVersion: "apps/v1", Kind: "Deployment"}, {APIVersion: "example.flotilla.dev/v1", Kind: "Sprocket"},
		}},
	}
	elsewhere := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{
			{APIVersion: "v1", Kind: "ConfigMap", Namespace: "kube-system"},
		}},
	}
	fine := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "fine", Namespace: ns},
		Spec:       policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Secret", Name: "none"}}},
	}
	createAll(t, g, unserved, elsewhere, fine)

	g.Eventually(policyReady(ns, "unserved")).Should(gomega.And(gomega.HavePrefix("False: "),
		gomega.ContainSubstring("spec.resourceSelectors[1]: the control plane does not serve kind Sprocket of example.flotilla.dev/v1")))
	g.Eventually(policyReady(ns, "elsewhere")).Should(gomega.And(gomega.HavePrefix("False: "),
		gomega.ContainSubstring(`spec.resourceSelectors[0].namespace: "kube-system" is not this policy's namespace`)))
	g.Eventually(policyReady(ns, "fine")).Should(gomega.HavePrefix("True: "))
	g.Eventually(eventSays(ns, "elsewhere", "InvalidSelector")).Should(gomega.BeTrue())
	// and a selector naming another namespace selects nothing, not this whole namespace.
	createAll(t, g, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: ns}})
	g.Consistently(func() string {
		b := &workv1alpha1.ResourceBinding{}
		_ = cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cm-configmap"}, b)
		return b.Spec.PolicyRef.Name
	}).WithTimeout(3*time.Second).ShouldNot(gomega.Equal("elsewhere"), "the invalid selector placed the namespace's ConfigMap")
}

// Given two policies of equal priority and equally specific selectors for one Deployment, when
// it is placed, then a warning event on the Deployment says which one won and how to choose.
func TestPolicyTieIsReported(t *testing.T) {
	g := newG(t)
	ns := "policy-tie"
	ensureNamespace(t, cp, ns)
	mk := func(name, cluster string) *policyv1alpha1.PropagationPolicy {
		return &policyv1alpha1.PropagationPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
				Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{cluster}}},
			},
		}
	}
	createAll(t, g, mk("alpha", "east"), mk("beta", "west"), webDeployment(ns, 1))
	g.Eventually(eventSays(ns, "web", "PolicyConflict", "policy-tie/alpha and policy-tie/beta", "alpha wins by name order", "spec.priority")).Should(gomega.BeTrue())
	g.Eventually(func() int32 { return memberReplicas(t, "east", ns, "web") }).Should(gomega.Equal(int32(1)))
}

// Given a Deployment whose dependencies make its Work larger than etcd takes, when it is
// placed, then its binding says so naming the template, instead of a write failing forever.
func TestOversizedWorkIsReportedOnTheBinding(t *testing.T) {
	g := newG(t)
	ns := "oversized"
	ensureNamespace(t, cp, ns)
	web := webDeployment(ns, 1)
	var objs []client.Object
	for _, name := range []string{"big-a", "big-b", "big-c"} {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Data: map[string]string{"blob": strings.Repeat("x", 700<<10)}})
		web.Spec.Template.Spec.Containers[0].EnvFrom = append(web.Spec.Template.Spec.Containers[0].EnvFrom,
			corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}})
	}
	objs = append(objs, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
			PropagateDeps:     true,
		},
	}, web)
	createAll(t, g, objs...)
	g.Eventually(func() string {
		b := bindingOf(context.Background(), ns, "web-deployment")
		if b == nil {
			return ""
		}
		if c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.ConditionApplied); c != nil {
			return c.Message
		}
		return ""
	}).Should(gomega.And(gomega.ContainSubstring("Deployment oversized/web"), gomega.ContainSubstring("for cluster east, over the 1280 KiB a Work may hold")))
}

// Given a customization whose Retain fails, when a member object is re-applied, then the
// binding's Interpreted condition is False naming the Retain operation (not "every interpreter
// call succeeded"), and nothing is applied without the fields Retain would keep.
func TestFailingRetainShowsOnTheBinding(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	installCRD(t, g, "example.flotilla.dev", "Sprocket", "sprockets")
	ns := "retain-fails"
	ensureNamespace(t, cp, ns)
	ric := &configv1alpha1.ResourceInterpreterCustomization{
		ObjectMeta: metav1.ObjectMeta{Name: "sprocket"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target: configv1alpha1.CustomizationTarget{APIVersion: "example.flotilla.dev/v1alpha1", Kind: "Sprocket"},
			Customizations: configv1alpha1.CustomizationRules{Retention: &configv1alpha1.LuaScript{
				LuaScript: "function Retain(desired, observed)\n  if desired.spec.size > 1 then error('cannot keep the teeth') end\n  return desired\nend"}},
		},
	}
	createAll(t, g, ric, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "example.flotilla.dev/v1alpha1", Kind: "Sprocket"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
		},
	})
	g.Eventually(customizationReady(ric.Name)).Should(gomega.Equal(metav1.ConditionTrue))
	sprocket := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.flotilla.dev/v1alpha1", "kind": "Sprocket",
		"metadata": map[string]any{"name": "s1", "namespace": ns}, "spec": map[string]any{"size": int64(1)},
	}}
	g.Eventually(func() error { return cp.Create(ctx, sprocket.DeepCopy()) }).Should(gomega.Succeed())
	memberSize := func() int64 {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(sprocket.GroupVersionKind())
		if err := memberClient(t, "east").Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, obj); err != nil {
			return -1
		}
		n, _, _ := unstructured.NestedInt64(obj.Object, "spec", "size")
		return n
	}
	g.Eventually(memberSize).Should(gomega.Equal(int64(1)))

	g.Eventually(func() error {
		cur := sprocket.DeepCopy()
		if err := cp.Get(ctx, client.ObjectKeyFromObject(sprocket), cur); err != nil {
			return err
		}
		cur.Object["spec"] = map[string]any{"size": int64(2)}
		return cp.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() string {
		b := bindingOf(ctx, ns, "s1-sprocket")
		if b == nil {
			return ""
		}
		if c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.ConditionInterpreted); c != nil {
			return string(c.Status) + ": " + c.Message
		}
		return ""
	}).Should(gomega.And(gomega.HavePrefix("False: "), gomega.ContainSubstring("operation Retain"), gomega.ContainSubstring("cannot keep the teeth")))
	g.Consistently(memberSize).WithTimeout(2e9).Should(gomega.Equal(int64(1)), "nothing is applied when Retain fails")
}
