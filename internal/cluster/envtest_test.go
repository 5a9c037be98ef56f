package cluster

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/execute"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/testenv"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// kubeconfigFor is an inline-credentials kubeconfig of an envtest API server.
func kubeconfigFor(t *testing.T, cfg *rest.Config) []byte {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["m"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "m", AuthInfo: "u"}
	kc.CurrentContext = "c"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The cluster controller and the executor on real API servers, a control plane and a member:
// a joined Cluster turns Ready with its member's facts; a Work applies its ConfigMap in the
// member; deleting the Cluster (deletionPolicy Orphan, the default) drains its Works and its
// execution namespace before it goes, and leaves the member's object in place.
func TestClusterLifecycleOnRealAPIServers(t *testing.T) {
	ctx := context.Background()
	cfg, c := testenv.Start(t)
	memberCfg, member := testenv.Start(t)
	members := clustercache.New(clustercache.Options{ProbePeriod: time.Second, ProbeTimeout: 2 * time.Second, FailureThreshold: 3})
	store := workstore.New()
	var withWorks client.Client
	testenv.Manager(t, cfg, func(mgr ctrl.Manager) error {
		withWorks = store.Client(mgr.GetClient())
		if err := (&Reconciler{Client: withWorks, Cache: members}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&execute.Executor{Client: withWorks, Works: store, Members: members}).SetupWithManager(mgr)
	})
	for _, ns := range []string{kube.SystemNamespace, kube.ExecutionNamespacePrefix + "m1"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kube.SystemNamespace, Name: "m1"},
		Data: map[string][]byte{clusterv1alpha1.CredentialsSecretKey: kubeconfigFor(t, memberCfg)}}); err != nil {
		t.Fatal(err)
	}
	cl := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "m1"}, Spec: clusterv1alpha1.ClusterSpec{
		Endpoint: memberCfg.Host, SyncMode: clusterv1alpha1.SyncModePush,
		CredentialsSecretRef: clusterv1alpha1.SecretReference{Namespace: kube.SystemNamespace, Name: "m1"}}}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	eventually(t, "cluster m1 Ready with its finalizer", func() bool {
		got := &clusterv1alpha1.Cluster{}
		return c.Get(ctx, client.ObjectKey{Name: "m1"}, got) == nil && meta.IsStatusConditionTrue(got.Status.Conditions, clusterv1alpha1.ConditionReady) &&
			got.Status.KubernetesVersion != "" && len(got.Finalizers) == 1 && got.Finalizers[0] == clusterv1alpha1.Finalizer
	})

	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "probe"}, Data: map[string]string{"k": "v"}}
	raw, _ := json.Marshal(cm)
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: kube.ExecutionNamespacePrefix + "m1", Name: "default-probe-configmap",
		Labels: map[string]string{workv1alpha1.ClusterLabel: "m1", workv1alpha1.BindingNamespaceLabel: "default", workv1alpha1.BindingNameLabel: "probe-configmap"}},
		Spec: workv1alpha1.WorkSpec{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}}}
	if err := withWorks.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	inMember := func() error { return member.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}) }
	eventually(t, "the Work's ConfigMap in the member", func() bool { return inMember() == nil })

	if err := c.Delete(ctx, cl); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Cluster gone after its Works", func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "m1"}, &clusterv1alpha1.Cluster{}))
	})
	works := &workv1alpha1.WorkList{}
	if err := withWorks.List(ctx, works, client.InNamespace(kube.ExecutionNamespacePrefix+"m1")); err != nil || len(works.Items) != 0 {
		t.Errorf("Works left after the Cluster went: %d (%v)", len(works.Items), err)
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: kube.ExecutionNamespacePrefix + "m1"}, ns); err == nil && ns.DeletionTimestamp.IsZero() {
		t.Errorf("the execution namespace was not deleted")
	}
	if err := inMember(); err != nil {
		t.Errorf("deletionPolicy Orphan must leave the member's object: %v", err)
	}
}
