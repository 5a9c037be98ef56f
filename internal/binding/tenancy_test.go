package binding

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/eventstest"
	"github.com/flotilla-dev/flotilla/internal/names"
)

func resourceBinding(ns string, res workv1alpha1.ObjectReference, policy workv1alpha1.PolicyReference, clusters ...string) *workv1alpha1.ResourceBinding {
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b", Finalizers: []string{Finalizer}},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: res, PolicyRef: policy}}
	for _, c := range clusters {
		b.Spec.Clusters = append(b.Spec.Clusters, workv1alpha1.TargetCluster{Name: c, Replicas: 1})
	}
	return b
}

var (
	deploymentRef = workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team-a", Name: "web"}
	ppTeamA       = workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "team-a", Name: "pp"}
	cppPlatform   = workv1alpha1.PolicyReference{Kind: "ClusterPropagationPolicy", Name: "platform"}
)

// A binding's spec alone shows a template or policy it may not use: refused naming the field.
func TestForeignReference(t *testing.T) {
	for _, tc := range []struct {
		name      string
		b         workv1alpha1.Binding
		wantField string // empty: allowed
	}{
		{"own template and policy", resourceBinding("team-a", deploymentRef, ppTeamA), ""},
		{"own template, cluster policy", resourceBinding("team-a", deploymentRef, cppPlatform), ""},
		{"template of another namespace", resourceBinding("team-a", workv1alpha1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: "team-b", Name: "db"}, ppTeamA), "spec.resource.namespace"},
		{"template without namespace", resourceBinding("team-a", workv1alpha1.ObjectReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "admin"}, ppTeamA), "spec.resource"},
		{"policy of another namespace", resourceBinding("team-a", deploymentRef, workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "team-b", Name: "pp"}), "spec.policyRef"},
		{"cluster binding by a cluster policy", &workv1alpha1.ClusterResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "cr"},
			Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "x"}, PolicyRef: cppPlatform}}, ""},
		{"cluster binding by a namespaced policy", &workv1alpha1.ClusterResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "cr"},
			Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "x"}, PolicyRef: ppTeamA}}, "spec.policyRef"},
		{"cluster binding of a namespaced template", &workv1alpha1.ClusterResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "cr"},
			Spec: workv1alpha1.ResourceBindingSpec{Resource: deploymentRef, PolicyRef: cppPlatform}}, "spec.resource.namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := foreignReference(tc.b)
			if tc.wantField == "" {
				if msg != "" {
					t.Fatalf("foreignReference = %q, want none", msg)
				}
				return
			}
			if !strings.Contains(msg, tc.wantField) || !strings.Contains(msg, "nothing is written") {
				t.Fatalf("foreignReference = %q, want it to name %s and say nothing is written", msg, tc.wantField)
			}
		})
	}
}

// tenancyHarness runs Reconcile against a fake control plane that knows the scopes of the
// kinds used here.
type tenancyHarness struct {
	client   client.Client
	ctrl     *Controller
	recorder *events.FakeRecorder
}

func newTenancyHarness(t *testing.T, objs ...client.Object) *tenancyHarness {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1alpha1.AddToScheme, policyv1alpha1.AddToScheme, workv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	for gvk, scope := range map[schema.GroupVersionKind]meta.RESTScope{
		appsv1.SchemeGroupVersion.WithKind("Deployment"):      meta.RESTScopeNamespace,
		corev1.SchemeGroupVersion.WithKind("Secret"):          meta.RESTScopeNamespace,
		corev1.SchemeGroupVersion.WithKind("Namespace"):       meta.RESTScopeRoot,
		rbacv1.SchemeGroupVersion.WithKind("ClusterRole"):     meta.RESTScopeRoot,
		workv1alpha1.GroupVersion.WithKind("Work"):            meta.RESTScopeNamespace,
		clusterv1alpha1.GroupVersion.WithKind("Cluster"):      meta.RESTScopeRoot,
		workv1alpha1.GroupVersion.WithKind("ResourceBinding"): meta.RESTScopeNamespace,
	} {
		mapper.Add(gvk, scope)
	}
	h := &tenancyHarness{recorder: events.NewFakeRecorder(20)}
	h.client = fake.NewClientBuilder().WithScheme(scheme).WithIndex(&workv1alpha1.ResourceBinding{}, dependenciesIndex, recordedDependencies).WithIndex(&workv1alpha1.ClusterResourceBinding{}, dependenciesIndex, recordedDependencies).WithRESTMapper(mapper).WithObjects(objs...).
		WithStatusSubresource(&workv1alpha1.ResourceBinding{}, &workv1alpha1.ClusterResourceBinding{}).Build()
	h.ctrl = &Controller{Client: h.client, Reader: h.client, Recorder: h.recorder, PodSecurityExemptNamespaces: []string{"kube-system"}}
	return h
}

