package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
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

	out, err := flotilla("join", "exec-member", "--control-plane-kubeconfig", fleet.Kubeconfig(""), "--kubeconfig", path, "--timeout", "3s")
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
