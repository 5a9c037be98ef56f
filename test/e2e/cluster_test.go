package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/registration"
)

// Given the default local fleet, every member is a Ready Cluster showing what the member is.
func TestMembersBecomeReadyWithTheirFacts(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	for _, m := range fleet.Fleet().Members {
		cl := &clusterv1alpha1.Cluster{}
		g.Expect(cp.Get(ctx, client.ObjectKey{Name: m.Name}, cl)).To(gomega.Succeed())
		g.Expect(readyStatus(t, m.Name)).To(gomega.Equal(metav1.ConditionTrue), "cluster %s", m.Name)
		g.Expect(cl.Status.KubernetesVersion).To(gomega.Equal("v1.37.2"))
		g.Expect(cl.Spec.SyncMode).To(gomega.Equal(clusterv1alpha1.SyncModePush))
		for k, v := range m.Labels {
			g.Expect(cl.Labels).To(gomega.HaveKeyWithValue(k, v))
		}
		g.Expect(cl.Status.NodeSummary).To(gomega.Equal(&clusterv1alpha1.NodeSummary{Total: 2, Ready: 2}))
		alloc := cl.Status.ResourceSummary.Allocatable
		g.Expect(alloc.Cpu().Equal(resource.MustParse("16"))).To(gomega.BeTrue(), "cpu %s", alloc.Cpu())
		g.Expect(alloc.Memory().Equal(resource.MustParse("64Gi"))).To(gomega.BeTrue(), "memory %s", alloc.Memory())
		g.Expect(alloc.Pods().Equal(resource.MustParse("220"))).To(gomega.BeTrue(), "pods %s", alloc.Pods())
		g.Expect(servesResource(cl, "apps/v1", "deployments")).To(gomega.BeTrue())
		g.Expect(cl.Status.LastProbeTime).NotTo(gomega.BeNil())
		g.Expect([]string{cl.Spec.ShortName, cl.Spec.Environment, cl.Spec.Description}).To(gomega.Equal([]string{m.ShortName, m.Environment, m.Description}))
		g.Expect(meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ConditionShortNameUnique)).To(gomega.BeTrue(), "cluster %s", m.Name)
	}

	out, err := flotilla("get", "clusters", "-o", "wide", "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(out).To(gomega.ContainSubstring("NAME"))
	g.Expect(out).To(gomega.MatchRegexp(`east\s+use1\s+prod\s+True\s+v1\.37\.2\s+Push\s+2\s+\d+%\s+\d+%\s+ProbeSucceeded\s+production, US East`))
}

// When pods that request resources run in a member, its Cluster shows them as requested.
func TestResourceSummaryFollowsMemberPods(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	east := memberClient(t, "east")
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "summary-probe", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](4),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "summary-probe"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "summary-probe"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.example/app:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"),
					}},
				}}},
			},
		},
	}
	g.Expect(east.Create(ctx, dep)).To(gomega.Succeed())
	t.Cleanup(func() { _ = east.Delete(context.Background(), dep) })

	g.Eventually(func(g gomega.Gomega) {
		cl := &clusterv1alpha1.Cluster{}
		g.Expect(cp.Get(ctx, client.ObjectKey{Name: "east"}, cl)).To(gomega.Succeed())
		req := cl.Status.ResourceSummary.Requested
		g.Expect(req.Cpu().Equal(resource.MustParse("8"))).To(gomega.BeTrue(), "requested cpu %s", req.Cpu())
		g.Expect(req.Memory().Equal(resource.MustParse("32Gi"))).To(gomega.BeTrue(), "requested memory %s", req.Memory())
		g.Expect(cl.Status.ResourceSummary.Usage.CPU).To(gomega.Equal("50%"))
	}).Should(gomega.Succeed())
}