func (h *tenancyHarness) reconcile(t *testing.T, b client.Object) (error, workv1alpha1.Binding, []workv1alpha1.Work) {
	t.Helper()
	_, err := h.ctrl.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)})
	got := workv1alpha1.NewBinding(b.GetNamespace(), b.GetName())
	if gerr := h.client.Get(context.Background(), client.ObjectKeyFromObject(b), got); gerr != nil {
		t.Fatal(gerr)
	}
	works := &workv1alpha1.WorkList{}
	if lerr := h.client.List(context.Background(), works); lerr != nil {
		t.Fatal(lerr)
	}
	return err, got, works.Items
}

func deployment(ns, name string, privileged bool) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}
	if privileged {
		d.Spec.Template.Spec.HostPID = true
		d.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: new(true)}
	}
	return d
}

func propagationPolicy(ns, name string) *policyv1alpha1.PropagationPolicy {
	return &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}}}}
}

// A forged binding is reported on itself (Stalled, Applied=False, a Refused event) and no Work
// is written for it.
func TestReconcileRefusesForgedBindings(t *testing.T) {
	teamBSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "db"}}
	clusterRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "admin"}}
	east := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "east"}}
	for _, tc := range []struct {
		name      string
		b         *workv1alpha1.ResourceBinding
		wantField string
	}{
		{"another namespace's Secret", resourceBinding("team-a", workv1alpha1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: "team-b", Name: "db"}, ppTeamA, "east"), "spec.resource.namespace"},
		{"a ClusterRole named in the binding's namespace", resourceBinding("team-a", workv1alpha1.ObjectReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Namespace: "team-a", Name: "admin"}, ppTeamA, "east"), "cluster-scoped kind"},
		{"another namespace's policy", resourceBinding("team-a", deploymentRef, workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "team-b", Name: "pp"}, "east"), "spec.policyRef"},
		{"a cluster policy that does not select the template", resourceBinding("team-a", deploymentRef, cppPlatform, "east"), "does not select"},
		{"a cluster policy that does not exist", resourceBinding("team-a", deploymentRef, workv1alpha1.PolicyReference{Kind: "ClusterPropagationPolicy", Name: "gone"}, "east"), "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpp := &policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "platform"},
				Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap"}}}}
			h := newTenancyHarness(t, tc.b, teamBSecret, clusterRole, east, cpp, deployment("team-a", "web", false), propagationPolicy("team-b", "pp"))
			err, got, works := h.reconcile(t, tc.b)
			if !errors.Is(err, reconcile.TerminalError(nil)) {
				t.Errorf("Reconcile error = %v, want a terminal error", err)
			}
			if len(works) != 0 {
				t.Errorf("%d Works written, want none", len(works))
			}
			stalled := meta.FindStatusCondition(got.BindingStatus().Conditions, conditionStalled)
			if stalled == nil || stalled.Status != metav1.ConditionTrue || !strings.Contains(stalled.Message, tc.wantField) {
				t.Errorf("Stalled = %+v, want True naming %s", stalled, tc.wantField)
			}
			if applied := meta.FindStatusCondition(got.BindingStatus().Conditions, workv1alpha1.ConditionApplied); applied == nil || applied.Status != metav1.ConditionFalse {
				t.Errorf("Applied = %+v, want False", applied)
			}
			if evs := eventstest.Drain(h.recorder); len(evs) != 1 || !strings.Contains(evs[0], "Warning Refused") {
				t.Errorf("events = %q, want one Warning Refused", evs)
			}
		})
	}
}

