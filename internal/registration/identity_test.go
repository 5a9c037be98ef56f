package registration

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/testenv"
)

// adminKubeconfig is the member's admin kubeconfig (a system:masters client certificate).
func adminKubeconfig(cfg *rest.Config) *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["member"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["member"] = &clientcmdapi.Context{Cluster: "member", AuthInfo: "admin"}
	kc.CurrentContext = "member"
	return kc
}

// identityInMember says which of the identity's objects the member holds (a namespace being
// deleted counts as gone: envtest runs no namespace controller to finish it).
func identityInMember(t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	ctx := context.Background()
	var found []string
	if ns, err := cs.CoreV1().Namespaces().Get(ctx, kube.SystemNamespace, metav1.GetOptions{}); err == nil && ns.DeletionTimestamp.IsZero() {
		found = append(found, "Namespace")
	}
	if sa, err := cs.CoreV1().ServiceAccounts(kube.SystemNamespace).Get(ctx, kube.AgentServiceAccount, metav1.GetOptions{}); err == nil && sa.DeletionTimestamp.IsZero() {
		found = append(found, "ServiceAccount")
	}
	if _, err := cs.RbacV1().ClusterRoles().Get(ctx, kube.AgentRoleName, metav1.GetOptions{}); err == nil {
		found = append(found, "ClusterRole")
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, kube.AgentRoleName, metav1.GetOptions{}); err == nil {
		found = append(found, "ClusterRoleBinding")
	}
	return found
}

