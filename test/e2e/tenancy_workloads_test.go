package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/names"
)

// workloadTenant makes namespace ns and a client for user (group group) who may manage
// Deployments and Flotilla's policies there, read its bindings, and nothing else.
func workloadTenant(t *testing.T, ns, user, group string) client.Client {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, cp, ns)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "workloads", Namespace: ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}},
			{APIGroups: []string{policyv1alpha1.GroupVersion.Group}, Resources: []string{"propagationpolicies", "overridepolicies"}, Verbs: []string{"*"}},
			{APIGroups: []string{workv1alpha1.GroupVersion.Group}, Resources: []string{"resourcebindings"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "workloads", Namespace: ns},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}},
		RoleRef:    rbacv1.RoleRef{Kind: "Role", APIGroup: rbacv1.GroupName, Name: "workloads"},
	}
	for _, o := range []client.Object{role, rb} {
		if err := cp.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return userClient(t, "", user, group)
}

// privilegedDeployment runs a pod that owns its node: host PID and network, SYS_ADMIN and the
// node's root filesystem. (The fleet's apiservers run without --allow-privileged, as
// kube-apiserver does by default, so a privileged: true container is refused by every
// apiserver before Flotilla sees it; these settings are what baseline must stop.)
func privilegedDeployment(ns, name string) *appsv1.Deployment {
	d := webDeployment(ns, 1)
	d.Name = name
	d.Labels = map[string]string{"app": name}
	d.Spec.Selector.MatchLabels = map[string]string{"app": name}
	d.Spec.Template.Labels = map[string]string{"app": name}
	spec := &d.Spec.Template.Spec
	spec.HostPID, spec.HostNetwork = true, true
	spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
	spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	return d
}

func placeOnEast(selector policyv1alpha1.ResourceSelector) policyv1alpha1.PropagationSpec {
	return policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{selector},
		Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
	}
}

// bindingApplied is the Applied condition's message of a ResourceBinding, "" until it has one.
func bindingApplied(ns, name string) string {
	b := &workv1alpha1.ResourceBinding{}
	if err := cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
		return ""
	}
	if c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.ConditionApplied); c != nil {
		return c.Message
	}
	return ""
}

func memberHas(t *testing.T, cluster, ns, name string) bool {
	err := memberClient(t, cluster).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &appsv1.Deployment{})
	return err == nil
}

// Given a tenant who may write OverridePolicies in her namespace, when she writes a JSON patch
// that would turn her object into a ClusterRoleBinding or move it into kube-system, then the
// apiserver refuses it naming the field and saying overrides change content, not identity;
// and so it does for a cluster admin's ClusterOverridePolicy.
func TestOverridesCannotChangeIdentity(t *testing.T) {
	ctx := context.Background()
	alice := workloadTenant(t, "tw-alice", "tw-alice", "tw-alice-devs")
	value := func(v any) *policyv1alpha1.JSON {
		raw, _ := json.Marshal(v)
		return &policyv1alpha1.JSON{Raw: raw}
	}
	spec := func(path string, v any) policyv1alpha1.OverrideSpec {
		return policyv1alpha1.OverrideSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap"}},
			OverrideRules: []policyv1alpha1.OverrideRule{{Overriders: policyv1alpha1.Overriders{
				Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: path, Operator: policyv1alpha1.OverrideReplace, Value: value(v)}},
			}}},
		}
	}
	for _, tc := range []struct {
		name, path string
		value      any
	}{
		{"kind to ClusterRoleBinding", "/kind", "ClusterRoleBinding"},
		{"namespace to kube-system", "/metadata/namespace", "kube-system"},
		{"apiVersion", "/apiVersion", "rbac.authorization.k8s.io/v1"},
		{"name", "/metadata/name", "cluster-admin"},
		{"whole metadata", "/metadata", map[string]string{"name": "x", "namespace": "kube-system"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newG(t)
			// Given alice's OverridePolicy in her namespace,
			op := &policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: "escalate", Namespace: "tw-alice"}, Spec: spec(tc.path, tc.value)}
			// when she creates it, then it is refused naming the field.
			err := alice.Create(ctx, op)
			if err == nil {
				_ = cp.Delete(ctx, op)
			}
			g.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(gomega.And(
				gomega.ContainSubstring("spec.overrideRules[0].overriders.plaintext[0].path"),
				gomega.ContainSubstring("path: "+tc.path+" would change the identity of the object"),
				gomega.ContainSubstring("overrides change content, not identity")))

			// And a cluster admin's ClusterOverridePolicy is refused alike.
			cop := &policyv1alpha1.ClusterOverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: "tw-escalate"}, Spec: spec(tc.path, tc.value)}
			err = cp.Create(ctx, cop)
			if err == nil {
				_ = cp.Delete(ctx, cop)
			}
			g.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(gomega.ContainSubstring("overrides change content, not identity"))
		})
	}
}

