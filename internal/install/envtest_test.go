package install

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/testenv"
)

func countActions(changes []Change) map[string]int {
	n := map[string]int{}
	for _, c := range changes {
		n[c.Action]++
	}
	return n
}

// Every rendered object is accepted by a real API server; a second install changes nothing;
// uninstall keeps user data, install again finds it, and purge takes it out.
func TestInstallTwiceUninstallAndPurge(t *testing.T) {
	_, cfg := testenv.StartBare(t, nil)
	ctx := context.Background()
	objs, err := Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	// An older local fleet bound the manager to cluster-admin under the same name; a roleRef
	// cannot change, so install replaces that binding.
	admin := kubernetes.NewForConfigOrDie(cfg)
	old := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "flotilla:controller-manager"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: Namespace, Name: ManagerServiceAccount}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	first, err := Apply(ctx, cfg, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first install: %d objects in %s", len(first), time.Since(start).Round(time.Millisecond))
	if got, err := admin.RbacV1().ClusterRoleBindings().Get(ctx, old.Name, metav1.GetOptions{}); err != nil || got.RoleRef.Name != "flotilla:controller-manager" {
		t.Fatalf("the manager's binding after install: %v %v, want it bound to flotilla:controller-manager", got.RoleRef, err)
	}
	if n := countActions(first); n["created"] != len(objs) {
		t.Fatalf("first install: %v, want all %d created", n, len(objs))
	}
	start = time.Now()
	second, err := Apply(ctx, cfg, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second install: %d objects unchanged in %s", len(second), time.Since(start).Round(time.Millisecond))
	if n := countActions(second); n["unchanged"] != len(objs) {
		t.Fatalf("second install: %v, want all %d unchanged: %v", n, len(objs), second)
	}

	c, err := client.New(cfg, client.Options{Scheme: kube.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cluster := &clusterv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "east", Finalizers: []string{clusterv1alpha1.Finalizer}},
		Spec:       clusterv1alpha1.ClusterSpec{Endpoint: "https://east.example.com", SyncMode: clusterv1alpha1.SyncModePush, CredentialsSecretRef: clusterv1alpha1.SecretReference{Namespace: Namespace, Name: "cluster-east-credentials"}},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "cluster-east-credentials"}, StringData: map[string]string{"kubeconfig": "x"}}
	for _, o := range []client.Object{secret, cluster} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	if err := Uninstall(ctx, cfg, UninstallOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "flotilla:controller-manager"}, &rbacv1.ClusterRole{}); !apierrors.IsNotFound(err) {
		t.Errorf("the manager's role after uninstall: %v, want gone", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: ManagerDeployment}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the manager's deployment after uninstall: %v, want gone", err)
	}
	keep := func(when string) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1alpha1.Cluster{}); err != nil {
			t.Errorf("cluster east %s: %v", when, err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}); err != nil {
			t.Errorf("its credentials %s: %v", when, err)
		}
	}
	keep("after uninstall")
	again, err := Apply(ctx, cfg, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := countActions(again); n["created"] == 0 || n["unchanged"] == 0 {
		t.Errorf("install after uninstall: %v, want the removed objects created and the CRDs unchanged", n)
	}
	keep("after install again")

	if err := Uninstall(ctx, cfg, UninstallOptions{Purge: true}); err != nil {
		t.Fatal(err)
	}
	got := &clusterv1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), got); err == nil {
		t.Errorf("cluster east after purge: still there (finalizers %v)", got.Finalizers)
	}
}