// When a member's processes stop, only that Cluster turns NotReady within the probe window,
// and it is Ready again after the member restarts.
func TestStoppedMemberTurnsNotReadyAndRecovers(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	t.Cleanup(func() { _ = fleet.StartMember(context.Background(), "west") })

	g.Expect(fleet.StopMember("west")).To(gomega.Succeed())
	g.Eventually(func() metav1.ConditionStatus { return readyStatus(t, "west") }).
		WithTimeout(30 * time.Second).Should(gomega.Equal(metav1.ConditionFalse))
	cond := readyCondition(t, "west")
	g.Expect(cond.Reason).To(gomega.Equal(clusterv1alpha1.ReasonProbeFailed))
	g.Expect(cond.Message).To(gomega.ContainSubstring("last error"))
	g.Expect(readyStatus(t, "east")).To(gomega.Equal(metav1.ConditionTrue))
	g.Expect(readyStatus(t, "europe")).To(gomega.Equal(metav1.ConditionTrue))
	g.Eventually(func() bool { return hasEvent(ctx, "west", "ClusterNotReady") }).Should(gomega.BeTrue())

	g.Expect(fleet.StartMember(ctx, "west")).To(gomega.Succeed())
	g.Eventually(func() metav1.ConditionStatus { return readyStatus(t, "west") }).Should(gomega.Equal(metav1.ConditionTrue))
	g.Eventually(func() bool { return hasEvent(ctx, "west", "ClusterReady") }).Should(gomega.BeTrue())
	g.Expect(readyStatus(t, "east")).To(gomega.Equal(metav1.ConditionTrue))
}

func hasEvent(ctx context.Context, cluster, reason string) bool {
	list := &eventsv1.EventList{}
	if err := cp.List(ctx, list); err != nil {
		return false
	}
	for _, e := range list.Items {
		if e.Regarding.Name == cluster && e.Reason == reason {
			return true
		}
	}
	return false
}

// Join refuses members it cannot reach or read, with a message saying what to fix, and
// writes nothing.
func TestJoinRejectsBadKubeconfigsAndWritesNothing(t *testing.T) {
	g := newG(t)
	dir := t.TempDir()
	malformed := filepath.Join(dir, "malformed.yaml")
	g.Expect(os.WriteFile(malformed, []byte("clusters: [this is: not a kubeconfig"), 0o600)).To(gomega.Succeed())
	unreachable := filepath.Join(dir, "unreachable.yaml")
	g.Expect(os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: gone, user: {token: abc}}]
contexts: [{name: gone, context: {cluster: gone, user: gone}}]
current-context: gone
`), 0o600)).To(gomega.Succeed())

	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--member-kubeconfig", malformed}, "not a valid kubeconfig"},
		{[]string{"--member-kubeconfig", filepath.Join(dir, "missing.yaml")}, "--member-kubeconfig"},
		{[]string{"--member-kubeconfig", unreachable}, "cannot reach the API server at https://127.0.0.1:1"},
		{[]string{"--member-kubeconfig", fleet.Kubeconfig("east"), "--member-context", "nope"}, `--member-context "nope" is not in the member's kubeconfig`},
		{[]string{"--member-kubeconfig", fleet.Kubeconfig("east"), "--label", "bad key!=x"}, `label key "bad key!"`},
		{[]string{"--member-kubeconfig", fleet.Kubeconfig("east"), "--label", "novalue"}, "write labels as key=value"},
		// --kubeconfig names the control plane in join as everywhere: a member's file there is
		// no member at all.
		{nil, "--member-kubeconfig is required"},
	}
	for _, c := range cases {
		args := append([]string{"join", "rejected", "--kubeconfig", fleet.Kubeconfig(""), "--timeout", "3s"}, c.args...)
		out, err := flotilla(args...)
		g.Expect(err).To(gomega.HaveOccurred(), "join %v: %s", c.args, out)
		g.Expect(err.Error()).To(gomega.ContainSubstring(c.want))
	}
	_, err := flotilla("join", "Bad_Name", "--kubeconfig", fleet.Kubeconfig(""), "--member-kubeconfig", fleet.Kubeconfig("east"))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(`cluster name "Bad_Name"`)))

	ctx := context.Background()
	err = cp.Get(ctx, client.ObjectKey{Name: "rejected"}, &clusterv1alpha1.Cluster{})
	g.Expect(apierrors.IsNotFound(err)).To(gomega.BeTrue(), "a failed join must not create the Cluster: %v", err)
	err = cp.Get(ctx, client.ObjectKey{Namespace: kube.SystemNamespace, Name: registration.SecretName("rejected")}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(gomega.BeTrue(), "a failed join must not create the Secret: %v", err)
}

