package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/registration"
)

// execKubeconfig is east's kubeconfig whose user runs a command to get credentials: the
// command would leave marker behind if it ever ran.
func execKubeconfig(t *testing.T, marker string) *clientcmdapi.Config {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(fleet.Kubeconfig("east"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range kc.AuthInfos {
		a.ClientCertificateData, a.ClientKeyData = nil, nil
		a.Exec = &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/sh",
			Args: []string{"-c", "touch " + marker + "; echo '{}'"}, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	}
	return kc
}

// Given a member kubeconfig with an exec credential plugin, when it is joined, or stored by
// hand in a Secret a Cluster names, then Flotilla refuses it naming the field and the command
// never runs; a Cluster naming a Secret outside flotilla-system is refused at admission.
func TestMemberCredentialsAreDataNotPrograms(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "exec-ran")
	kc := execKubeconfig(t, marker)
	path := filepath.Join(t.TempDir(), "exec.kubeconfig")
	g.Expect(clientcmd.WriteToFile(*kc, path)).To(gomega.Succeed())

	out, err := flotilla("join", "exec-member", "--kubeconfig", fleet.Kubeconfig(""), "--member-kubeconfig", path, "--timeout", "3s")
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(`.user.exec: runs the command "/bin/sh"`)), out)
	g.Expect(apierrors.IsNotFound(cp.Get(ctx, client.ObjectKey{Name: "exec-member"}, &clusterv1alpha1.Cluster{}))).To(gomega.BeTrue())

	// Written by hand past join: the cluster controller refuses it too.
	data, err := clientcmd.Write(*kc)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kube.SystemNamespace, Name: "exec-member-credentials"},
		Data: map[string][]byte{clusterv1alpha1.CredentialsSecretKey: data}}
	cluster := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "exec-member"},
		Spec: clusterv1alpha1.ClusterSpec{Endpoint: kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster].Server, SyncMode: clusterv1alpha1.SyncModePush,
			CredentialsSecretRef: clusterv1alpha1.SecretReference{Namespace: kube.SystemNamespace, Name: secret.Name}}}
	createAll(t, g, secret, cluster)
	g.Eventually(func() string {
		cur := &clusterv1alpha1.Cluster{}
		if err := cp.Get(ctx, client.ObjectKey{Name: "exec-member"}, cur); err != nil {
			return ""
		}
		if c := meta.FindStatusCondition(cur.Status.Conditions, clusterv1alpha1.ConditionReady); c != nil {
			return string(c.Status) + ": " + c.Message
		}
		return ""
	}).Should(gomega.And(gomega.HavePrefix("False: "), gomega.ContainSubstring(`.user.exec: runs the command "/bin/sh"`)))
	g.Consistently(func() bool { _, err := os.Stat(marker); return err == nil }).WithTimeout(3*time.Second).Should(gomega.BeFalse(), "the exec plugin must never run")

	// A Secret of a namespace's own is no credential store.
	other := cluster.DeepCopy()
	other.ResourceVersion, other.Name = "", "foreign-secret"
	other.Spec.CredentialsSecretRef.Namespace = "team-a"
	err = cp.Create(ctx, other)
	g.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want Invalid, got %v", err)
	g.Expect(err.Error()).To(gomega.ContainSubstring("spec.credentialsSecretRef.namespace: member credentials live in flotilla-system"))
}

// Given the local fleet, when Flotilla's stored credentials for a member are used, then they are
// the member's own agent identity, not system:masters, and open no other member.
func TestMemberCredentialsAreOnePerMemberAndNotAdmin(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	secret := &corev1.Secret{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: kube.SystemNamespace, Name: registration.SecretName("east")}, secret)).To(gomega.Succeed())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[clusterv1alpha1.CredentialsSecretKey])
	g.Expect(err).NotTo(gomega.HaveOccurred())

	cs, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(review.Status.UserInfo.Username).To(gomega.Equal("system:flotilla:agent:east"))
	g.Expect(review.Status.UserInfo.Groups).NotTo(gomega.ContainElement("system:masters"))
	// It may not impersonate, so a propagated binding can grant nothing beyond its own role.
	sar, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "users"}}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(sar.Status.Allowed).To(gomega.BeFalse())

	// The same certificate aimed at west opens nothing there.
	westCfg, err := fleet.RESTConfig("west")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	cfg.Host = westCfg.Host
	west, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = west.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(gomega.BeTrue(), "east's credentials must not open west: %v", err)
}

// Given a member joined with its agent credentials, when they are rotated by joining again with
// a new certificate, then the member stays Ready and delivery goes on with the new one.
func TestMemberCredentialsRotateWithoutInterruption(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	before := &corev1.Secret{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: kube.SystemNamespace, Name: registration.SecretName("east")}, before)).To(gomega.Succeed())
	// A second certificate for the same agent user: what a platform's rotation issues.
	path, err := fleet.UserKubeconfig("east", "system:flotilla:agent:east", "rotation-1")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	m, _ := fleet.Fleet().Member("east")
	// A certificate the platform issued: stored as given, not used to make an identity.
	args := []string{"join", "east", "--kubeconfig", fleet.Kubeconfig(""), "--member-kubeconfig", path, "--overwrite", "--credentials", "as-given"}
	for k, v := range m.Labels {
		args = append(args, "--label", k+"="+v)
	}
	out, err := flotilla(args...)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	after := &corev1.Secret{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: kube.SystemNamespace, Name: registration.SecretName("east")}, after)).To(gomega.Succeed())
	g.Expect(after.Data[clusterv1alpha1.CredentialsSecretKey]).NotTo(gomega.Equal(before.Data[clusterv1alpha1.CredentialsSecretKey]))
	g.Consistently(func() metav1.ConditionStatus { return readyStatus(t, "east") }).WithTimeout(3 * time.Second).Should(gomega.Equal(metav1.ConditionTrue))

	ns := "rotation"
	ensureNamespace(t, cp, ns)
	createAll(t, g, &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
		}}, webDeployment(ns, 1))
	g.Eventually(func() int32 { return memberReplicas(t, "east", ns, "web") }).Should(gomega.Equal(int32(1)))
}

