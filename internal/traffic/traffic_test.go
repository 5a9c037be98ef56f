package traffic

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

var targets = &workv1alpha1.TrafficTargets{StableService: "web", CanaryService: "web-canary", HTTPRoute: "web", VirtualService: "web"}

func parse(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

const httpRoute = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: shop}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /static}}]
    backendRefs: [{name: cdn, port: 80}]
`

func TestHTTPRouteGetsWeightsAndHeaderRule(t *testing.T) {
	u := parse(t, httpRoute)
	st := State{Weight: 20, HeaderMatch: []policyv1alpha1.HeaderMatch{{Name: "X-Canary", Exact: ptr.To("yes")}}}
	if err := Render(u, targets, st); err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	if len(rules) != 3 {
		t.Fatalf("rules: %v", rules)
	}
	header := rules[0].(map[string]any)
	if got := header["backendRefs"].([]any); len(got) != 1 || got[0].(map[string]any)["name"] != "web-canary" {
		t.Errorf("header rule sends to %v, want the canary only", got)
	}
	m := header["matches"].([]any)[0].(map[string]any)
	if m["path"] == nil || m["headers"].([]any)[0].(map[string]any)["value"] != "yes" {
		t.Errorf("header rule match %v: want the path and the header together", m)
	}
	refs := rules[1].(map[string]any)["backendRefs"].([]any)
	if refs[0].(map[string]any)["weight"] != int64(80) || refs[1].(map[string]any)["weight"] != int64(20) || fmt.Sprint(refs[1].(map[string]any)["port"]) != "80" {
		t.Errorf("weights %v, want web 80, web-canary 20 on port 80", refs)
	}
	if refs := rules[2].(map[string]any)["backendRefs"].([]any); len(refs) != 1 || refs[0].(map[string]any)["weight"] != nil {
		t.Errorf("a rule without the stable Service was changed: %v", refs)
	}
	split, ok := Read(u, targets)
	if !ok || split.Canary != 20 || !split.Header {
		t.Errorf("read back %+v %v", split, ok)
	}
	// Rendering what was rendered (a route read back from a member) gives the same route.
	again := u.DeepCopy()
	if err := Render(again, targets, State{Weight: 60}); err != nil {
		t.Fatal(err)
	}
	if split, _ := Read(again, targets); split.Canary != 60 || split.Header {
		t.Errorf("re-rendered at 60 without header: %+v", split)
	}
}

func TestHTTPRouteWithoutTheStableServiceIsAnError(t *testing.T) {
	u := parse(t, strings.ReplaceAll(httpRoute, "{name: web, port: 80}", "{name: other, port: 80}"))
	err := Render(u, targets, State{Weight: 20})
	if err == nil || !strings.Contains(err.Error(), "no rule has a backendRef to the stable Service web") {
		t.Fatalf("error %v", err)
	}
}

const virtualService = `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: shop}
spec:
  hosts: [web.example.com]
  http:
  - name: primary
    match: [{uri: {prefix: /}}]
    route:
    - destination: {host: web.shop.svc.cluster.local, port: {number: 80}}
