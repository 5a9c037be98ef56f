package e2e

import (
	"context"
	"testing"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

func podSpec(name string) corev1.PodTemplateSpec {
	labels := map[string]string{"app": name}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "registry.example/" + name + ":1"}}},
	}
}

// Health per kind, as the members' controllers (and kwok's pods) report it: a Job completes in
// both clusters and its template counts its 2 completions (one run, done everywhere, not 2 + 2)
// with Complete; a StatefulSet and a
// DaemonSet become Healthy; ConfigMaps, Secrets and Services are Healthy once applied; a claim
// that no provisioner binds stays Progressing.
func TestHealthOfEveryBuiltInKind(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "health"
	ensureNamespace(t, cp, ns)
	var selectors []policyv1alpha1.ResourceSelector
	for _, k := range []struct{ apiVersion, kind string }{
		{"batch/v1", "Job"}, {"apps/v1", "StatefulSet"}, {"apps/v1", "DaemonSet"}, {"v1", "ConfigMap"},
		{"v1", "Secret"}, {"v1", "Service"}, {"v1", "PersistentVolumeClaim"},
	} {
		selectors = append(selectors, policyv1alpha1.ResourceSelector{APIVersion: k.apiVersion, Kind: k.kind, LabelSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"e2e": "health"}}})
	}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "health", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: selectors,
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}}},
		},
	}
	mark := map[string]string{"e2e": "health"}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: mark} }
	jobPods := podSpec("batch")
	jobPods.Spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{ObjectMeta: meta("batch"), Spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2), Template: jobPods}}
	sts := &appsv1.StatefulSet{ObjectMeta: meta("db"), Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Template: podSpec("db"),
	}}
	ds := &appsv1.DaemonSet{ObjectMeta: meta("agent"), Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}, Template: podSpec("agent"),
	}}
	cm := &corev1.ConfigMap{ObjectMeta: meta("settings"), Data: map[string]string{"k": "v"}}
	secret := &corev1.Secret{ObjectMeta: meta("token"), StringData: map[string]string{"k": "v"}}
	svc := &corev1.Service{ObjectMeta: meta("db"), Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "db"}, Ports: []corev1.ServicePort{{Port: 5432}}}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: meta("data"), Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	createAll(t, g, policy, job, sts, ds, cm, secret, svc, pvc)

	health := func(binding string) workv1alpha1.Health {
		if b := bindingOf(ctx, ns, binding); b != nil && len(b.Status.Clusters) == 2 {
			return b.Status.Health
		}
		return ""
	}
	for binding, want := range map[string]workv1alpha1.Health{
		"batch-job": workv1alpha1.HealthHealthy, "db-statefulset": workv1alpha1.HealthHealthy, "agent-daemonset": workv1alpha1.HealthHealthy,
		"settings-configmap": workv1alpha1.HealthHealthy, "token-secret": workv1alpha1.HealthHealthy, "db-service": workv1alpha1.HealthHealthy,
		"data-persistentvolumeclaim": workv1alpha1.HealthProgressing,
	} {
		g.Eventually(func() workv1alpha1.Health { return health(binding) }).Should(gomega.Equal(want), "health of %s", binding)
	}

	// The Job's template reports one run: its 2 completions, made in each of the two clusters.
	g.Eventually(func() int32 {
		got := &batchv1.Job{}
		if cp.Get(ctx, client.ObjectKeyFromObject(job), got) != nil {
			return -1
		}
		return got.Status.Succeeded
	}).Should(gomega.Equal(int32(2)))
	got := &batchv1.Job{}
	g.Expect(cp.Get(ctx, client.ObjectKeyFromObject(job), got)).To(gomega.Succeed())
	complete := false
	for _, c := range got.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			complete = true
		}
	}
	g.Expect(complete).To(gomega.BeTrue(), "the template carries Complete: %+v", got.Status.Conditions)

	// The StatefulSet's template sums the members' ready replicas.
	g.Eventually(func() int32 {
		cur := &appsv1.StatefulSet{}
		if cp.Get(ctx, client.ObjectKeyFromObject(sts), cur) != nil {
			return -1
		}
		return cur.Status.ReadyReplicas
	}).Should(gomega.Equal(int32(4)))
}