// Given a tenant's privileged Deployment (host PID and network, SYS_ADMIN, the node's root
// mounted), when her namespaced PropagationPolicy places it, then its binding reports the Pod
// Security violation naming the cluster, the level and the checks, and no Work carries it to a
// member; when a broad ClusterPropagationPolicy selects it instead, it is still refused, since
// the namespace is hers; the platform's own privileged Deployment in a namespace the platform
// exempts (--pod-security-exempt-namespaces) reaches the member.
func TestPrivilegedWorkloadsOfANamespaceStayOutOfMembers(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	alice := workloadTenant(t, "tw-alice", "tw-alice", "tw-alice-devs")

	// Given alice's privileged Deployment and her policy placing it on east,
	priv := privilegedDeployment("tw-alice", "priv")
	pp := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "priv", Namespace: "tw-alice"},
		Spec: placeOnEast(policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "priv"})}
	g.Expect(alice.Create(ctx, pp)).To(gomega.Succeed())
	g.Expect(alice.Create(ctx, priv)).To(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), priv); _ = cp.Delete(context.Background(), pp) })

	// then the binding reports the violation,
	bindingName := names.Binding("Deployment", "priv")
	g.Eventually(func() string { return bindingApplied("tw-alice", bindingName) }).Should(gomega.And(
		gomega.ContainSubstring("cluster east"),
		gomega.ContainSubstring("Deployment tw-alice/priv"),
		gomega.ContainSubstring(`Pod Security level "baseline"`),
		gomega.ContainSubstring("hostNetwork=true, hostPID=true"),
		gomega.ContainSubstring("SYS_ADMIN"),
		gomega.ContainSubstring("hostPath volumes"),
		gomega.ContainSubstring("--pod-security-exempt-namespaces")))
	// and no Work was written for it, so no member has it.
	rb := &workv1alpha1.ResourceBinding{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: "tw-alice", Name: bindingName}, rb)).To(gomega.Succeed())
	for _, cs := range rb.Status.Clusters {
		g.Expect(cs.LastApplied).To(gomega.BeNil(), "nothing was applied in %s", cs.Cluster)
	}
	g.Expect(memberHas(t, "east", "tw-alice", "priv")).To(gomega.BeFalse())

	// When a platform ClusterPropagationPolicy of higher priority selects it instead,
	broad := &policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tw-broad"},
		Spec: placeOnEast(policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "tw-alice", Name: "priv"})}
	broad.Spec.Priority = ptr.To[int32](100)
	g.Expect(cp.Create(ctx, broad)).To(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), broad) })
	g.Eventually(func() string {
		b := &workv1alpha1.ResourceBinding{}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: "tw-alice", Name: bindingName}, b); err != nil {
			return ""
		}
		return b.Spec.PolicyRef.Kind
	}).Should(gomega.Equal("ClusterPropagationPolicy"))
	// it is still refused and nothing reaches the member;
	g.Consistently(func() bool { return memberHas(t, "east", "tw-alice", "priv") }).WithTimeout(3 * time.Second).Should(gomega.BeFalse())
	g.Expect(bindingApplied("tw-alice", bindingName)).To(gomega.ContainSubstring(`Pod Security level "baseline"`))

	// the platform's own privileged Deployment in an exempt namespace reaches the member.
	ensureNamespace(t, cp, "tw-platform")
	platformPriv := privilegedDeployment("tw-platform", "tw-priv")
	cpp := &policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tw-platform-priv"},
		Spec: placeOnEast(policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "tw-platform", Name: "tw-priv"})}
	g.Expect(cp.Create(ctx, cpp)).To(gomega.Succeed())
	g.Expect(cp.Create(ctx, platformPriv)).To(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), platformPriv); _ = cp.Delete(context.Background(), cpp) })
	g.Eventually(func() bool { return memberHas(t, "east", "tw-platform", "tw-priv") }).Should(gomega.BeTrue())
}

// Given a tenant's ordinary Deployment placed by her namespaced PropagationPolicy, then it
// reaches the member, and the member namespace Flotilla creates for it enforces the platform's
// Pod Security level (baseline by default) at the latest version, so the member refuses what
// Flotilla would.
func TestOrdinaryWorkloadsPropagateIntoNamespacesThatEnforcePodSecurity(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	alice := workloadTenant(t, "tw-alice", "tw-alice", "tw-alice-devs")
	// Given alice's Deployment and her policy placing it on east,
	web := webDeployment("tw-alice", 1)
	pp := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "tw-alice"},
		Spec: placeOnEast(policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"})}
	g.Expect(alice.Create(ctx, pp)).To(gomega.Succeed())
	g.Expect(alice.Create(ctx, web)).To(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), web); _ = cp.Delete(context.Background(), pp) })

	// then it reaches east,
	g.Eventually(func() int32 { return memberReplicas(t, "east", "tw-alice", "web") }).Should(gomega.Equal(int32(1)))
	// and east's namespace, created by Flotilla, enforces baseline.
	ns := &corev1.Namespace{}
	g.Expect(memberClient(t, "east").Get(ctx, client.ObjectKey{Name: "tw-alice"}, ns)).To(gomega.Succeed())
	g.Expect(ns.Labels).To(gomega.And(
		gomega.HaveKeyWithValue(workv1alpha1.ManagedByLabel, workv1alpha1.ManagedByValue),
		gomega.HaveKeyWithValue("pod-security.kubernetes.io/enforce", "baseline"),
		gomega.HaveKeyWithValue("pod-security.kubernetes.io/enforce-version", "latest")))
}