`

func TestVirtualServiceGetsWeightsAndHeaderRoute(t *testing.T) {
	u := parse(t, virtualService)
	if err := Render(u, targets, State{Weight: 60, HeaderMatch: []policyv1alpha1.HeaderMatch{{Name: "cookie", Regex: ptr.To(".*canary=1.*")}}}); err != nil {
		t.Fatal(err)
	}
	http, _, _ := unstructured.NestedSlice(u.Object, "spec", "http")
	if len(http) != 2 {
		t.Fatalf("http: %v", http)
	}
	header := http[0].(map[string]any)
	if header["name"] != "primary-"+headerRuleSuffix {
		t.Errorf("header route name %v", header["name"])
	}
	dest := header["route"].([]any)[0].(map[string]any)
	if host, _, _ := unstructured.NestedString(dest, "destination", "host"); host != "web-canary.shop.svc.cluster.local" {
		t.Errorf("header route host %s", host)
	}
	route := http[1].(map[string]any)["route"].([]any)
	if route[0].(map[string]any)["weight"] != int64(40) || route[1].(map[string]any)["weight"] != int64(60) {
		t.Errorf("weights %v", route)
	}
	if split, ok := Read(u, targets); !ok || split.Canary != 60 || !split.Header {
		t.Errorf("read back %+v", split)
	}
}

func TestServicesSelectTheirRole(t *testing.T) {
	bg := &workv1alpha1.TrafficTargets{ActiveService: "web", PreviewService: "web-preview"}
	svc := func(name string) *unstructured.Unstructured {
		return parse(t, "apiVersion: v1\nkind: Service\nmetadata: {name: "+name+"}\nspec: {selector: {app: web}, ports: [{port: 80}]}")
	}
	for _, tt := range []struct {
		name    string
		targets *workv1alpha1.TrafficTargets
		state   State
		role    string
	}{
		{"web", targets, State{PrimaryLabelled: true}, RoleStable},
		{"web", targets, State{}, ""}, // the primary's pods are not labelled yet: selector as written
		{"web-canary", targets, State{}, RoleCanary},
		{"web", bg, State{PrimaryLabelled: true}, RoleStable},
		{"web", bg, State{Active: true, PrimaryLabelled: true}, RoleCanary},
		{"web-preview", bg, State{}, RoleCanary},
		{"other", targets, State{PrimaryLabelled: true}, ""},
	} {
		u := svc(tt.name)
		if err := Render(u, tt.targets, tt.state); err != nil {
			t.Fatal(err)
		}
		sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector")
		if sel[RoleLabel] != tt.role || sel["app"] != "web" {
			t.Errorf("%s %+v: selector %v, want role %q", tt.name, tt.state, sel, tt.role)
		}
	}
}

func TestHeaderRulesOfUnnamedRulesGetDistinctNames(t *testing.T) {
	u := parse(t, strings.ReplaceAll(httpRoute, "{name: cdn, port: 80}", "{name: web, port: 80}"))
	if err := Render(u, targets, State{Weight: 10, HeaderMatch: []policyv1alpha1.HeaderMatch{{Name: "X-Canary", Prefix: ptr.To("y")}}}); err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	if len(rules) != 4 {
		t.Fatalf("rules %v", rules)
	}
	if a, b := rules[0].(map[string]any)["name"], rules[1].(map[string]any)["name"]; a == b {
		t.Errorf("two header rules named %v", a)
	}
	h := rules[0].(map[string]any)["matches"].([]any)[0].(map[string]any)["headers"].([]any)[0].(map[string]any)
	if h["type"] != "RegularExpression" || h["value"] != "^y.*" {
		t.Errorf("prefix match as %v", h)
	}
}

func TestReadTakesTheNamedVirtualServiceRoute(t *testing.T) {
	u := parse(t, virtualService+`
  - name: other
    route:
    - destination: {host: web, port: {number: 80}}
`)
	named := &workv1alpha1.TrafficTargets{StableService: "web", CanaryService: "web-canary", VirtualService: "web", VirtualServiceRoutes: []string{"other"}}
	if err := Render(u, named, State{Weight: 30}); err != nil {
		t.Fatal(err)
	}
	if split, ok := Read(u, named); !ok || split.Canary != 30 {
		t.Errorf("read %+v %v, want the named route's 30%%", split, ok)
	}
	if split, _ := Read(u, targets); split.Canary != 0 {
		t.Errorf("the first route was changed: %+v", split)
	}
}

// Gateway API allows 16 rules: a header route that would push a route past them is a render
// error saying why, not a route the member refuses.
func TestHeaderRouteBeyondSixteenRulesIsAnError(t *testing.T) {
	var rules strings.Builder
	for i := range 9 {
		fmt.Fprintf(&rules, "  - matches: [{path: {type: PathPrefix, value: /p%d}}]\n    backendRefs: [{name: web, port: 80}]\n", i)
	}
	u := parse(t, strings.Split(httpRoute, "  rules:\n")[0]+"  rules:\n"+rules.String())
	if err := Render(u.DeepCopy(), targets, State{Weight: 10}); err != nil {
		t.Fatalf("9 rules without a header route: %v", err)
	}
	err := Render(u, targets, State{Weight: 10, HeaderMatch: []policyv1alpha1.HeaderMatch{{Name: "X-Canary", Exact: ptr.To("yes")}}})
	if err == nil || !strings.Contains(err.Error(), "18 rules in all, more than the 16 Gateway API allows") {
		t.Fatalf("error %v", err)
	}
}
