package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// renewRetry is how soon a failed renewal is tried again; the token has a third of its life
// (at least 3 minutes, at most 8 hours of the default day) to go.
const renewRetry = time.Minute

// renewToken replaces the token of an identity `flotilla join` made once two thirds of its
// life have passed: the current token asks the member (through the connection the cache holds)
// for a new one, and the Secret is updated, which the connection takes in place. It returns
// when to look again; zero for credentials stored as given, which Flotilla does not renew.
func (r *Reconciler) renewToken(ctx context.Context, cl *clusterv1alpha1.Cluster, status *clusterv1alpha1.ClusterStatus) time.Duration {
	ref := cl.Spec.CredentialsSecretRef
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		return 0 // connect has said why
	}
	current, ok, err := kube.AgentTokenFromAnnotations(secret.Annotations)
	if !ok {
		meta.RemoveStatusCondition(&status.Conditions, clusterv1alpha1.ConditionCredentialsRenewed)
		return 0
	}
	fail := func(err error) time.Duration {
		msg := fmt.Sprintf("renewing the token of serviceaccount %s/%s in the member: %v; the current token expires at %s, then the member is unreachable (check that ClusterRole %s in the member allows create on serviceaccounts/token, or join again with --overwrite)",
			kube.SystemNamespace, kube.AgentServiceAccount, err, current.ExpiresAt.UTC().Format(time.RFC3339), kube.AgentRoleName)
		setRenewed(status, metav1.ConditionFalse, clusterv1alpha1.ReasonRenewalFailed, msg, cl.Generation)
		if r.Recorder != nil {
			r.Recorder.Eventf(cl, nil, corev1.EventTypeWarning, "CredentialsRenewalFailed", "RenewCredentials", "Cluster %s: %s", cl.Name, msg)
		}
		return renewRetry
	}
	if err != nil {
		return fail(fmt.Errorf("secret %s/%s: %w", ref.Namespace, ref.Name, err))
	}
	now := r.Clock.Now()
	if now.Before(current.RenewAt()) {
		if meta.FindStatusCondition(status.Conditions, clusterv1alpha1.ConditionCredentialsRenewed) == nil {
			setRenewed(status, metav1.ConditionTrue, clusterv1alpha1.ReasonTokenRenewed, renewedMessage(current), cl.Generation)
		}
		return current.RenewAt().Sub(now)
	}
	member, err := r.Cache.Get(cl.Name)
	if err != nil {
		return fail(err)
	}
	// Ask for as long a life as the current token had (the API server may change it again).
	ttl := max(current.ExpiresAt.Sub(current.IssuedAt).Round(time.Second), kube.MinTokenTTL)
	reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	next, err := kube.RequestAgentToken(reqCtx, member.Clientset, ttl, now)
	if err != nil {
		return fail(err)
	}
	kc, err := clientcmd.Load(secret.Data[clusterv1alpha1.CredentialsSecretKey])
	if err != nil {
		return fail(fmt.Errorf("secret %s/%s: key %q: %w", ref.Namespace, ref.Name, clusterv1alpha1.CredentialsSecretKey, err))
	}
	data, err := kube.TokenKubeconfig(kc, next.Token)
	if err != nil {
		return fail(fmt.Errorf("secret %s/%s: %w", ref.Namespace, ref.Name, err))
	}
	secret.Data[clusterv1alpha1.CredentialsSecretKey] = data
	for k, v := range next.Annotations() {
		secret.Annotations[k] = v
	}
	if err := r.Client.Update(ctx, secret); err != nil {
		return fail(fmt.Errorf("storing the new token in secret %s/%s: %w", ref.Namespace, ref.Name, err))
	}
	setRenewed(status, metav1.ConditionTrue, clusterv1alpha1.ReasonTokenRenewed, renewedMessage(next), cl.Generation)
	if r.Recorder != nil {
		r.Recorder.Eventf(cl, nil, corev1.EventTypeNormal, "CredentialsRenewed", "RenewCredentials", "Cluster %s: new token of serviceaccount %s/%s, valid until %s",
			cl.Name, kube.SystemNamespace, kube.AgentServiceAccount, next.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return next.RenewAt().Sub(now)
}

func renewedMessage(t kube.AgentToken) string {
	return fmt.Sprintf("token of serviceaccount %s/%s valid until %s; renewed after %s",
		kube.SystemNamespace, kube.AgentServiceAccount, t.ExpiresAt.UTC().Format(time.RFC3339), t.RenewAt().UTC().Format(time.RFC3339))
}

func setRenewed(status *clusterv1alpha1.ClusterStatus, s metav1.ConditionStatus, reason, msg string, gen int64) {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: clusterv1alpha1.ConditionCredentialsRenewed, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen,
	})
}
