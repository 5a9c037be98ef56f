package registration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	applymetav1 "k8s.io/client-go/applyconfigurations/meta/v1"
	applyrbacv1 "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// CredentialsMode says what join stores for the member.
type CredentialsMode string

const (
	// CredentialsServiceAccount (the default) uses the given kubeconfig once to create
	// Flotilla's ServiceAccount in the member and stores only a token of it.
	CredentialsServiceAccount CredentialsMode = "service-account"
	// CredentialsAsGiven stores the given kubeconfig: for an identity made beforehand (the local
	// fleet's agent certificates, a platform's own ServiceAccount).
	CredentialsAsGiven CredentialsMode = "as-given"
)

// DefaultTokenTTL is how long a token join requests lives; the controller renews it.
const DefaultTokenTTL = 24 * time.Hour

// memberObject is one object of the identity join creates in a member.
type memberObject struct {
	kind, name string
	get        func(context.Context) error
	apply      func(context.Context) error
	remove     func(context.Context) error
}

func (m memberObject) String() string { return m.kind + " " + m.name }

// identityObjects are the member objects of Flotilla's identity, in the order they are made
// (and the reverse of the order they are removed). The ServiceAccount is owned by its binding,
// so deleting the binding (unjoin, with only the token's rights) lets the member's garbage
// collector remove the ServiceAccount after the token can no longer act.
func identityObjects(cs kubernetes.Interface) []memberObject {
	ns, sa := kube.SystemNamespace, kube.AgentServiceAccount
	role := kube.AgentClusterRole()
	apply := metav1.ApplyOptions{FieldManager: kube.FieldManager, Force: true}
	var bindingUID types.UID
	rules := make([]*applyrbacv1.PolicyRuleApplyConfiguration, 0, len(role.Rules))
	for _, r := range role.Rules {
		rules = append(rules, applyrbacv1.PolicyRule().WithAPIGroups(r.APIGroups...).WithResources(r.Resources...).WithVerbs(r.Verbs...))
	}
	return []memberObject{
		{kind: "Namespace", name: ns,
			get: func(ctx context.Context) error {
				_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
				return err
			},
			apply: func(ctx context.Context) error {
				_, err := cs.CoreV1().Namespaces().Apply(ctx, applycorev1.Namespace(ns), apply)
				return err
			},
			remove: func(ctx context.Context) error {
				return cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
			}},
		{kind: "ClusterRole", name: kube.AgentRoleName,
			get: func(ctx context.Context) error {
				_, err := cs.RbacV1().ClusterRoles().Get(ctx, kube.AgentRoleName, metav1.GetOptions{})
				return err
			},
			apply: func(ctx context.Context) error {
				_, err := cs.RbacV1().ClusterRoles().Apply(ctx, applyrbacv1.ClusterRole(kube.AgentRoleName).WithRules(rules...), apply)
				return err
			},
			remove: func(ctx context.Context) error {
				return cs.RbacV1().ClusterRoles().Delete(ctx, kube.AgentRoleName, metav1.DeleteOptions{})
			}},
		{kind: "ClusterRoleBinding", name: kube.AgentRoleName,
			get: func(ctx context.Context) error {
				_, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, kube.AgentRoleName, metav1.GetOptions{})
				return err
			},
			apply: func(ctx context.Context) error {
				b, err := cs.RbacV1().ClusterRoleBindings().Apply(ctx, applyrbacv1.ClusterRoleBinding(kube.AgentRoleName).
					WithRoleRef(applyrbacv1.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(kube.AgentRoleName)).
					WithSubjects(applyrbacv1.Subject().WithKind(rbacv1.ServiceAccountKind).WithNamespace(ns).WithName(sa)), apply)
				if err == nil {
					bindingUID = b.UID
				}
				return err
			},
			remove: func(ctx context.Context) error {
				return cs.RbacV1().ClusterRoleBindings().Delete(ctx, kube.AgentRoleName, metav1.DeleteOptions{})
			}},
		{kind: "ServiceAccount", name: ns + "/" + sa,
			get: func(ctx context.Context) error {
				_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{})
				return err
			},
			apply: func(ctx context.Context) error {
				_, err := cs.CoreV1().ServiceAccounts(ns).Apply(ctx, applycorev1.ServiceAccount(sa, ns).WithOwnerReferences(
					applymetav1.OwnerReference().WithAPIVersion(rbacv1.SchemeGroupVersion.String()).WithKind("ClusterRoleBinding").
						WithName(kube.AgentRoleName).WithUID(bindingUID)), apply)
				return err
			},
			remove: func(ctx context.Context) error {
				return cs.CoreV1().ServiceAccounts(ns).Delete(ctx, sa, metav1.DeleteOptions{})
			}},
	}
}