// Given a member's admin kubeconfig, join creates Flotilla's identity in the member and stores
// only a token of it; --dry-run writes nothing; a failure after the member objects were made
// leaves nothing behind in either cluster; unjoin hands the identity to the member's garbage
// collector through its binding.
func TestJoinCreatesTheMemberIdentity(t *testing.T) {
	ctx := context.Background()
	cpCfg, _ := testenv.Start(t)
	cp, err := client.NewWithWatch(cpCfg, client.Options{Scheme: kube.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	memberCfg, _ := testenv.Start(t)
	member := kubernetes.NewForConfigOrDie(memberCfg)
	admin := adminKubeconfig(memberCfg)
	opts := func(name string) JoinOptions {
		return JoinOptions{Name: name, Kubeconfig: admin, TokenTTL: time.Hour, Timeout: 10 * time.Second}
	}

	t.Run("dry run writes nothing", func(t *testing.T) {
		var out bytes.Buffer
		o := opts("dry")
		o.DryRun, o.Out = true, &out
		if _, err := Join(ctx, cp, o); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"ServiceAccount flotilla-system/flotilla-agent (new)", "ClusterRoleBinding flotilla:agent (new)", "Secret flotilla-system/cluster-dry-credentials", "nothing was written"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("dry run output lacks %q:\n%s", want, out.String())
			}
		}
		if got := identityInMember(t, member); len(got) != 0 {
			t.Errorf("dry run created %v in the member", got)
		}
		if err := cp.Get(ctx, client.ObjectKey{Name: "dry"}, &clusterv1alpha1.Cluster{}); !apierrors.IsNotFound(err) {
			t.Errorf("dry run: cluster dry: %v, want NotFound", err)
		}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: kube.SystemNamespace, Name: SecretName("dry")}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("dry run: secret: %v, want NotFound", err)
		}
	})

	t.Run("a failure after the member objects were made leaves nothing", func(t *testing.T) {
		// A member of its own: the namespace this join removes stays Terminating in envtest.
		otherCfg, _ := testenv.Start(t)
		member := kubernetes.NewForConfigOrDie(otherCfg)
		opts := func(name string) JoinOptions {
			return JoinOptions{Name: name, Kubeconfig: adminKubeconfig(otherCfg), TokenTTL: time.Hour, Timeout: 10 * time.Second}
		}
		failing := interceptor.NewClient(cp, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if _, ok := obj.(*clusterv1alpha1.Cluster); ok {
					return errors.New("injected: the control plane refuses the Cluster")
				}
				return c.Create(ctx, obj, opts...)
			},
		})
		if _, err := Join(ctx, failing, opts("broken")); err == nil || !strings.Contains(err.Error(), "injected") {
			t.Fatalf("join: %v, want the injected error", err)
		}
		if got := identityInMember(t, member); len(got) != 0 {
			t.Errorf("a failed join left %v in the member", got)
		}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: kube.SystemNamespace, Name: SecretName("broken")}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("a failed join left its secret: %v", err)
		}
	})

	t.Run("join stores only the ServiceAccount's token", func(t *testing.T) {
		if _, err := Join(ctx, cp, opts("east")); err != nil {
			t.Fatal(err)
		}
		if got := identityInMember(t, member); len(got) != 4 {
			t.Errorf("member holds %v, want Namespace, ServiceAccount, ClusterRole and ClusterRoleBinding", got)
		}
		role, err := member.RbacV1().ClusterRoles().Get(ctx, kube.AgentRoleName, metav1.GetOptions{})
		if err != nil || len(role.Rules) != 1 || strings.Join(role.Rules[0].Verbs, ",") != strings.Join(kube.AgentClusterRole().Rules[0].Verbs, ",") {
			t.Errorf("ClusterRole %s: %v %v, want the agent role's rules", kube.AgentRoleName, role.Rules, err)
		}
		secret := &corev1.Secret{}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: kube.SystemNamespace, Name: SecretName("east")}, secret); err != nil {
			t.Fatal(err)
		}
		if secret.Annotations[kube.IdentityAnnotation] != kube.IdentityServiceAccountToken {
			t.Errorf("annotations %v: want %s=%s", secret.Annotations, kube.IdentityAnnotation, kube.IdentityServiceAccountToken)
		}
		token, _, err := kube.AgentTokenFromAnnotations(secret.Annotations)
		if err != nil || token.ExpiresAt.Before(time.Now().Add(50*time.Minute)) || token.ExpiresAt.After(time.Now().Add(2*time.Hour)) {
			t.Errorf("expiry %s (%v): want about an hour from now", secret.Annotations[kube.TokenExpiresAtAnnotation], err)
		}
		if len(memberCfg.CertData) == 0 && memberCfg.BearerToken == "" {
			t.Fatal("the admin kubeconfig has no credential to look for")
		}
		raw, _ := secret.Marshal()
		for what, b := range map[string][]byte{"certificate": memberCfg.CertData, "key": memberCfg.KeyData, "token": []byte(memberCfg.BearerToken)} {
			if len(b) == 0 {
				continue
			}
			if bytes.Contains(raw, b) || bytes.Contains(raw, []byte(base64.StdEncoding.EncodeToString(b))) {
				t.Errorf("the stored secret holds the admin's %s", what)
			}
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[clusterv1alpha1.CredentialsSecretKey])
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.CertData) != 0 || len(cfg.KeyData) != 0 || cfg.BearerToken == "" {
			t.Errorf("stored kubeconfig: want a token and no client certificate")
		}
		review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil || review.Status.UserInfo.Username != kube.AgentServiceAccountUser {
			t.Fatalf("the stored kubeconfig authenticates as %+v (%v), want %s", review.Status.UserInfo, err, kube.AgentServiceAccountUser)
		}

		var progress, warn bytes.Buffer
		if err := Unjoin(ctx, cp, "east", UnjoinOptions{Wait: 10 * time.Second, Progress: &progress, Warn: &warn}); err != nil {
			t.Fatal(err)
		}
		if warn.Len() > 0 {
			t.Errorf("unjoin warned: %s", warn.String())
		}
		if _, err := member.RbacV1().ClusterRoleBindings().Get(ctx, kube.AgentRoleName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("unjoin left ClusterRoleBinding %s: %v", kube.AgentRoleName, err)
		}
		// envtest runs no garbage collector: what the binding owned is checked by its owner.
		sa, err := member.CoreV1().ServiceAccounts(kube.SystemNamespace).Get(ctx, kube.AgentServiceAccount, metav1.GetOptions{})
		if err != nil || !ownedByBinding(sa.OwnerReferences) {
			t.Errorf("ServiceAccount: owners %v (%v), want the binding, for the member's garbage collector", sa.OwnerReferences, err)
		}
		role, err = member.RbacV1().ClusterRoles().Get(ctx, kube.AgentRoleName, metav1.GetOptions{})
		if err != nil || !ownedByBinding(role.OwnerReferences) {
			t.Errorf("ClusterRole: owners %v (%v), want the binding: nothing else binds it", role.OwnerReferences, err)
		}
		if !strings.Contains(progress.String(), "removed from the member: ClusterRoleBinding flotilla:agent, ServiceAccount flotilla-system/flotilla-agent, ClusterRole flotilla:agent, Namespace flotilla-system") {
			t.Errorf("unjoin said: %s", progress.String())
		}
	})
}

func ownedByBinding(refs []metav1.OwnerReference) bool {
	for _, r := range refs {
		if r.Kind == "ClusterRoleBinding" && r.Name == kube.AgentRoleName && r.APIVersion == rbacv1.SchemeGroupVersion.String() {
			return true
		}
	}
	return false
}
