package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// Given a fleet of two slim members (an apiserver and kwok each, no controller-manager), when
// a Deployment and a Job are propagated to both, then kwok's Stages make the Deployment
// Available and the Job Complete there and Flotilla reports them Healthy; when the
// Deployment's image changes, the release passes its first wave on member-01's health and
// ends Succeeded with the new generation observed and available in both members.
func TestSlimMembersRunReleases(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	// A fleet of its own: the suite's members are full ones.
	lf, err := startFleet(ctx, filepath.Join(t.TempDir(), "slim"), localfleet.GeneratedFleet(2, localfleet.ProfileSlim))
	if lf != nil {
		t.Cleanup(func() { _ = lf.Down(true) })
	}
	if err != nil {
		t.Fatalf("starting a slim fleet: %v", err)
	}
	for _, c := range lf.Components() {
		if c.Tool == "kube-controller-manager" && c.Cluster != localfleet.ControlPlaneName || c.Tool == "kube-scheduler" {
			t.Fatalf("slim fleet runs %s: slim members run no controller-manager or scheduler", c.Name)
		}
	}
	slimCP, err := controlPlaneClient(lf)
	if err != nil {
		t.Fatal(err)
	}
	members := lf.Fleet().Names()
	member := func(name string) client.Client {
		cfg, err := lf.RESTConfig(name)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(cfg, client.Options{Scheme: kube.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	ns := "slim"
	g.Expect(slimCP.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(gomega.Succeed())
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{members[0]}},
			}},
		},
	}
	jobs := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "jobs", Namespace: ns},
		Spec:       policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "batch/v1", Kind: "Job"}}},
	}
	web := webDeployment(ns, 2)
	migrate := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "migrate", Namespace: ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "migrate", Image: "registry.example/migrate:1"}},
		}}},
	}
	for _, o := range []client.Object{policy, jobs, web, migrate} {
		g.Expect(slimCP.Create(ctx, o)).To(gomega.Succeed(), "creating %T %s", o, o.GetName())
	}

	health := func(name string) workv1alpha1.Health {
		b := &workv1alpha1.ResourceBinding{}
		if err := slimCP.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
			return ""
		}
		return b.Status.Health
	}
	g.Eventually(func() workv1alpha1.Health { return health("web-deployment") }).Should(gomega.Equal(workv1alpha1.HealthHealthy))
	g.Eventually(func() workv1alpha1.Health { return health("migrate-job") }).Should(gomega.Equal(workv1alpha1.HealthHealthy))
	for _, m := range members {
		job := &batchv1.Job{}
		g.Expect(member(m).Get(ctx, client.ObjectKeyFromObject(migrate), job)).To(gomega.Succeed())
		g.Expect(job.Status.Conditions).To(gomega.ContainElement(gomega.HaveField("Type", batchv1.JobComplete)), "Job in %s", m)
	}

	// An image change is a release: wave "first" (member-01) must turn healthy before the rest.
	g.Eventually(func() error {
		cur := &appsv1.Deployment{}
		if err := slimCP.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = "registry.example/web:2"
		return slimCP.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() rolloutv1alpha1.ReleasePhase {
		rel := &rolloutv1alpha1.Release{}
		if err := slimCP.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-deployment-r2"}, rel); err != nil {
			return ""
		}
		return rel.Status.Phase
	}, 2*time.Minute).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	for _, m := range members {
		d := &appsv1.Deployment{}
		g.Eventually(func() error { return member(m).Get(ctx, client.ObjectKeyFromObject(web), d) }).Should(gomega.Succeed())
		g.Eventually(func(g gomega.Gomega) {
			g.Expect(member(m).Get(ctx, client.ObjectKeyFromObject(web), d)).To(gomega.Succeed())
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(gomega.Equal("registry.example/web:2"))
			g.Expect(d.Status.ObservedGeneration).To(gomega.Equal(d.Generation))
			g.Expect(d.Status.AvailableReplicas).To(gomega.Equal(int32(2)))
			g.Expect(d.Status.Conditions).To(gomega.ContainElement(gomega.And(
				gomega.HaveField("Type", appsv1.DeploymentAvailable), gomega.HaveField("Status", corev1.ConditionTrue))))
		}).Should(gomega.Succeed(), "Deployment in %s", m)
		g.Expect(d.Generation).To(gomega.BeNumerically(">=", 2), "the image change is a new generation in %s", m)
	}
	g.Eventually(func() workv1alpha1.Health { return health("web-deployment") }).Should(gomega.Equal(workv1alpha1.HealthHealthy))
}
