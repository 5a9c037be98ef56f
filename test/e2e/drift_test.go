package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// driftPolicy places the namespace's Deployments in east only.
func driftPolicy(ns string, drift *policyv1alpha1.DriftCorrection) *policyv1alpha1.PropagationPolicy {
	return &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
			DriftCorrection:   drift,
		},
	}
}

// driftedWeb is the Deployment of these tests: two replicas, an env var and a label of its own.
func driftedWeb(ns string) *appsv1.Deployment {
	d := webDeployment(ns, 2)
	d.Labels["tier"] = "frontend"
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "fast"}}
	return d
}

// changeByHand does what `kubectl edit` does in the member: a plain update (not the scale
// subresource) of the image, an env var, spec.replicas and a label.
func changeByHand(t *testing.T, g gomega.Gomega, ns string) {
	t.Helper()
	east := memberClient(t, "east")
	g.Eventually(func() error {
		d := memberDeployment(t, "east", ns, "web")
		if d == nil {
			return apierrors.NewNotFound(appsv1.Resource("deployments"), "web")
		}
		d.Spec.Template.Spec.Containers[0].Image = "evil.example/web:pwned"
		d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "pwned"}}
		d.Spec.Replicas = ptr.To(int32(7))
		d.Labels["tier"] = "pwned"
		return east.Update(context.Background(), d, client.FieldOwner("kubectl-edit"))
	}).Should(gomega.Succeed())
}

// asPlaced says how the member Deployment differs from the template's rendering; "" when it
// matches in the four fields changeByHand touches.
func asPlaced(d *appsv1.Deployment) string {
	switch {
	case d == nil:
		return "missing"
	case d.Spec.Template.Spec.Containers[0].Image != "registry.example/web:1":
		return "image " + d.Spec.Template.Spec.Containers[0].Image
	case envOf(d)["MODE"] != "fast":
		return "MODE " + envOf(d)["MODE"]
	case ptr.Deref(d.Spec.Replicas, 1) != 2:
		return "replicas"
	case d.Labels["tier"] != "frontend":
		return "label tier " + d.Labels["tier"]
	}
	return ""
}

func bindingCondition(ns, name, typ string) func() string {
	return func() string {
		b := bindingOf(context.Background(), ns, name)
		if b == nil {
			return ""
		}
		if c := meta.FindStatusCondition(b.Status.Conditions, typ); c != nil {
			return string(c.Status) + ": " + c.Message
		}
		return ""
	}
}