// Given a member's admin kubeconfig, when it is joined under a new name, then join creates
// Flotilla's ServiceAccount in the member and the control plane stores only a token of it,
// which delivers; when the cluster is unjoined, then its identity leaves the member, and the
// member's own agent (the local fleet's, bound to the same ClusterRole) keeps working.
func TestJoinCreatesTheMemberIdentity(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	member := memberClient(t, "west")
	agentObjects := func() []string {
		var found []string
		for _, o := range []client.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: kube.SystemNamespace, Name: kube.AgentServiceAccount}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: kube.AgentRoleName}}} {
			if err := member.Get(ctx, client.ObjectKeyFromObject(o), o); err == nil && o.GetDeletionTimestamp().IsZero() {
				found = append(found, fmt.Sprintf("%T %s", o, o.GetName()))
			}
		}
		return found
	}

	// Dry run first: it says what it would make and makes nothing.
	out, err := flotilla("join", "west-sa", "--kubeconfig", fleet.Kubeconfig(""), "--member-kubeconfig", fleet.Kubeconfig("west"), "--dry-run")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(gomega.ContainSubstring("ServiceAccount flotilla-system/flotilla-agent"), gomega.ContainSubstring("nothing was written")))
	g.Expect(agentObjects()).To(gomega.BeEmpty())
	g.Expect(apierrors.IsNotFound(cp.Get(ctx, client.ObjectKey{Name: "west-sa"}, &clusterv1alpha1.Cluster{}))).To(gomega.BeTrue())

	out, err = flotilla("join", "west-sa", "--kubeconfig", fleet.Kubeconfig(""), "--member-kubeconfig", fleet.Kubeconfig("west"),
		"--label", "identity=service-account", "--token-ttl", "2h")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).NotTo(gomega.ContainSubstring("system:masters"), "the admin credentials are used once, not stored: no warning")
	g.Expect(agentObjects()).To(gomega.HaveLen(2))
	g.Eventually(func() metav1.ConditionStatus { return readyStatus(t, "west-sa") }).Should(gomega.Equal(metav1.ConditionTrue))

	// The stored identity is the ServiceAccount's token, nothing of the admin's.
	secret := &corev1.Secret{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Namespace: kube.SystemNamespace, Name: registration.SecretName("west-sa")}, secret)).To(gomega.Succeed())
	g.Expect(secret.Annotations).To(gomega.HaveKeyWithValue(kube.IdentityAnnotation, kube.IdentityServiceAccountToken))
	token, _, err := kube.AgentTokenFromAnnotations(secret.Annotations)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(token.ExpiresAt).To(gomega.BeTemporally("~", time.Now().Add(2*time.Hour), 5*time.Minute))
	admin, err := fleet.RESTConfig("west")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	raw, _ := secret.Marshal()
	g.Expect(bytes.Contains(raw, admin.KeyData) || bytes.Contains(raw, []byte(base64.StdEncoding.EncodeToString(admin.KeyData)))).To(gomega.BeFalse(), "the admin's key is in the control plane")
	g.Expect(bytes.Contains(raw, admin.CertData) || bytes.Contains(raw, []byte(base64.StdEncoding.EncodeToString(admin.CertData)))).To(gomega.BeFalse(), "the admin's certificate is in the control plane")
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[clusterv1alpha1.CredentialsSecretKey])
	g.Expect(err).NotTo(gomega.HaveOccurred())
	review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(review.Status.UserInfo.Username).To(gomega.Equal(kube.AgentServiceAccountUser))

	// It delivers.
	ns := "sa-identity"
	ensureNamespace(t, cp, ns)
	createAll(t, g, &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"west-sa"}}},
		}}, webDeployment(ns, 1))
	g.Eventually(func() int32 { return memberReplicas(t, "west", ns, "web") }).Should(gomega.Equal(int32(1)))

	// Unjoined, its identity leaves the member; west's own agent keeps the shared ClusterRole.
	out, err = flotilla("unjoin", "west-sa", "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("removed from the member: ClusterRoleBinding flotilla:agent"), out)
	g.Expect(out).NotTo(gomega.ContainSubstring("warning"), out)
	g.Eventually(agentObjects).Should(gomega.BeEmpty())
	g.Expect(member.Get(ctx, client.ObjectKey{Name: kube.AgentRoleName}, &rbacv1.ClusterRole{})).To(gomega.Succeed(), "the local fleet's agent binds the role too")
	g.Consistently(func() metav1.ConditionStatus { return readyStatus(t, "west") }).WithTimeout(3 * time.Second).Should(gomega.Equal(metav1.ConditionTrue))
}