// Refused installs name what is missing and leave the API server as it was.
func TestInstallRefusalsWriteNothing(t *testing.T) {
	env, cfg := testenv.StartBare(t, nil)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cfg)
	untouched := func(t *testing.T) {
		t.Helper()
		crds, err := admin.Discovery().ServerResourcesForGroupVersion("cluster.flotilla.dev/v1alpha1")
		if err == nil && len(crds.APIResources) > 0 {
			t.Errorf("Flotilla's CRDs are served after a refused install")
		}
		if _, err := admin.RbacV1().ClusterRoles().Get(ctx, "flotilla:controller-manager", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the manager's role after a refused install: %v", err)
		}
	}
	userConfig := func(name string, rules ...rbacv1.PolicyRule) *rest.Config {
		t.Helper()
		u, err := env.AddUser(envtest.User{Name: name}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(rules) > 0 {
			role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
			binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}
			if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return u.Config()
	}

	t.Run("no nodes", func(t *testing.T) {
		_, err := Apply(ctx, cfg, ApplyOptions{Wait: time.Minute})
		if err == nil || !strings.Contains(err.Error(), "has no nodes to run the controller-manager on: install with --layout dedicated") {
			t.Fatalf("got %v, want a refusal saying where the manager could run", err)
		}
		untouched(t)
	})
	t.Run("no rights", func(t *testing.T) {
		_, err := Apply(ctx, userConfig("nobody"), ApplyOptions{})
		if err == nil || !strings.Contains(err.Error(), "refused nobody the rights") || !strings.Contains(err.Error(), "nothing was installed") {
			t.Fatalf("got %v, want an error naming the user and the missing rights", err)
		}
		untouched(t)
	})
	t.Run("some rights", func(t *testing.T) {
		// Namespaces and CRDs, not roles: the dry run refuses before anything is applied, and
		// the namespace made for the dry run goes again.
		everything := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
		cfg := userConfig("half-admin",
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces", "serviceaccounts"}, Verbs: everything},
			rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: everything},
			rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}, Verbs: []string{"create"}})
		_, err := Apply(ctx, cfg, ApplyOptions{})
		if err == nil || !strings.Contains(err.Error(), "clusterrole.rbac.authorization.k8s.io/flotilla:controller-manager") {
			t.Fatalf("got %v, want an error naming the refused role", err)
		}
		untouched(t)
		if _, err := admin.CoreV1().Namespaces().Get(ctx, Namespace, metav1.GetOptions{}); err == nil {
			ns, _ := admin.CoreV1().Namespaces().Get(ctx, Namespace, metav1.GetOptions{})
			if ns.DeletionTimestamp == nil {
				t.Errorf("namespace %s stays after a refused install", Namespace)
			}
		}
	})
}

// A namespace holding a newer Flotilla, or a manager another tool made, is refused unless
// forced, naming what it holds.
func TestInstallRefusesAnotherInstall(t *testing.T) {
	_, cfg := testenv.StartBare(t, nil)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cfg)
	untouched := func() {
		t.Helper()
		if _, err := admin.RbacV1().ClusterRoles().Get(ctx, "flotilla:controller-manager", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the manager's role after a refused install: %v", err)
		}
	}
	{
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace, Annotations: map[string]string{VersionAnnotation: "v99.0.0"}}}
		if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := Apply(ctx, cfg, ApplyOptions{Options: Options{Version: "v0.4.0"}})
		if err == nil || !strings.Contains(err.Error(), "holds Flotilla v99.0.0, newer than this binary's v0.4.0") {
			t.Fatalf("got %v, want a refusal naming both versions", err)
		}
		untouched()
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: ManagerDeployment},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}},
			},
		}
		if _, err := admin.AppsV1().Deployments(Namespace).Create(ctx, d, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
			t.Fatal(err)
		}
		if _, err := Apply(ctx, cfg, ApplyOptions{Options: Options{Version: "v100.0.0"}}); err == nil || !strings.Contains(err.Error(), "flotilla install did not make (managed by helm)") {
			t.Fatalf("got %v, want a refusal naming the deployment's manager", err)
		}
		untouched()
		if _, err := Apply(ctx, cfg, ApplyOptions{Options: Options{Version: "v0.4.0", Force: true}}); err != nil {
			t.Fatalf("--force: %v", err)
		}
	}
}

// An API server without ValidatingAdmissionPolicy v1 is refused before anything is written.
func TestInstallRefusesAnAPIServerWithoutAdmissionPolicies(t *testing.T) {
	// As a Kubernetes older than 1.30 is: the API and its admission plugin are off.
	_, cfg := testenv.StartBare(t, map[string]string{
		"runtime-config":            "admissionregistration.k8s.io/v1/validatingadmissionpolicies=false,admissionregistration.k8s.io/v1/validatingadmissionpolicybindings=false",
		"disable-admission-plugins": "ValidatingAdmissionPolicy",
	})
	_, err := Apply(context.Background(), cfg, ApplyOptions{})
	if err == nil || !strings.Contains(err.Error(), "does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy") || !strings.Contains(err.Error(), "Kubernetes 1.30 or newer") {
		t.Fatalf("got %v, want a refusal naming the missing API and the version needed", err)
	}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Get(context.Background(), Namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after the refusal: %v", Namespace, err)
	}
}