// Given a Deployment placed in east with the default driftCorrection (Correct), when someone
// changes its image, an env var, spec.replicas and a label by hand in east, then Flotilla puts
// all four back within seconds, says so with a DriftCorrected event on the binding and the
// template, and counts it in the binding's status; scaling through the scale subresource (what
// an HPA does) is left alone; a Deployment deleted by hand is recreated.
func TestDriftIsPutBack(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "drift-correct"
	ensureNamespace(t, cp, ns)
	createAll(t, g, driftPolicy(ns, nil), driftedWeb(ns))
	g.Eventually(func() string { return asPlaced(memberDeployment(t, "east", ns, "web")) }).Should(gomega.BeEmpty())
	g.Eventually(func() string {
		if b := bindingOf(ctx, ns, "web-deployment"); b != nil && b.Spec.DriftCorrection != nil {
			return b.Spec.DriftCorrection.Mode
		}
		return ""
	}).Should(gomega.Equal("Correct"), "the binding shows the mode in force")
	g.Consistently(eventSays(ns, "web-deployment", "DriftCorrected"), 2*time.Second, 200*time.Millisecond).Should(gomega.BeFalse(),
		"nothing was changed by hand yet: the member's defaults and status are not drift")

	// When
	changeByHand(t, g, ns)
	start := time.Now()

	// Then
	g.Eventually(func() string { return asPlaced(memberDeployment(t, "east", ns, "web")) }, 30*time.Second, 50*time.Millisecond).Should(gomega.BeEmpty())
	t.Logf("image, env, replicas and label put back %s after the change by hand", time.Since(start).Round(time.Millisecond))
	g.Eventually(eventSays(ns, "web-deployment", "DriftCorrected", "east", "Deployment drift-correct/web", "/spec/replicas", "/spec/template/spec/containers/0/image")).Should(gomega.BeTrue())
	g.Eventually(eventSays(ns, "web", "DriftCorrected", "east")).Should(gomega.BeTrue(), "the template gets the event too")
	g.Eventually(func() int64 {
		if b := bindingOf(ctx, ns, "web-deployment"); b != nil {
			for _, c := range b.Status.Clusters {
				if c.Cluster == "east" && c.Drift != nil {
					return c.Drift.Corrections
				}
			}
		}
		return 0
	}).Should(gomega.BeNumerically(">=", 1), "the binding's status counts the correction")
	out, err := flotilla("describe", "deployment/web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("Drift:      Correct"))
	g.Expect(out).To(gomega.MatchRegexp(`east: \d+ corrected`))

	// A member scaler writes through the scale subresource: not drift.
	east := memberClient(t, "east")
	member := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	scale := &autoscalingv1.Scale{}
	g.Expect(east.SubResource("scale").Get(ctx, member, scale)).To(gomega.Succeed())
	scale.Spec.Replicas = 5
	g.Expect(east.SubResource("scale").Update(ctx, member, client.WithSubResourceBody(scale), client.FieldOwner("hpa-simulator"))).To(gomega.Succeed())
	g.Consistently(func() int32 { return memberReplicas(t, "east", ns, "web") }, 5*time.Second, 200*time.Millisecond).Should(gomega.Equal(int32(5)),
		"replicas a member scaler set through the scale subresource stay")

	// A Deployment deleted by hand comes back.
	old := memberDeployment(t, "east", ns, "web")
	g.Expect(east.Delete(ctx, old)).To(gomega.Succeed())
	start = time.Now()
	g.Eventually(func() bool {
		d := memberDeployment(t, "east", ns, "web")
		return d != nil && d.UID != old.UID
	}, 30*time.Second, 50*time.Millisecond).Should(gomega.BeTrue())
	t.Logf("deleted Deployment recreated %s after the delete", time.Since(start).Round(time.Millisecond))
	// Each correction is an event of its own on the template, naming what it put back (an
	// event series would have kept the first correction's words).
	g.Eventually(eventSays(ns, "web", "DriftCorrected", "east", "(deleted)")).Should(gomega.BeTrue(), "the deletion's own event on the template")
}

// Given a policy with driftCorrection Report (ignoring spec.replicas), when the image and
// replicas are changed by hand in east, then nothing is put back, and the Work, the binding
// and the template say Drifted=True naming the cluster, the object and the image's field,
// but not the ignored one.
func TestDriftIsReported(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "drift-report"
	ensureNamespace(t, cp, ns)
	createAll(t, g, driftPolicy(ns, &policyv1alpha1.DriftCorrection{Mode: policyv1alpha1.DriftReport, IgnoreFields: []string{"/spec/replicas"}}), driftedWeb(ns))
	g.Eventually(func() string { return asPlaced(memberDeployment(t, "east", ns, "web")) }).Should(gomega.BeEmpty())
	g.Eventually(func() string {
		if b := bindingOf(ctx, ns, "web-deployment"); b != nil && b.Spec.DriftCorrection != nil {
			return b.Spec.DriftCorrection.Mode
		}
		return ""
	}).Should(gomega.Equal("Report"))

	changeByHand(t, g, ns)

	g.Eventually(bindingCondition(ns, "web-deployment", workv1alpha1.ConditionDrifted)).Should(gomega.And(
		gomega.HavePrefix("True: "), gomega.ContainSubstring("cluster east"), gomega.ContainSubstring("Deployment drift-report/web"),
		gomega.ContainSubstring("/spec/template/spec/containers/0/image"), gomega.ContainSubstring("/spec/template/spec/containers/0/env/0/value"),
		gomega.ContainSubstring("/metadata/labels/tier"), gomega.Not(gomega.ContainSubstring("/spec/replicas"))))
	g.Consistently(func() string { return asPlaced(memberDeployment(t, "east", ns, "web")) }, 3*time.Second, 200*time.Millisecond).Should(gomega.Equal("image evil.example/web:pwned"),
		"Report writes nothing")
	// Works live in the controller-manager's memory: restarted, it starts from the binding's
	// lastApplied record, so the unchanged render is not applied again over the reported change.
	g.Expect(bindingOf(ctx, ns, "web-deployment").Status.Clusters).To(gomega.ContainElement(
		gomega.HaveField("LastApplied", gomega.Not(gomega.BeNil()))))
	g.Expect(fleet.RestartManager(ctx)).To(gomega.Succeed())
	g.Consistently(func() string { return asPlaced(memberDeployment(t, "east", ns, "web")) }, 5*time.Second, 200*time.Millisecond).Should(gomega.Equal("image evil.example/web:pwned"),
		"a restart applies nothing unchanged again, so the reported change stays")
	g.Eventually(bindingCondition(ns, "web-deployment", workv1alpha1.ConditionDrifted)).Should(gomega.And(
		gomega.HavePrefix("True: "), gomega.ContainSubstring("cluster east")))
	g.Eventually(func() string {
		tmpl := &appsv1.Deployment{}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, tmpl); err != nil {
			return ""
		}
		for _, c := range tmpl.Status.Conditions {
			if string(c.Type) == workv1alpha1.ConditionDrifted {
				return string(c.Status) + ": " + c.Message
			}
		}
		return ""
	}).Should(gomega.ContainSubstring("cluster east"), "the template's status carries the Drifted condition")
	out, err := flotilla("get", "bindings", "-n", ns, "-o", "wide")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.And(gomega.ContainSubstring("Report"), gomega.ContainSubstring("/spec/template/spec/containers/0/image")))
	for _, kind := range []string{"deploy", "deployments", "deployment.apps"} { // as kubectl takes them
		out, err := flotilla("describe", kind+"/web", "-n", ns)
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
		g.Expect(out).To(gomega.ContainSubstring("Template:   Deployment drift-report/web"), kind)
	}

	// Put back by hand: the condition clears.
	g.Eventually(func() error {
		d := memberDeployment(t, "east", ns, "web")
		if d == nil {
			return apierrors.NewNotFound(appsv1.Resource("deployments"), "web")
		}
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/web:1"
		d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "fast"}}
		d.Labels["tier"] = "frontend"
		return memberClient(t, "east").Update(ctx, d)
	}).Should(gomega.Succeed())
	g.Eventually(bindingCondition(ns, "web-deployment", workv1alpha1.ConditionDrifted)).Should(gomega.HavePrefix("False: "))

	// Deleted by hand: reported, and not recreated (Report writes nothing, a create included).
	g.Expect(memberClient(t, "east").Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})).To(gomega.Succeed())
	g.Eventually(bindingCondition(ns, "web-deployment", workv1alpha1.ConditionDrifted)).Should(gomega.And(
		gomega.HavePrefix("True: "), gomega.ContainSubstring("Deployment drift-report/web"), gomega.ContainSubstring("deleted")))
	g.Consistently(func() *appsv1.Deployment { return memberDeployment(t, "east", ns, "web") }, 3*time.Second, 200*time.Millisecond).Should(gomega.BeNil(),
		"Report does not recreate a deleted object")
}

