package cluster

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/execute"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/registration"
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

// A member joined by `flotilla join` (Flotilla's ServiceAccount, a token of an hour): once two
// thirds of the token's life have passed on the controller's clock, the controller asks the
// member for a new token with the current one and stores it; the connection takes it in place
// (the same clients, still Ready) and the new token is the agent's.
func TestTokenRenewalReplacesATokenNearingExpiry(t *testing.T) {
	ctx := context.Background()
	cfg, c := testenv.Start(t)
	memberCfg, _ := testenv.Start(t)
	admin, err := clientcmd.Load(kubeconfigFor(t, memberCfg))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := registration.Join(ctx, c, registration.JoinOptions{Name: "m1", Kubeconfig: admin, TokenTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	secretKey := client.ObjectKey{Namespace: kube.SystemNamespace, Name: registration.SecretName("m1")}
	first := &corev1.Secret{}
	if err := c.Get(ctx, secretKey, first); err != nil {
		t.Fatal(err)
	}
	token, _, err := kube.AgentTokenFromAnnotations(first.Annotations)
	if err != nil {
		t.Fatal(err)
	}

	now := clocktesting.NewFakePassiveClock(time.Now())
	members := clustercache.New(clustercache.Options{ProbePeriod: time.Second, ProbeTimeout: 2 * time.Second, FailureThreshold: 3})
	testenv.Manager(t, cfg, func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: mgr.GetClient(), Cache: members, Clock: now}).SetupWithManager(mgr)
	})
	condition := func(typ string) *metav1.Condition {
		got := &clusterv1alpha1.Cluster{}
		if c.Get(ctx, client.ObjectKey{Name: "m1"}, got) != nil {
			return nil
		}
		return meta.FindStatusCondition(got.Status.Conditions, typ)
	}
	eventually(t, "cluster m1 Ready with a token not yet due", func() bool {
		r := condition(clusterv1alpha1.ConditionCredentialsRenewed)
		return meta.IsStatusConditionTrue([]metav1.Condition{ptrOr(condition(clusterv1alpha1.ConditionReady))}, clusterv1alpha1.ConditionReady) && r != nil
	})
	connected, err := members.Get("m1")
	if err != nil {
		t.Fatal(err)
	}

	now.SetTime(token.RenewAt().Add(time.Second))
	renewed := &corev1.Secret{}
	eventually(t, "a new token in the Secret", func() bool {
		return c.Get(ctx, secretKey, renewed) == nil && renewed.Annotations[kube.TokenIssuedAtAnnotation] != first.Annotations[kube.TokenIssuedAtAnnotation]
	})
	if string(renewed.Data[clusterv1alpha1.CredentialsSecretKey]) == string(first.Data[clusterv1alpha1.CredentialsSecretKey]) {
		t.Fatal("the expiry annotations changed but the kubeconfig did not")
	}
	next, _, err := kube.AgentTokenFromAnnotations(renewed.Annotations)
	if err != nil || !next.ExpiresAt.After(token.ExpiresAt) || !next.RenewAt().After(now.Now()) {
		t.Errorf("renewed token valid until %s, renewed after %s (%v); want later than the old %s and a renewal still ahead", next.ExpiresAt, next.RenewAt(), err, token.ExpiresAt)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(renewed.Data[clusterv1alpha1.CredentialsSecretKey])
	if err != nil {
		t.Fatal(err)
	}
	review, err := kubernetes.NewForConfigOrDie(rc).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || review.Status.UserInfo.Username != kube.AgentServiceAccountUser {
		t.Fatalf("the renewed token authenticates as %+v (%v)", review.Status.UserInfo, err)
	}
	if r := condition(clusterv1alpha1.ConditionCredentialsRenewed); r == nil || r.Status != metav1.ConditionTrue || r.Reason != clusterv1alpha1.ReasonTokenRenewed {
		t.Errorf("condition %s: %+v", clusterv1alpha1.ConditionCredentialsRenewed, r)
	}
	// The Secret changed, and the connection took the new token without being replaced.
	eventually(t, "the connection on the new Secret", func() bool {
		h, _ := members.Health("m1")
		return h.Readiness == clustercache.ReadinessReady && h.LastProbeTime.After(time.Now().Add(-time.Second))
	})
	if after, err := members.Get("m1"); err != nil || after.Clientset != connected.Clientset {
		t.Errorf("the renewal replaced the member's connection (%v): informers and watches started again", err)
	}
	if c := condition(clusterv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready after the renewal: %+v", c)
	}
}

func ptrOr(c *metav1.Condition) metav1.Condition {
	if c == nil {
		return metav1.Condition{}
	}
	return *c
}

// A Pull cluster unjoined while its agent is silent: its agent would carry out the cluster's
// deletionPolicy, but nobody else can reach the member, so once the agent has been silent past
// the limit the Works go without it (what runs there stays) and the Cluster is let go.
func TestAnUnjoinedPullClusterWhoseAgentIsSilentIsLetGo(t *testing.T) {
	ctx := context.Background()
	cfg, c := testenv.Start(t)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kube.SystemNamespace}}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := registration.JoinPull(ctx, c, registration.PullJoinOptions{Name: "edge"}); err != nil {
		t.Fatal(err)
	}
	cl := &clusterv1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: "edge"}, cl); err != nil {
		t.Fatal(err)
	}
	registered := metav1.Now()
	cl.Status.Agent = &clusterv1alpha1.AgentStatus{Identity: "flotilla:agent:edge", CertificateSHA256: "00", RegisteredAt: &registered, LastSeen: &registered}
	if err := c.Status().Update(ctx, cl); err != nil {
		t.Fatal(err)
	}

	now := clocktesting.NewFakePassiveClock(time.Now())
	store := workstore.New()
	var withWorks client.Client
	testenv.Manager(t, cfg, func(mgr ctrl.Manager) error {
		withWorks = store.Client(mgr.GetClient())
		return (&Reconciler{Client: withWorks, Cache: clustercache.New(clustercache.DefaultOptions()), Clock: now, AgentSilence: 10 * time.Second}).SetupWithManager(mgr)
	})
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: kube.ExecutionNamespacePrefix + "edge", Name: "web",
		Labels: map[string]string{workv1alpha1.ClusterLabel: "edge"}, Finalizers: []string{names.ExecutorFinalizer}}}
	if err := withWorks.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Cluster with its finalizer", func() bool {
		got := &clusterv1alpha1.Cluster{}
		return c.Get(ctx, client.ObjectKey{Name: "edge"}, got) == nil && len(got.Finalizers) == 1
	})
	if err := c.Delete(ctx, cl); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Work deleted and waiting for the agent", func() bool {
		got := &workv1alpha1.Work{}
		return withWorks.Get(ctx, client.ObjectKeyFromObject(w), got) == nil && !got.DeletionTimestamp.IsZero()
	})
	time.Sleep(3 * time.Second) // a drain pass or more while the agent is within its limit
	if err := withWorks.Get(ctx, client.ObjectKeyFromObject(w), &workv1alpha1.Work{}); err != nil {
		t.Fatalf("the Work went while its agent could still carry out the deletionPolicy: %v", err)
	}

	now.SetTime(now.Now().Add(time.Minute))
	eventually(t, "the Cluster gone once its agent is silent past the limit", func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "edge"}, &clusterv1alpha1.Cluster{}))
	})
	if err := withWorks.Get(ctx, client.ObjectKeyFromObject(w), &workv1alpha1.Work{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Work of the silent agent: %v; want gone", err)
	}
}