// A namespaced template's workload is checked against the Pod Security level before its Work
// is written, whichever policy places it (a tenant can label a template so that a broad
// ClusterPropagationPolicy selects it), and its Work carries the level for the member
// namespace; templates in the platform's exempt namespaces are not checked.
func TestReconcileChecksPodSecurityOfNamespacedPlacements(t *testing.T) {
	east := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "east"}}
	cpp := &policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "platform"},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}}}}
	for _, tc := range []struct {
		name           string
		privileged     bool
		policy         workv1alpha1.PolicyReference
		wantWork       bool
		wantAnnotation string
	}{
		{"ordinary, namespaced policy", false, ppTeamA, true, "baseline"},
		{"privileged, namespaced policy", true, ppTeamA, false, ""},
		{"privileged, cluster policy", true, cppPlatform, false, ""},
		{"privileged in an exempt namespace, cluster policy", true, cppPlatform, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, ref := "team-a", deploymentRef
			if strings.Contains(tc.name, "exempt") {
				ns, ref.Namespace = "kube-system", "kube-system"
			}
			b := resourceBinding(ns, ref, tc.policy, "east")
			h := newTenancyHarness(t, b, east, cpp, propagationPolicy("team-a", "pp"), deployment(ns, "web", tc.privileged))
			err, got, works := h.reconcile(t, b)
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if !tc.wantWork {
				if len(works) != 0 {
					t.Fatalf("%d Works written, want none", len(works))
				}
				applied := meta.FindStatusCondition(got.BindingStatus().Conditions, workv1alpha1.ConditionApplied)
				for _, want := range []string{"cluster east", "Deployment " + ns + "/web", `level "baseline"`, "hostPID", "privileged"} {
					if applied == nil || !strings.Contains(applied.Message, want) {
						t.Errorf("Applied = %+v, want its message to contain %q", applied, want)
					}
				}
				return
			}
			if len(works) != 1 {
				t.Fatalf("%d Works written, want 1", len(works))
			}
			if a := works[0].Annotations[names.PodSecurityLevelAnnotation]; a != tc.wantAnnotation {
				t.Errorf("Work annotation %s = %q, want %q", names.PodSecurityLevelAnnotation, a, tc.wantAnnotation)
			}
		})
	}
}

// An override that changes the rendered object's identity is refused naming its policy;
// content overrides pass.
func TestOverrideAndCheckRefusesIdentityChanges(t *testing.T) {
	rendered := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetNamespace("team-a")
		u.SetName("settings")
		return u
	}
	for _, tc := range []struct {
		name string
		ovs  []namedOverriders
		want string // empty: allowed
	}{
		{"labels", []namedOverriders{{"OverridePolicy team-a/ok", policyv1alpha1.Overriders{LabelsOverrider: []policyv1alpha1.LabelAnnotationOverrider{{Operator: policyv1alpha1.OverrideAdd, Value: map[string]string{"a": "b"}}}}}}, ""},
		{"namespace", []namedOverriders{
			{"OverridePolicy team-a/ok", policyv1alpha1.Overriders{LabelsOverrider: []policyv1alpha1.LabelAnnotationOverrider{{Operator: policyv1alpha1.OverrideAdd, Value: map[string]string{"a": "b"}}}}},
			{"ClusterOverridePolicy move", policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: "/metadata/namespace", Operator: policyv1alpha1.OverrideReplace, Value: &policyv1alpha1.JSON{Raw: []byte(`"kube-system"`)}}}}},
		}, "ClusterOverridePolicy move for cluster east: overrides changed metadata.namespace"},
		{"kind", []namedOverriders{{"OverridePolicy team-a/escalate", policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: "/kind", Operator: policyv1alpha1.OverrideReplace, Value: &policyv1alpha1.JSON{Raw: []byte(`"ClusterRoleBinding"`)}}}}}},
			"OverridePolicy team-a/escalate for cluster east: overrides changed kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := overrideAndCheck(rendered(), tc.ovs, "east", "baseline")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("overrideAndCheck = %v, want nil", err)
				}
				return
			}
			var re *renderError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("overrideAndCheck = %v, want a render error containing %q", err, tc.want)
			}
		})
	}
}