// Given a ConfigMap placed in east, when Flotilla's managed-by label is removed by hand, then
// it is put back (the Work's record and the field manager say the object is Flotilla's); when
// the object is then deleted, it is recreated, and the binding was not Healthy while it was
// gone.
func TestRemovedLabelAndDeletionArePutBack(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "drift-marks"
	ensureNamespace(t, cp, ns)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: "settings"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}},
		},
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"mode": "fast"}}
	createAll(t, g, policy, cm)
	east := memberClient(t, "east")
	memberCM := func() *corev1.ConfigMap {
		got := &corev1.ConfigMap{}
		if err := east.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
			return nil
		}
		return got
	}
	g.Eventually(memberCM).ShouldNot(gomega.BeNil())
	g.Eventually(func() workv1alpha1.Health {
		if b := bindingOf(ctx, ns, "settings-configmap"); b != nil {
			return b.Status.Health
		}
		return ""
	}).Should(gomega.Equal(workv1alpha1.HealthHealthy))

	// Sample the member and the binding together until the end of the test: the binding must
	// not say Healthy while the object has been missing for longer than status takes to travel.
	var mu sync.Mutex
	var violations []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var missingSince time.Time
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if memberCM() != nil {
				missingSince = time.Time{}
				continue
			}
			if missingSince.IsZero() {
				missingSince = time.Now()
			}
			b := bindingOf(ctx, ns, "settings-configmap")
			if b != nil && b.Status.Health == workv1alpha1.HealthHealthy && time.Since(missingSince) > 5*time.Second {
				mu.Lock()
				violations = append(violations, "missing for "+time.Since(missingSince).Round(time.Second).String()+" while the binding says Healthy")
				mu.Unlock()
			}
		}
	}()
	defer func() { close(stop); <-done }()

	// When the label is removed by hand
	g.Eventually(func() error {
		got := memberCM()
		if got == nil {
			return apierrors.NewNotFound(corev1.Resource("configmaps"), cm.Name)
		}
		delete(got.Labels, workv1alpha1.ManagedByLabel)
		return east.Update(ctx, got)
	}).Should(gomega.Succeed())
	start := time.Now()
	g.Eventually(func() string {
		if got := memberCM(); got != nil {
			return got.Labels[workv1alpha1.ManagedByLabel]
		}
		return ""
	}, 30*time.Second, 50*time.Millisecond).Should(gomega.Equal(workv1alpha1.ManagedByValue), "the label is put back")
	t.Logf("managed-by label put back %s after it was removed", time.Since(start).Round(time.Millisecond))
	g.Expect(bindingCondition(ns, "settings-configmap", workv1alpha1.ConditionApplied)()).To(gomega.HavePrefix("True"), "no conflict with Flotilla's own object")

	// When the object is removed with its label gone
	var oldUID types.UID
	g.Eventually(func() error {
		got := memberCM()
		if got == nil {
			return apierrors.NewNotFound(corev1.Resource("configmaps"), cm.Name)
		}
		delete(got.Labels, workv1alpha1.ManagedByLabel)
		if err := east.Update(ctx, got); err != nil {
			return err
		}
		oldUID = got.UID
		return east.Delete(ctx, got)
	}).Should(gomega.Succeed())
	start = time.Now()
	g.Eventually(func() bool {
		got := memberCM()
		return got != nil && got.UID != oldUID && got.Labels[workv1alpha1.ManagedByLabel] == workv1alpha1.ManagedByValue
	}, 30*time.Second, 50*time.Millisecond).Should(gomega.BeTrue(), "the deleted object is recreated")
	t.Logf("object recreated %s after it was deleted", time.Since(start).Round(time.Millisecond))
	g.Eventually(func() workv1alpha1.Health {
		if b := bindingOf(ctx, ns, "settings-configmap"); b != nil {
			return b.Status.Health
		}
		return ""
	}).Should(gomega.Equal(workv1alpha1.HealthHealthy))

	mu.Lock()
	defer mu.Unlock()
	g.Expect(violations).To(gomega.BeEmpty())
}

