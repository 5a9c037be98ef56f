package e2e

import (
	"context"
	"testing"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// kstatusOf computes what kstatus (kubectl wait's and Flux's health checks' library) makes of
// a stored object.
func kstatusOf(t *testing.T, obj client.Object) status.Status {
	t.Helper()
	if err := cp.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		return status.NotFoundStatus
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: m})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

// Given a template released in two waves, kstatus reads its binding Current once it runs
// everywhere, a release InProgress while it waits for approval and Current once it succeeded,
// and an aborted release Failed; the Ready condition says the same to kubectl wait.
func TestKstatusReadsReleasesAndBindings(t *testing.T) {
	g := newG(t)
	ns := "kstatus"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{ManualApproval: true}},
				{Name: "second", ClusterNames: []string{"west"}},
			}},
		}}
	web := webDeployment(ns, 2)
	createAll(t, g, policy, web)
	binding := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-deployment"}}
	// kubectl wait --for=condition=Ready, then kstatus: a binding reads Current from no status
	// at all too, in the moment before its first status write.
	g.Eventually(func() metav1.ConditionStatus {
		_ = cp.Get(context.Background(), client.ObjectKeyFromObject(binding), binding)
		return readyIn(binding.Status.Conditions)
	}).Should(gomega.Equal(metav1.ConditionTrue))
	g.Expect(kstatusOf(t, binding)).To(gomega.Equal(status.CurrentStatus))

	setImage(t, g, web, "registry.example/web:2")
	r2 := &rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-deployment-r2"}}
	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase(ns, r2.Name, 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))
	g.Eventually(func() status.Status { return kstatusOf(t, r2) }).Should(gomega.Equal(status.InProgressStatus))
	out, err := flotilla("release", "promote", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() status.Status { return kstatusOf(t, r2) }).Should(gomega.Equal(status.CurrentStatus))
	g.Expect(readyIn(r2.Status.Conditions)).To(gomega.Equal(metav1.ConditionTrue))

	setImage(t, g, web, "registry.example/web:3")
	r3 := &rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-deployment-r3"}}
	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase(ns, r3.Name, 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval))
	out, err = flotilla("release", "abort", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() status.Status { return kstatusOf(t, r3) }).Should(gomega.Equal(status.FailedStatus))
	g.Expect(readyIn(r3.Status.Conditions)).To(gomega.Equal(metav1.ConditionFalse))
	g.Eventually(func() status.Status { return kstatusOf(t, binding) }).Should(gomega.Equal(status.CurrentStatus), "east back on r2, both applied and healthy")
}

// readyIn is the status of the Ready condition among conds.
func readyIn(conds []metav1.Condition) metav1.ConditionStatus {
	for _, c := range conds {
		if c.Type == "Ready" {
			return c.Status
		}
	}
	return ""
}