// createIdentity uses the given (admin) member credentials once: it applies Flotilla's
// identity in the member, requests a token for it and proves the token works. It returns the
// token's kubeconfig (the member's server and CA, the token, nothing of the admin's) and undo,
// which removes what this call created; on error it has undone it already.
func createIdentity(ctx context.Context, o JoinOptions, kc *clientcmdapi.Config, admin *rest.Config) ([]byte, kube.AgentToken, func(), error) {
	admin = rest.CopyConfig(admin)
	admin.Timeout = o.timeout()
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, kube.AgentToken{}, nil, fmt.Errorf("cluster %q: %w", o.Name, err)
	}
	if err := waitNamespaceGone(ctx, cs); err != nil {
		return nil, kube.AgentToken{}, nil, fmt.Errorf("cluster %q: %w", o.Name, err)
	}
	var created []memberObject
	undo := func() {
		// The caller's context may be cancelled (Ctrl-C): clean up regardless, within bounds.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.timeout())
		defer cancel()
		for i := len(created) - 1; i >= 0; i-- {
			if err := created[i].remove(ctx); err != nil && !apierrors.IsNotFound(err) && o.Warn != nil {
				fmt.Fprintf(o.Warn, "warning: cluster %q: could not remove %s this join created in the member: %v; delete it by hand\n", o.Name, created[i], err)
			}
		}
	}
	fail := func(err error) ([]byte, kube.AgentToken, func(), error) {
		undo()
		return nil, kube.AgentToken{}, nil, err
	}
	for _, obj := range identityObjects(cs) {
		err := obj.get(ctx)
		existed := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return fail(fmt.Errorf("cluster %q: reading %s in the member: %w", o.Name, obj, err))
		}
		if err := obj.apply(ctx); err != nil {
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return fail(fmt.Errorf("cluster %q: namespace %s in the member is being deleted (by an unjoin, or a join that failed and cleaned up); join again once it is gone", o.Name, kube.SystemNamespace))
			}
			if apierrors.IsForbidden(err) {
				return fail(fmt.Errorf("cluster %q: the member kubeconfig may not create %s (%v); join with a kubeconfig that may manage RBAC in the member (a cluster admin's), or store an identity you made with --credentials %s", o.Name, obj, err, CredentialsAsGiven))
			}
			return fail(fmt.Errorf("cluster %q: applying %s in the member: %w", o.Name, obj, err))
		}
		if !existed {
			created = append(created, obj)
		}
	}
	token, err := kube.RequestAgentToken(ctx, cs, o.tokenTTL(), time.Now())
	if err != nil {
		return fail(fmt.Errorf("cluster %q: %w", o.Name, err))
	}
	creds, err := kube.TokenKubeconfig(kc, token.Token)
	if err != nil {
		return fail(fmt.Errorf("cluster %q: %w", o.Name, err))
	}
	if err := checkToken(ctx, o, creds); err != nil {
		return fail(err)
	}
	return creds, token, undo, nil
}

// namespaceDeletionWait bounds waiting for the member's flotilla-system to finish going.
const namespaceDeletionWait = time.Minute