// ignoreFields must be JSON pointers.
func TestDriftIgnoreFieldsAreValidated(t *testing.T) {
	g := newG(t)
	ns := "drift-invalid"
	ensureNamespace(t, cp, ns)
	for _, fields := range [][]string{{"spec/replicas"}, {"/spec"}, {"/status/replicas"}, {"/a~2b"}} {
		p := driftPolicy(ns, &policyv1alpha1.DriftCorrection{IgnoreFields: fields})
		p.Name = "invalid"
		err := cp.Create(context.Background(), p)
		g.Expect(err).To(gomega.HaveOccurred(), "ignoreFields %v", fields)
		g.Expect(strings.Contains(err.Error(), "ignoreFields")).To(gomega.BeTrue(), err.Error())
	}
}

// Given a Deployment whose policy corrects drift but leaves the image to the member
// (ignoreFields by container name), when someone changes the image, an env var, spec.replicas
// and a label by hand, then Flotilla puts back the three it owns and the image stays as the
// member has it; the event names only what was put back.
func TestDriftCorrectionKeepsIgnoredFields(t *testing.T) {
	g := newG(t)
	ns := "drift-ignore"
	ensureNamespace(t, cp, ns)
	createAll(t, g, driftPolicy(ns, &policyv1alpha1.DriftCorrection{IgnoreFields: []string{"/spec/template/spec/containers/web/image"}}), driftedWeb(ns))
	g.Eventually(func() string { return asPlaced(memberDeployment(t, "east", ns, "web")) }).Should(gomega.BeEmpty())

	changeByHand(t, g, ns)

	g.Eventually(func() string {
		d := memberDeployment(t, "east", ns, "web")
		if d == nil {
			return "missing"
		}
		return fmt.Sprintf("%s %s %d", envOf(d)["MODE"], d.Labels["tier"], ptr.Deref(d.Spec.Replicas, 0))
	}, 30*time.Second, 50*time.Millisecond).Should(gomega.Equal("fast frontend 2"), "the fields Flotilla owns are put back")
	g.Consistently(func() string { return memberImage(t, "east", ns, "web") }, 3*time.Second, 200*time.Millisecond).
		Should(gomega.Equal("evil.example/web:pwned"), "the ignored image stays as the member has it")
	g.Eventually(eventSays(ns, "web-deployment", "DriftCorrected", "replicas")).Should(gomega.BeTrue())
}
