package kube

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Flotilla's identity in a member. `flotilla join` creates it (a ServiceAccount bound to the
// agent ClusterRole) and the cluster controller renews its token; the local fleet binds the
// same ClusterRole to a certificate user of its own.
const (
	// AgentRoleName names the ClusterRole (and, for the ServiceAccount, the ClusterRoleBinding).
	AgentRoleName = "flotilla:agent"
	// AgentServiceAccount is the ServiceAccount, in SystemNamespace, join creates in a member.
	AgentServiceAccount = "flotilla-agent"
	// AgentServiceAccountUser is the user name the member's API server gives its tokens.
	AgentServiceAccountUser = "system:serviceaccount:" + SystemNamespace + ":" + AgentServiceAccount
)

// Annotations of a credentials Secret whose identity Flotilla made (and so renews and removes).
const (
	// IdentityAnnotation says who made the identity; IdentityServiceAccountToken is the only
	// value Flotilla acts on. Absent: the credentials were stored as given.
	IdentityAnnotation          = "cluster.flotilla.dev/identity"
	IdentityServiceAccountToken = "service-account-token"
	// TokenIssuedAtAnnotation and TokenExpiresAtAnnotation (RFC 3339) bound the token's life;
	// it is renewed once two thirds of it have passed.
	TokenIssuedAtAnnotation  = "cluster.flotilla.dev/token-issued-at"
	TokenExpiresAtAnnotation = "cluster.flotilla.dev/token-expires-at"
)

// MinTokenTTL is the shortest token the API server issues (TokenRequest's expirationSeconds).
const MinTokenTTL = 10 * time.Minute

// AgentClusterRole is what Flotilla needs in a member: every verb of reading and writing
// objects of any kind (templates are any kind, and renewing the token is a create on
// serviceaccounts/token), and nothing that lifts privileges beyond that: no impersonate,
// escalate, bind, approve or sign, so a propagated Role or binding can grant no more than this
// role holds.
func AgentClusterRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: AgentRoleName},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"*"}, Resources: []string{"*"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"},
		}},
	}
}

// AgentToken is a token of the agent ServiceAccount and the span it is valid for.
type AgentToken struct {
	Token               string
	IssuedAt, ExpiresAt time.Time
}

// RenewAt is when the token should be replaced: with a third of its life left, so a member
// unreachable for a while still gets a new one before the old one stops working.
func (t AgentToken) RenewAt() time.Time {
	return t.ExpiresAt.Add(-t.ExpiresAt.Sub(t.IssuedAt) / 3)
}

// Annotations are the credentials Secret's annotations for the token.
func (t AgentToken) Annotations() map[string]string {
	return map[string]string{
		IdentityAnnotation:       IdentityServiceAccountToken,
		TokenIssuedAtAnnotation:  t.IssuedAt.UTC().Format(time.RFC3339),
		TokenExpiresAtAnnotation: t.ExpiresAt.UTC().Format(time.RFC3339),
	}
}

// AgentTokenFromAnnotations reads the token's span back; ok is false when the identity is not
// Flotilla-made. An unreadable time is an error naming the annotation.
func AgentTokenFromAnnotations(a map[string]string) (t AgentToken, ok bool, err error) {
	if a[IdentityAnnotation] != IdentityServiceAccountToken {
		return t, false, nil
	}
	for key, to := range map[string]*time.Time{TokenIssuedAtAnnotation: &t.IssuedAt, TokenExpiresAtAnnotation: &t.ExpiresAt} {
		if *to, err = time.Parse(time.RFC3339, a[key]); err != nil {
			return t, true, fmt.Errorf("annotation %s: %q is not an RFC 3339 time", key, a[key])
		}
	}
	return t, true, nil
}

// RequestAgentToken asks the member for a new token of the agent ServiceAccount valid for ttl;
// the API server may shorten or lengthen it, so the span is the one it answers. now is the
// caller's clock, which decides renewal.
func RequestAgentToken(ctx context.Context, cs kubernetes.Interface, ttl time.Duration, now time.Time) (AgentToken, error) {
	seconds := int64(ttl / time.Second)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	got, err := cs.CoreV1().ServiceAccounts(SystemNamespace).CreateToken(ctx, AgentServiceAccount, req, metav1.CreateOptions{})
	if err != nil {
		return AgentToken{}, fmt.Errorf("requesting a token for serviceaccount %s/%s: %w", SystemNamespace, AgentServiceAccount, err)
	}
	if got.Status.Token == "" || got.Status.ExpirationTimestamp.IsZero() {
		return AgentToken{}, fmt.Errorf("requesting a token for serviceaccount %s/%s: the API server answered no token or no expiry", SystemNamespace, AgentServiceAccount)
	}
	return AgentToken{Token: got.Status.Token, IssuedAt: now, ExpiresAt: got.Status.ExpirationTimestamp.Time}, nil
}

// TokenKubeconfig is kc (reduced to its current context) with its user replaced by the token
// alone: the member's server, CA and TLS settings stay, any other credential goes.
func TokenKubeconfig(kc *clientcmdapi.Config, token string) ([]byte, error) {
	ctx, ok := kc.Contexts[kc.CurrentContext]
	if !ok || kc.Clusters[ctx.Cluster] == nil {
		return nil, fmt.Errorf("kubeconfig: current context %q names no cluster", kc.CurrentContext)
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[ctx.Cluster] = kc.Clusters[ctx.Cluster].DeepCopy()
	out.AuthInfos[AgentServiceAccount] = &clientcmdapi.AuthInfo{Token: token}
	out.Contexts[kc.CurrentContext] = &clientcmdapi.Context{Cluster: ctx.Cluster, AuthInfo: AgentServiceAccount, Namespace: SystemNamespace}
	out.CurrentContext = kc.CurrentContext
	return clientcmd.Write(*out)
}