// waitNamespaceGone waits while the member's flotilla-system is being deleted (right after an
// unjoin, or a join that failed and cleaned up): nothing can be created in it until it is gone.
func waitNamespaceGone(ctx context.Context, cs kubernetes.Interface) error {
	terminating := func(ctx context.Context) (bool, error) {
		ns, err := cs.CoreV1().Namespaces().Get(ctx, kube.SystemNamespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && ns.DeletionTimestamp.IsZero(), err
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, namespaceDeletionWait, true, terminating); err != nil {
		return fmt.Errorf("namespace %s in the member is still being deleted after %s (by an unjoin, or a join that failed and cleaned up): %w; join again once it is gone", kube.SystemNamespace, namespaceDeletionWait, err)
	}
	return nil
}

// checkToken proves the stored kubeconfig works before anything is written to the control
// plane: the member says who it is, and RBAC (which the binding just changed) lets it read.
func checkToken(ctx context.Context, o JoinOptions, creds []byte) error {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(creds)
	if err != nil {
		return fmt.Errorf("cluster %q: the token's kubeconfig: %w", o.Name, err)
	}
	cfg.Timeout = o.timeout()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("cluster %q: %w", o.Name, err)
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("cluster %q: the member refused the new %s token: %w", o.Name, kube.AgentServiceAccount, err)
	}
	if got := r.Status.UserInfo.Username; got != kube.AgentServiceAccountUser {
		return fmt.Errorf("cluster %q: the new token authenticates as %q, want %q", o.Name, got, kube.AgentServiceAccountUser)
	}
	// The member's RBAC authorizer learns of the new binding from a watch: a moment's wait.
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, o.timeout(), true, func(ctx context.Context) (bool, error) {
		_, lastErr = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
		return lastErr == nil, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %q: the new %s token may not list namespaces after %s: %v", o.Name, kube.AgentServiceAccount, o.timeout(), lastErr)
	}
	return nil
}

// printPlan says what Join would do, naming kinds and objects and never a credential.
func printPlan(ctx context.Context, o JoinOptions, admin *rest.Config, existing bool, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	if o.credentials() == CredentialsServiceAccount {
		cs, err := kubernetes.NewForConfig(admin)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "member %s (%s): would apply, with field manager %s:\n", o.Name, admin.Host, kube.FieldManager)
		for _, obj := range identityObjects(cs) {
			state := "new"
			if err := obj.get(ctx); err == nil {
				state = "exists, updated"
			} else if !apierrors.IsNotFound(err) {
				state = "cannot tell: " + err.Error()
			}
			fmt.Fprintf(out, "  %s (%s)\n", obj, state)
		}
		fmt.Fprintf(out, "  then request a token of ServiceAccount %s/%s valid for %s\n", kube.SystemNamespace, kube.AgentServiceAccount, o.tokenTTL())
	} else {
		fmt.Fprintf(out, "member %s (%s): nothing (--credentials %s stores the kubeconfig given)\n", o.Name, admin.Host, CredentialsAsGiven)
	}
	verb, what := "create", "the kubeconfig given"
	if existing {
		verb = "update"
	}
	if o.credentials() == CredentialsServiceAccount {
		what = "a kubeconfig with the member's server, CA and the token"
	}
	fmt.Fprintf(out, "control plane: would %s Secret %s/%s (%s) and Cluster %s\n", verb, kube.SystemNamespace, SecretName(o.Name), what, o.Name)
	fmt.Fprintln(out, "dry run: nothing was written")
	return nil
}