// A joined cluster is probed to Ready; unjoin drains its Works and execution namespace, removes
// its Cluster and Secret and leaves the member's objects alone, unless --objects Delete says
// to remove them.
func TestJoinThenUnjoin(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	// A short name is unique in the fleet: east has use1.
	out, err := flotilla("join", "east-again", "--kubeconfig", fleet.Kubeconfig(""), "--member-kubeconfig", fleet.Kubeconfig("east"), "--short-name", "use1")
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("--short-name use1: cluster east has it already")), out)
	out, err = flotilla("join", "east-again", "--kubeconfig", fleet.Kubeconfig(""),
		"--member-kubeconfig", fleet.Kubeconfig("east"), "--label", "region=us-east", "--label", "tier=gold",
		"--short-name", "use1b", "--environment", "dev", "--description", "east, joined twice")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("cluster/east-again joined"))
	g.Eventually(func() metav1.ConditionStatus { return readyStatus(t, "east-again") }).Should(gomega.Equal(metav1.ConditionTrue))
	cl := &clusterv1alpha1.Cluster{}
	g.Expect(cp.Get(ctx, client.ObjectKey{Name: "east-again"}, cl)).To(gomega.Succeed())
	g.Expect(cl.Labels).To(gomega.Equal(map[string]string{"region": "us-east", "tier": "gold"}))
	g.Expect([]string{cl.Spec.ShortName, cl.Spec.Environment, cl.Spec.Description}).To(gomega.Equal([]string{"use1b", "dev", "east, joined twice"}))
	secretKey := client.ObjectKey{Namespace: kube.SystemNamespace, Name: registration.SecretName("east-again")}
	g.Expect(cp.Get(ctx, secretKey, &corev1.Secret{})).To(gomega.Succeed())

	_, err = flotilla("join", "east-again", "--kubeconfig", fleet.Kubeconfig(""), "--member-kubeconfig", fleet.Kubeconfig("east"))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("already joined")))

	// Something placed on it, to see what unjoining does with it.
	ns := "unjoin"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: "probe"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east-again"}}},
		},
	}
	createAll(t, g, policy, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}, Data: map[string]string{"k": "v"}})
	inMember := func() error {
		return memberClient(t, "east").Get(ctx, client.ObjectKey{Namespace: ns, Name: "probe"}, &corev1.ConfigMap{})
	}
	g.Eventually(inMember).Should(gomega.Succeed())
	execNS := client.ObjectKey{Name: "flotilla-es-east-again"}
	g.Expect(cp.Get(ctx, execNS, &corev1.Namespace{})).To(gomega.Succeed())

	// Unjoin drains the cluster's Works and its execution namespace; by default the member's
	// objects stay running.
	out, err = flotilla("unjoin", "east-again", "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(apierrors.IsNotFound(cp.Get(ctx, client.ObjectKey{Name: "east-again"}, &clusterv1alpha1.Cluster{}))).To(gomega.BeTrue())
	g.Expect(apierrors.IsNotFound(cp.Get(ctx, secretKey, &corev1.Secret{}))).To(gomega.BeTrue())
	// Works live in the controller-manager; the binding tells whether one applies there.
	appliedThere := func() bool {
		b := &workv1alpha1.ResourceBinding{}
		if cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "probe-configmap"}, b) != nil {
			return false
		}
		for _, cs := range b.Status.Clusters {
			if cs.Cluster == "east-again" && cs.Applied && cs.LastApplied != nil {
				return true
			}
		}
		return false
	}
	g.Eventually(appliedThere).Should(gomega.BeFalse(), "the cluster's Work is gone with it")
	g.Eventually(func() bool { return apierrors.IsNotFound(cp.Get(ctx, execNS, &corev1.Namespace{})) }).Should(gomega.BeTrue(), "its execution namespace goes")
	g.Expect(inMember()).To(gomega.Succeed(), "unjoin leaves the member's objects running by default")
	g.Expect(readyStatus(t, "east")).To(gomega.Equal(metav1.ConditionTrue), "the member itself stays joined under its own name")

	_, err = flotilla("unjoin", "east-again", "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(`cluster "east-again" is not joined`)))

	// Joined again, it takes the object back; unjoined with --objects Delete, the object goes.
	out, err = flotilla("join", "east-again", "--kubeconfig", fleet.Kubeconfig(""), "--member-kubeconfig", fleet.Kubeconfig("east"))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(appliedThere).Should(gomega.BeTrue())
	out, err = flotilla("unjoin", "east-again", "--objects", "Delete", "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(apierrors.IsNotFound(inMember())).To(gomega.BeTrue(), "--objects Delete removes the member's objects before the cluster goes")
	_, err = flotilla("unjoin", "east", "--objects", "Sideways", "--kubeconfig", fleet.Kubeconfig(""))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(`--objects "Sideways": use Orphan`)))
}

