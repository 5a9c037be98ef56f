package traffic

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

// Flotilla writes rendered routes into members with its own credentials, so a rollout's
// trafficRouting changes only the objects it names: a route or VirtualService of another name,
// a kind of the same name in another API group, and a backendRef to something that is not a
// Service (a ServiceImport named like the stable Service) are left exactly as written.
func TestRenderRewritesOnlyWhatTheRolloutNames(t *testing.T) {
	st := State{Weight: 20, HeaderMatch: []policyv1alpha1.HeaderMatch{{Name: "X-Canary", Exact: ptr.To("yes")}}, PrimaryLabelled: true}
	for name, doc := range map[string]string{
		"a route of another name":           strings.Replace(httpRoute, "{name: web, namespace: shop}", "{name: other, namespace: shop}", 1),
		"a VirtualService of another name":  strings.Replace(virtualService, "{name: web, namespace: shop}", "{name: other, namespace: shop}", 1),
		"an HTTPRoute of another group":     strings.Replace(httpRoute, "gateway.networking.k8s.io/v1", "routes.evil.example/v1", 1),
		"a VirtualService of another group": strings.Replace(virtualService, "networking.istio.io/v1", "networking.evil.example/v1", 1),
		"a Service of another group":        "apiVersion: evil.example/v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}}",
		"a ConfigMap named like the route":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {rules: x}",
	} {
		u := parse(t, doc)
		before := u.DeepCopy()
		if err := Render(u, targets, st); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !equality.Semantic.DeepEqual(before.Object, u.Object) {
			t.Errorf("%s was rewritten:\n%v\nto\n%v", name, before.Object, u.Object)
		}
	}

	u := parse(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: shop}
spec:
  rules:
  - backendRefs: [{group: multicluster.x-k8s.io, kind: ServiceImport, name: web, port: 80}]
  - backendRefs: [{name: web, port: 80}]
`)
	if err := Render(u, targets, State{Weight: 20}); err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	imported := rules[0].(map[string]any)["backendRefs"].([]any)
	if len(imported) != 1 || imported[0].(map[string]any)["weight"] != nil {
		t.Errorf("a ServiceImport named like the stable Service was weighted: %v", imported)
	}
	if refs := rules[1].(map[string]any)["backendRefs"].([]any); len(refs) != 2 || refs[1].(map[string]any)["weight"] != int64(20) {
		t.Errorf("the Service's rule: %v, want web and web-canary at 20", refs)
	}
}

// A header prefix is a literal: it is quoted into the HTTPRoute's regular expression, so its
// dots, parentheses, bars and stars match themselves and cannot widen (or break) the match.
func TestHeaderPrefixIsMatchedLiterally(t *testing.T) {
	u := parse(t, httpRoute)
	if err := Render(u, targets, State{Weight: 10, HeaderMatch: []policyv1alpha1.HeaderMatch{{Name: "X-Version", Prefix: ptr.To("v1.2(beta|*")}}}); err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	h := rules[0].(map[string]any)["matches"].([]any)[0].(map[string]any)["headers"].([]any)[0].(map[string]any)
	if h["type"] != "RegularExpression" {
		t.Fatalf("prefix match as %v", h)
	}
	re, err := regexp.Compile(h["value"].(string))
	if err != nil {
		t.Fatalf("the prefix became an expression that does not compile: %q: %v", h["value"], err)
	}
	for value, want := range map[string]bool{
		"v1.2(beta|*":       true,
		"v1.2(beta|*-rc1":   true,
		"v1x2(beta|*":       false,
		"v1.2":              false,
		"v1.2(beta":         false,
		"old-v1.2(beta|*":   false,
		"v1.2(betaa|*":      false,
		"v1.2(beta|beta|*x": false,
	} {
		if got := re.MatchString(value); got != want {
			t.Errorf("prefix v1.2(beta|* as %q matches %q: %v, want %v", h["value"], value, got, want)
		}
	}
}
