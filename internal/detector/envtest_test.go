package detector

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/testenv"
)

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The detector against a real API server: a policy and a template make a binding with the
// template, the policy, the replicas and the binding finalizer; a Deployment no policy places
// gets an honest status the API server's Deployment schema accepts; once placed, no more.
func TestDetectorOnARealAPIServer(t *testing.T) {
	ctx := context.Background()
	cfg, c := testenv.Start(t)
	testenv.Manager(t, cfg, func(mgr ctrl.Manager) error {
		if err := (&Detector{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			return err
		}
		return SetupUnplaced(mgr)
	})
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	deploy := func(name string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: labels}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](4), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}}}}}
	}
	// Unplaced first: nothing selects it.
	base := deploy("base")
	if err := c.Create(ctx, base); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the unplaced Deployment's honest status", func() bool {
		got := &appsv1.Deployment{}
		if c.Get(ctx, client.ObjectKeyFromObject(base), got) != nil {
			return false
		}
		for _, cond := range got.Status.Conditions {
			if string(cond.Type) == names.ConditionPropagated && cond.Status == corev1.ConditionFalse && cond.Reason == "NoPolicy" {
				return got.Status.ObservedGeneration == got.Generation
			}
		}
		return false
	})

	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}}
	if err := c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	web := deploy("web")
	if err := c.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	b := &workv1alpha1.ResourceBinding{}
	eventually(t, "the binding of shop/web", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: names.Binding("Deployment", "web")}, b) == nil
	})
	want := workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", UID: string(web.UID)}
	if b.Spec.Resource != want || b.Spec.PolicyRef.Name != "web" || b.Spec.Replicas != 4 || len(b.Finalizers) != 1 || b.Finalizers[0] != names.BindingFinalizer {
		t.Errorf("binding spec %+v finalizers %v", b.Spec, b.Finalizers)
	}
	// The placed template gets no Propagated condition from the detector.
	time.Sleep(time.Second)
	got := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(web), got); err != nil {
		t.Fatal(err)
	}
	for _, cond := range got.Status.Conditions {
		if string(cond.Type) == names.ConditionPropagated {
			t.Errorf("a placed template is marked unplaced: %+v", cond)
		}
	}

	// A rollout admission cannot check (a header regex that is no RE2) turns the policy's
	// Ready False, naming the policy's own field, before any release is held by it.
	routed := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "routed"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "routed"}},
			Rollout: &policyv1alpha1.RolloutStrategy{
				TrafficRouting: &policyv1alpha1.TrafficRouting{StableService: "web", CanaryService: "web-canary", HTTPRoute: &policyv1alpha1.RouteReference{Name: "web"}},
				Waves: []policyv1alpha1.Wave{{Name: "all", Percentage: ptr.To[int32](100), Steps: []policyv1alpha1.CanaryStep{
					{SetHeaderRoute: &policyv1alpha1.HeaderRoute{Match: []policyv1alpha1.HeaderMatch{{Name: "X-Canary", Regex: ptr.To("([")}}}}}}},
			}}}
	if err := c.Create(ctx, routed); err != nil {
		t.Fatal(err)
	}
	var ready *metav1.Condition
	eventually(t, "the routed policy's Ready condition", func() bool {
		p := &policyv1alpha1.PropagationPolicy{}
		if c.Get(ctx, client.ObjectKeyFromObject(routed), p) != nil {
			return false
		}
		ready = meta.FindStatusCondition(p.Status.Conditions, ConditionReady)
		return ready != nil
	})
	const badRegex = "spec.rollout.waves[0].steps[0].setHeaderRoute.match[0].regex: not an RE2 regular expression"
	if ready.Status != metav1.ConditionFalse || ready.Reason != "InvalidRollout" || !strings.Contains(ready.Message, badRegex) {
		t.Errorf("Ready %+v: want False, InvalidRollout, %q", ready, badRegex)
	}
}
