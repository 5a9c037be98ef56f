package render

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

func TestParseImageRoundTrip(t *testing.T) {
	for _, img := range []string{"nginx", "nginx:1.27", "library/nginx:1.27", "registry.example:5000/team/app:v2", "localhost/app", "gcr.io/x/y@sha256:abc"} {
		if got := parseImage(img).String(); got != img {
			t.Errorf("parse(%q).String() = %q", img, got)
		}
	}
	if r := parseImage("registry.example:5000/team/app:v2"); r.registry != "registry.example:5000" || r.repository != "team/app" || r.tag != "v2" {
		t.Errorf("components: %+v", r)
	}
}

func TestOverrideInDocumentedOrder(t *testing.T) {
	obj := mustObj(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web, tier: front}}
spec:
  template:
    spec:
      containers:
      - {name: web, image: "docker.io/shop/web:1.0", command: [serve], args: ["--debug", "--port=80"], env: [{name: MODE, value: dev}, {name: OLD, value: x}]}
      - {name: sidecar, image: "proxy:2"}
`)
	rules := []policyv1alpha1.Overriders{{
		ImageOverrider: []policyv1alpha1.ImageOverrider{
			{Component: "Registry", Operator: "replace", Value: "mirror.eu.example"},
			{ContainerName: "web", Component: "Tag", Operator: "replace", Value: "1.1"},
		},
		CommandOverrider: []policyv1alpha1.CommandArgsOverrider{{ContainerName: "web", Operator: "add", Value: []string{"--fast"}}},
		ArgsOverrider:    []policyv1alpha1.CommandArgsOverrider{{ContainerName: "web", Operator: "remove", Value: []string{"--debug"}}},
		EnvOverrider: []policyv1alpha1.EnvOverrider{
			{ContainerName: "web", Operator: "replace", Value: []policyv1alpha1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "REGION", Value: "eu"}}},
			{ContainerName: "web", Operator: "remove", Value: []policyv1alpha1.EnvVar{{Name: "OLD"}}},
		},
		LabelsOverrider:      []policyv1alpha1.LabelAnnotationOverrider{{Operator: "remove", Value: map[string]string{"tier": ""}}},
		AnnotationsOverrider: []policyv1alpha1.LabelAnnotationOverrider{{Operator: "add", Value: map[string]string{"region": "eu"}}},
		Plaintext: []policyv1alpha1.PlaintextOverrider{
			{Path: "/spec/template/spec/priorityClassName", Operator: "add", Value: &policyv1alpha1.JSON{Raw: []byte(`"high"`)}},
			// Runs after the image step: JSON patch sees the overridden image.
			{Path: "/spec/template/spec/containers/1/image", Operator: "replace", Value: &policyv1alpha1.JSON{Raw: []byte(`"proxy:3"`)}},
		},
	}}
	if err := Override(obj, rules); err != nil {
		t.Fatal(err)
	}
	want := mustObj(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}, annotations: {region: eu}}
spec:
  template:
    spec:
      priorityClassName: high
      containers:
      - {name: web, image: "mirror.eu.example/shop/web:1.1", command: [serve, "--fast"], args: ["--port=80"], env: [{name: MODE, value: prod}, {name: REGION, value: eu}]}
      - {name: sidecar, image: "proxy:3"}
`)
	if diff := cmp.Diff(want.Object, obj.Object); diff != "" {
		t.Errorf("overridden (-want +got):\n%s", diff)
	}
}

func TestOverrideErrorsNameTheProblem(t *testing.T) {
	obj := mustObj(t, `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: b}
`)
	err := Override(obj, []policyv1alpha1.Overriders{{ImageOverrider: []policyv1alpha1.ImageOverrider{{Component: "Tag", Operator: "replace", Value: "2"}}}})
	if err == nil || err.Error() != "ConfigMap settings has no containers at spec.template.spec.containers: container overriders do not apply to it" {
		t.Errorf("image override on a ConfigMap: %v", err)
	}
	err = Override(obj, []policyv1alpha1.Overriders{{Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: "/data/missing/deep", Operator: "replace", Value: &policyv1alpha1.JSON{Raw: []byte(`1`)}}}}})
	if err == nil {
		t.Error("a patch path that does not exist must fail")
	}
	err = Override(obj, []policyv1alpha1.Overriders{{Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: "/data/a", Operator: "replace"}}}})
	if err == nil || err.Error() != "plaintext[0] (replace /data/a): add and replace need a value" {
		t.Errorf("replace without value: %v", err)
	}
}