// Invalid Clusters are rejected at admission with a message naming the field.
func TestInvalidClustersAreRejected(t *testing.T) {
	valid := func() *clusterv1alpha1.Cluster {
		return &clusterv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: "invalid"},
			Spec: clusterv1alpha1.ClusterSpec{
				Endpoint:             "https://10.0.0.1:6443",
				CredentialsSecretRef: clusterv1alpha1.SecretReference{Namespace: kube.SystemNamespace, Name: "creds"},
				SyncMode:             clusterv1alpha1.SyncModePush,
			},
		}
	}
	cases := []struct {
		name   string
		mutate func(*clusterv1alpha1.Cluster)
		want   string
	}{
		{"plain http endpoint", func(c *clusterv1alpha1.Cluster) { c.Spec.Endpoint = "http://10.0.0.1:6443" }, "spec.endpoint must be an https:// URL"},
		{"missing endpoint", func(c *clusterv1alpha1.Cluster) { c.Spec.Endpoint = "" }, "spec.endpoint"},
		{"pull mode with credentials", func(c *clusterv1alpha1.Cluster) { c.Spec.SyncMode = clusterv1alpha1.SyncModePull }, "spec.endpoint and spec.credentialsSecretRef must be empty with syncMode Pull"},
		{"unknown sync mode", func(c *clusterv1alpha1.Cluster) { c.Spec.SyncMode = "Sideways" }, `spec.syncMode: Unsupported value: "Sideways"`},
		{"bad secret name", func(c *clusterv1alpha1.Cluster) { c.Spec.CredentialsSecretRef.Name = "Bad_Name" }, "spec.credentialsSecretRef.name"},
		{"missing secret namespace", func(c *clusterv1alpha1.Cluster) { c.Spec.CredentialsSecretRef.Namespace = "" }, "spec.credentialsSecretRef.namespace"},
		{"unknown taint effect", func(c *clusterv1alpha1.Cluster) {
			c.Spec.Taints = []clusterv1alpha1.Taint{{Key: "dedicated", Effect: "Sometimes"}}
		}, `spec.taints[0].effect: Unsupported value: "Sometimes"`},
		{"bad taint key", func(c *clusterv1alpha1.Cluster) {
			c.Spec.Taints = []clusterv1alpha1.Taint{{Key: "bad key!", Effect: clusterv1alpha1.TaintEffectNoSchedule}}
		}, "spec.taints[0].key"},
		{"duplicate taints", func(c *clusterv1alpha1.Cluster) {
			c.Spec.Taints = []clusterv1alpha1.Taint{{Key: "a", Effect: clusterv1alpha1.TaintEffectNoSchedule}, {Key: "a", Effect: clusterv1alpha1.TaintEffectNoSchedule}}
		}, "spec.taints[1]: Duplicate value"},
		{"name longer than a DNS label", func(c *clusterv1alpha1.Cluster) { c.Name = strings.Repeat("a", 64) }, "metadata.name must be at most 63 characters"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newG(t)
			obj := valid()
			c.mutate(obj)
			err := cp.Create(context.Background(), obj)
			if err == nil {
				_ = cp.Delete(context.Background(), obj)
			}
			g.Expect(err).To(gomega.HaveOccurred())
			g.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want an Invalid error, got %v", err)
			g.Expect(err.Error()).To(gomega.ContainSubstring(c.want))
		})
	}
}

func servesResource(cl *clusterv1alpha1.Cluster, gv, resource string) bool {
	for _, e := range cl.Status.APIEnablements {
		if e.GroupVersion != gv {
			continue
		}
		for _, r := range e.Resources {
			if r.Name == resource {
				return true
			}
		}
	}
	return false
}