// removeIdentity removes Flotilla's identity from a member with the identity's own token. The
// token's rights come from the binding, so it cannot delete the binding and then the rest:
// it hands what should go (the ServiceAccount always, the ClusterRole when nothing else binds
// it, the namespace when it holds nothing else) to the binding as owner and deletes the
// binding; the member's garbage collector removes the others.
func removeIdentity(ctx context.Context, cfg *rest.Config) (removed []string, err error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	binding, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, kube.AgentRoleName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading ClusterRoleBinding %s: %w", kube.AgentRoleName, err)
	}
	owner, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{{
		APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding", Name: binding.Name, UID: binding.UID}}}})
	if err != nil {
		return nil, err
	}
	// Strategic merge adds the reference beside any the object has (merge key uid).
	if _, err := cs.CoreV1().ServiceAccounts(kube.SystemNamespace).Patch(ctx, kube.AgentServiceAccount, types.StrategicMergePatchType, owner, metav1.PatchOptions{FieldManager: kube.FieldManager}); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("handing ServiceAccount %s/%s to its binding: %w", kube.SystemNamespace, kube.AgentServiceAccount, err)
	}
	removed = append(removed, "ServiceAccount "+kube.SystemNamespace+"/"+kube.AgentServiceAccount)
	if others, err := roleBoundElsewhere(ctx, cs); err != nil {
		return nil, err
	} else if others == "" {
		if _, err := cs.RbacV1().ClusterRoles().Patch(ctx, kube.AgentRoleName, types.StrategicMergePatchType, owner, metav1.PatchOptions{FieldManager: kube.FieldManager}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("handing ClusterRole %s to its binding: %w", kube.AgentRoleName, err)
		}
		removed = append(removed, "ClusterRole "+kube.AgentRoleName)
	} else {
		removed = append(removed, "(ClusterRole "+kube.AgentRoleName+" stays: "+others+" binds it)")
	}
	if holds, err := namespaceHoldsOthers(ctx, cs, cfg); err != nil || holds != "" {
		if err != nil {
			holds = "could not list what it holds: " + err.Error()
		}
		removed = append(removed, "(Namespace "+kube.SystemNamespace+" stays: "+holds+")")
	} else {
		if _, err := cs.CoreV1().Namespaces().Patch(ctx, kube.SystemNamespace, types.StrategicMergePatchType, owner, metav1.PatchOptions{FieldManager: kube.FieldManager}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("handing Namespace %s to its binding: %w", kube.SystemNamespace, err)
		}
		removed = append(removed, "Namespace "+kube.SystemNamespace)
	}
	background := metav1.DeletePropagationBackground
	if err := cs.RbacV1().ClusterRoleBindings().Delete(ctx, kube.AgentRoleName, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("deleting ClusterRoleBinding %s: %w", kube.AgentRoleName, err)
	}
	return append([]string{"ClusterRoleBinding " + kube.AgentRoleName}, removed...), nil
}

// roleBoundElsewhere names a binding other than Flotilla's own that grants the agent role.
func roleBoundElsewhere(ctx context.Context, cs kubernetes.Interface) (string, error) {
	crbs, err := cs.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing ClusterRoleBindings: %w", err)
	}
	for _, b := range crbs.Items {
		if b.Name != kube.AgentRoleName && b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == kube.AgentRoleName {
			return "ClusterRoleBinding " + b.Name, nil
		}
	}
	rbs, err := cs.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing RoleBindings: %w", err)
	}
	for _, b := range rbs.Items {
		if b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == kube.AgentRoleName {
			return "RoleBinding " + b.Namespace + "/" + b.Name, nil
		}
	}
	return "", nil
}

// namespaceHoldsOthers names something in the member's flotilla-system besides what every
// namespace holds (the default ServiceAccount, the root CA ConfigMap, events) and the agent.
func namespaceHoldsOthers(ctx context.Context, cs kubernetes.Interface, cfg *rest.Config) (string, error) {
	lists, err := cs.Discovery().ServerPreferredNamespacedResources()
	if err != nil {
		return "", err
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	expected := map[string]bool{"ServiceAccount/default": true, "ServiceAccount/" + kube.AgentServiceAccount: true, "ConfigMap/kube-root-ca.crt": true}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if r.Kind == "Event" || strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			items, err := mc.Resource(gv.WithResource(r.Name)).Namespace(kube.SystemNamespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return "", fmt.Errorf("listing %s: %w", r.Name, err)
			}
			for _, it := range items.Items {
				if !expected[r.Kind+"/"+it.Name] {
					return r.Kind + " " + it.Name, nil
				}
			}
		}
	}
	return "", nil
}

// identityOf reads a credentials Secret: the stored kubeconfig when Flotilla made the
// identity, nil otherwise.
func identityOf(secret *corev1.Secret) []byte {
	if secret.Annotations[kube.IdentityAnnotation] != kube.IdentityServiceAccountToken {
		return nil
	}
	return secret.Data[clusterv1alpha1.CredentialsSecretKey]
}
