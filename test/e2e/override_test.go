package e2e

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

func memberDeployment(t *testing.T, cluster, ns, name string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	if err := memberClient(t, cluster).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return nil
	}
	return d
}

func envOf(d *appsv1.Deployment) map[string]string {
	out := map[string]string{}
	if d == nil {
		return out
	}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		out[e.Name] = e.Value
	}
	return out
}

// Given a Deployment duplicated to every cluster, an image override per region and an env
// override per cluster: the eu-central member pulls from the EU mirror, the others keep the
// template's registry, and only east gets the extra variable.
func TestOverridesPerRegionAndPerCluster(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "tailored"
	ensureNamespace(t, cp, ns)
	pp := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}}},
	}
	op := &policyv1alpha1.OverridePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.OverrideSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			OverrideRules: []policyv1alpha1.OverrideRule{
				{
					TargetCluster: &policyv1alpha1.ClusterAffinity{LabelSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "eu-central"}}},
					Overriders:    policyv1alpha1.Overriders{ImageOverrider: []policyv1alpha1.ImageOverrider{{Component: "Registry", Operator: "replace", Value: "mirror.eu.example"}}},
				},
				{
					TargetCluster: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}},
					Overriders: policyv1alpha1.Overriders{EnvOverrider: []policyv1alpha1.EnvOverrider{{ContainerName: "web", Operator: "add",
						Value: []policyv1alpha1.EnvVar{{Name: "FEATURE_CHECKOUT_V2", Value: "on"}}}}},
				},
			},
		},
	}
	for _, o := range []client.Object{pp, op} {
		g.Expect(cp.Create(ctx, o)).To(gomega.Succeed())
		t.Cleanup(func() { _ = cp.Delete(context.Background(), o) })
	}
	dep := webDeployment(ns, 2)
	g.Expect(cp.Create(ctx, dep)).To(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), dep) })

	image := func(cluster string) string {
		if d := memberDeployment(t, cluster, ns, "web"); d != nil {
			return d.Spec.Template.Spec.Containers[0].Image
		}
		return ""
	}
	g.Eventually(func() []string { return []string{image("east"), image("west"), image("europe")} }).
		Should(gomega.Equal([]string{"registry.example/web:1", "registry.example/web:1", "mirror.eu.example/web:1"}))
	g.Eventually(func() map[string]string { return envOf(memberDeployment(t, "east", ns, "web")) }).
		Should(gomega.Equal(map[string]string{"FEATURE_CHECKOUT_V2": "on"}))
	g.Expect(envOf(memberDeployment(t, "west", ns, "web"))).To(gomega.BeEmpty())
	// `where` tells what each cluster is given, its overrides applied.
	g.Eventually(func() string {
		out, _ := flotilla("where", "deployment/web", "-n", ns)
		return out
	}).Should(gomega.And(gomega.MatchRegexp(`europe\s.*mirror\.eu\.example/web:1`), gomega.MatchRegexp(`east\s.*registry\.example/web:1`)))

	// History has the first placement in every cluster before anything changes.
	admin := inventoryAs(t, "")
	g.Eventually(func() []string {
		var got []string
		for _, it := range historyOf(t, admin, url.Values{"team": {ns}, "name": {"web"}, "cause": {"placement"}}) {
			if it.Outcome == "healthy" {
				got = append(got, it.Cluster)
			}
		}
		return got
	}).Should(gomega.ConsistOf("east", "west", "europe"))

	// Changing the override policy re-renders only what it changes.
	g.Eventually(func() error {
		cur := &policyv1alpha1.OverridePolicy{}
		if err := cp.Get(ctx, client.ObjectKeyFromObject(op), cur); err != nil {
			return err
		}
		cur.Spec.OverrideRules[1].Overriders.EnvOverrider[0].Value[0].Value = "off"
		return cp.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() map[string]string { return envOf(memberDeployment(t, "east", ns, "web")) }).
		Should(gomega.Equal(map[string]string{"FEATURE_CHECKOUT_V2": "off"}))

	// No rollout, so no revisions: a changed override, then a changed template, are still
	// history, cause apply, in the clusters they changed, with the image each was given.
	applies := func() []string {
		var got []string
		for _, it := range historyOf(t, admin, url.Values{"team": {ns}, "name": {"web"}, "cause": {"apply"}}) {
			if it.Outcome == "healthy" {
				got = append(got, it.Cluster+" "+strings.Join(it.Images, ","))
			}
		}
		return got
	}
	g.Eventually(applies).Should(gomega.ConsistOf("east registry.example/web:1"))
	setImage(t, g, dep, "registry.example/web:2")
	g.Eventually(applies).Should(gomega.ConsistOf("east registry.example/web:1",
		"east registry.example/web:2", "west registry.example/web:2", "europe mirror.eu.example/web:2"))
}

// Nonsense override policies are refused at admission naming the field.
func TestInvalidOverridePoliciesAreRejected(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, cp, "tailored")
	base := func(o policyv1alpha1.Overriders) *policyv1alpha1.OverridePolicy {
		return &policyv1alpha1.OverridePolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "tailored"},
			Spec: policyv1alpha1.OverrideSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
				OverrideRules:     []policyv1alpha1.OverrideRule{{Overriders: o}},
			},
		}
	}
	cases := []struct {
		name string
		o    policyv1alpha1.Overriders
		want string
	}{
		{"unknown or no override kind", policyv1alpha1.Overriders{}, "overriders: give at least one of imageOverrider"},
		{"bad JSON patch path", policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: "spec/replicas", Operator: "remove"}}}, "spec.overrideRules[0].overriders.plaintext[0].path"},
		{"env without container", policyv1alpha1.Overriders{EnvOverrider: []policyv1alpha1.EnvOverrider{{Operator: "add", Value: []policyv1alpha1.EnvVar{{Name: "A"}}}}}, "spec.overrideRules[0].overriders.envOverrider[0].containerName"},
		{"unknown image component", policyv1alpha1.Overriders{ImageOverrider: []policyv1alpha1.ImageOverrider{{Component: "Flavor", Operator: "replace", Value: "x"}}}, `Unsupported value: "Flavor"`},
		{"replace on a command", policyv1alpha1.Overriders{CommandOverrider: []policyv1alpha1.CommandArgsOverrider{{ContainerName: "web", Operator: "replace", Value: []string{"serve"}}}},
			"spec.overrideRules[0].overriders.commandOverrider[0]: Invalid value: operator: commandOverrider and argsOverrider take add or remove"},
		{"unknown operator", policyv1alpha1.Overriders{LabelsOverrider: []policyv1alpha1.LabelAnnotationOverrider{{Operator: "merge", Value: map[string]string{"a": "b"}}}}, `Unsupported value: "merge"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newG(t)
			err := cp.Create(ctx, base(c.o))
			if err == nil {
				_ = cp.Delete(ctx, base(c.o))
			}
			g.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(gomega.ContainSubstring(c.want))
		})
	}
}
