// Package traffic renders a workload's traffic split into the Services and routes that carry
// it, and reads the split back from a rendered route.
//
// A release with trafficRouting or blueGreen records on the workload's binding which objects
// carry its traffic (spec.revisions.traffic) and, per cluster, the canary's weight, header
// route and whether the new stack is active (spec.revisions.canaries). When the binding
// controller renders one of those objects for a cluster it calls Render with that cluster's
// State: the Services get the role label in their selector (stable and active select the
// primary's pods, canary and preview the canary's), the HTTPRoute's backendRefs and the
// VirtualService's destinations get the weights, and a header route becomes a rule in front.
// Everything else in the objects stays as their authors wrote it.
//
// It owns no API object and calls no API server: pure functions over unstructured objects.
package traffic

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// RoleLabel marks the pods of a workload's primary (stable) and canary; the Services a
// release routes through select on it.
const RoleLabel = "rollout.flotilla.dev/role"

// Pod roles.
const (
	RoleStable = "stable"
	RoleCanary = "canary"
)

// Kinds a split is rendered into.
const (
	HTTPRouteGroup      = "gateway.networking.k8s.io"
	VirtualServiceGroup = "networking.istio.io"
)

// State is one cluster's traffic split.
type State struct {
	// Weight is the percentage of requests sent to the canary.
	Weight int32
	// HeaderMatch sends matching requests to the canary whatever the weight.
	HeaderMatch []policyv1alpha1.HeaderMatch
	// Active: the blue-green active Service selects the new stack.
	Active bool
	// PrimaryLabelled: the primary's pods in the cluster carry the stable role. Until they do
	// (routing just enabled on a running workload rolls them once) the stable and active
	// Services keep their selector as written, rather than select no pod at all.
	PrimaryLabelled bool
}

// StateFor is a cluster's split as the binding's revisions say: all to stable without a canary.
func StateFor(revs *workv1alpha1.Revisions, cluster string) State {
	pin, ok := revs.CanaryFor(cluster)
	if !ok {
		return State{}
	}
	st := State{HeaderMatch: pin.HeaderMatch, Active: pin.Active}
	if pin.Weight != nil {
		st.Weight = *pin.Weight
	}
	return st
}

// Names are the objects of a namespace that carry a workload's split, as "Kind/name"
// (Service, HTTPRoute, VirtualService), for indexing bindings by what they route.
func Names(t *workv1alpha1.TrafficTargets) []string {
	if t == nil {
		return nil
	}
	var out []string
	for _, s := range []string{t.StableService, t.CanaryService, t.ActiveService, t.PreviewService} {
		if s != "" {
			out = append(out, "Service/"+s)
		}
	}
	if t.HTTPRoute != "" {
		out = append(out, "HTTPRoute/"+t.HTTPRoute)
	}
	if t.VirtualService != "" {
		out = append(out, "VirtualService/"+t.VirtualService)
	}
	return out
}

// Key is how Names spells obj.
func Key(obj *unstructured.Unstructured) string { return obj.GetKind() + "/" + obj.GetName() }

// Render sets obj's part of the split. Objects that are not among t are left alone.
func Render(obj *unstructured.Unstructured, t *workv1alpha1.TrafficTargets, st State) error {
	if t == nil {
		return nil
	}
	gv := obj.GroupVersionKind()
	switch {
	case gv.Group == "" && gv.Kind == "Service":
		return renderService(obj, t, st)
	case gv.Group == HTTPRouteGroup && gv.Kind == "HTTPRoute" && obj.GetName() == t.HTTPRoute:
		return renderHTTPRoute(obj, t, st)
	case gv.Group == VirtualServiceGroup && gv.Kind == "VirtualService" && obj.GetName() == t.VirtualService:
		return renderVirtualService(obj, t, st)
	}
	return nil
}

func renderService(obj *unstructured.Unstructured, t *workv1alpha1.TrafficTargets, st State) error {
	role := ""
	switch obj.GetName() {
	case t.StableService:
		role = RoleStable
	case t.CanaryService, t.PreviewService:
		role = RoleCanary
	case t.ActiveService:
		role = RoleStable
		if st.Active {
			role = RoleCanary
		}
	default:
		return nil
	}
	if role == RoleStable && !st.PrimaryLabelled {
		return nil
	}
	selector, _, err := unstructured.NestedStringMap(obj.Object, "spec", "selector")
	if err != nil {
		return fmt.Errorf("Service %s: spec.selector: %w", obj.GetName(), err)
	}
	if len(selector) == 0 {
		return fmt.Errorf("Service %s carries a release's traffic but has no spec.selector; select the workload's pods (the labels of its pod template)", obj.GetName())
	}
	selector[RoleLabel] = role
	return unstructured.SetNestedStringMap(obj.Object, selector, "spec", "selector")
}

// maxHTTPRouteRules is Gateway API's limit on an HTTPRoute's rules.
const maxHTTPRouteRules = 16

// headerRuleSuffix names the rules and routes a header route adds.
const headerRuleSuffix = "flotilla-canary-header"

func renderHTTPRoute(obj *unstructured.Unstructured, t *workv1alpha1.TrafficTargets, st State) error {
	rules, _, err := unstructured.NestedSlice(obj.Object, "spec", "rules")
	if err != nil {
		return fmt.Errorf("HTTPRoute %s: spec.rules: %w", obj.GetName(), err)
	}
	var out, headerRules []any
	found := false
	for i, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			return fmt.Errorf("HTTPRoute %s: spec.rules[%d] is not an object", obj.GetName(), i)
		}
		if name, _ := rule["name"].(string); strings.HasSuffix(name, headerRuleSuffix) {
			continue // one we added before (a route read back from a member)
		}
		refs, _ := rule["backendRefs"].([]any)
		stable, canary := -1, -1
		for j, ref := range refs {
			m, _ := ref.(map[string]any)
			if !isServiceRef(m) {
				continue
			}
			switch m["name"] {
			case t.StableService:
				stable = j
			case t.CanaryService:
				canary = j
			}
		}
		if stable < 0 {
			out = append(out, rule)
			continue
		}
		found = true
		stableRef := refs[stable].(map[string]any)
		if canary < 0 {
			c := map[string]any{"name": t.CanaryService}
			for _, k := range []string{"port", "group", "kind"} {
				if v, ok := stableRef[k]; ok {
					c[k] = v
				}
			}
			refs = append(refs, c)
			canary = len(refs) - 1
		}
		stableRef["weight"] = int64(100 - st.Weight)
		refs[canary].(map[string]any)["weight"] = int64(st.Weight)
		rule["backendRefs"] = refs
		if len(st.HeaderMatch) > 0 {
			headerRules = append(headerRules, httpRouteHeaderRule(rule, refs[canary].(map[string]any), st.HeaderMatch, i))
		}
		out = append(out, rule)
	}
	if !found {
		return fmt.Errorf("HTTPRoute %s: no rule has a backendRef to the stable Service %s; add one (the canary Service %s is added beside it)", obj.GetName(), t.StableService, t.CanaryService)
	}
	if n := len(headerRules) + len(out); n > maxHTTPRouteRules {
		return fmt.Errorf("HTTPRoute %s: the header route adds a rule in front of each of its %d rules to the stable Service %s, %d rules in all, more than the %d Gateway API allows; send the stable Service's traffic through fewer rules",
			obj.GetName(), len(headerRules), t.StableService, n, maxHTTPRouteRules)
	}
	return unstructured.SetNestedSlice(obj.Object, append(headerRules, out...), "spec", "rules")
}

func isServiceRef(m map[string]any) bool {
	if m == nil {
		return false
	}
	group, _ := m["group"].(string)
	kind, _ := m["kind"].(string)
	return group == "" && (kind == "" || kind == "Service")
}

// httpRouteHeaderRule is rule sending the requests that also carry the headers to the canary
// only.
func httpRouteHeaderRule(rule, canaryRef map[string]any, hm []policyv1alpha1.HeaderMatch, index int) map[string]any {
	out := runtimeCopy(rule)
	ref := runtimeCopy(canaryRef)
	ref["weight"] = int64(1)
	out["backendRefs"] = []any{ref}
	out["name"] = headerRuleName(rule["name"], index)
	withHeaders(out, hm)
	return out
}

// withHeaders adds the header matches to every match of an HTTPRoute rule (one empty match
// when it had none): matches are ORed, a match's conditions ANDed.
func withHeaders(rule map[string]any, hm []policyv1alpha1.HeaderMatch) {
	matches, _ := rule["matches"].([]any)
	if len(matches) == 0 {
		matches = []any{map[string]any{}}
	}
	for i, m := range matches {
		match, _ := m.(map[string]any)
		match = runtimeCopy(match)
		hs, _ := match["headers"].([]any)
		hs = append(hs, headerMatches(hm)...)
		match["headers"] = hs
		matches[i] = match
	}
	rule["matches"] = matches
}

// headerMatches are hm as HTTPRoute header matches (a prefix as a regular expression).
func headerMatches(hm []policyv1alpha1.HeaderMatch) []any {
	var out []any
	for _, h := range hm {
		switch {
		case h.Exact != nil:
			out = append(out, map[string]any{"type": "Exact", "name": h.Name, "value": *h.Exact})
		case h.Prefix != nil:
			out = append(out, map[string]any{"type": "RegularExpression", "name": h.Name, "value": "^" + regexp.QuoteMeta(*h.Prefix) + ".*"})
		case h.Regex != nil:
			out = append(out, map[string]any{"type": "RegularExpression", "name": h.Name, "value": *h.Regex})
		}
	}
	return out
}

func renderVirtualService(obj *unstructured.Unstructured, t *workv1alpha1.TrafficTargets, st State) error {
	routes, _, err := unstructured.NestedSlice(obj.Object, "spec", "http")
	if err != nil {
		return fmt.Errorf("VirtualService %s: spec.http: %w", obj.GetName(), err)
	}
	named := map[string]bool{}
	for _, n := range t.VirtualServiceRoutes {
		named[n] = true
	}
	var out, headerRoutes []any
	found := false
	for i, r := range routes {
		route, ok := r.(map[string]any)
		if !ok {
			return fmt.Errorf("VirtualService %s: spec.http[%d] is not an object", obj.GetName(), i)
		}
		name, _ := route["name"].(string)
		if strings.HasSuffix(name, headerRuleSuffix) {
			continue
		}
		dests, _ := route["route"].([]any)
		stable, canary := -1, -1
		for j, d := range dests {
			m, _ := d.(map[string]any)
			host, _, _ := unstructured.NestedString(m, "destination", "host")
			switch {
			case hostIs(host, t.StableService):
				stable = j
			case hostIs(host, t.CanaryService):
				canary = j
			}
		}
		if stable < 0 || (len(named) > 0 && !named[name]) {
			out = append(out, route)
			continue
		}
		found = true
		stableDest := dests[stable].(map[string]any)
		if canary < 0 {
			c := runtimeCopy(stableDest)
			host, _, _ := unstructured.NestedString(c, "destination", "host")
			_ = unstructured.SetNestedField(c, t.CanaryService+strings.TrimPrefix(host, t.StableService), "destination", "host")
			dests = append(dests, c)
			canary = len(dests) - 1
		}
		stableDest["weight"] = int64(100 - st.Weight)
		dests[canary].(map[string]any)["weight"] = int64(st.Weight)
		route["route"] = dests
		if len(st.HeaderMatch) > 0 {
			headerRoutes = append(headerRoutes, virtualServiceHeaderRoute(route, dests[canary].(map[string]any), st.HeaderMatch, i))
		}
		out = append(out, route)
	}
	if !found {
		what := "no http route"
		if len(named) > 0 {
			what = "none of the http routes " + strings.Join(t.VirtualServiceRoutes, ", ")
		}
		return fmt.Errorf("VirtualService %s: %s has a destination with the stable Service %s as host; add one (the canary Service %s is added beside it)", obj.GetName(), what, t.StableService, t.CanaryService)
	}
	return unstructured.SetNestedSlice(obj.Object, append(headerRoutes, out...), "spec", "http")
}

// hostIs says whether an Istio destination host names the Service (short or qualified name).
func hostIs(host, service string) bool {
	return service != "" && (host == service || strings.HasPrefix(host, service+"."))
}

func virtualServiceHeaderRoute(route, canaryDest map[string]any, hm []policyv1alpha1.HeaderMatch, index int) map[string]any {
	out := runtimeCopy(route)
	dest := runtimeCopy(canaryDest)
	dest["weight"] = int64(100)
	out["route"] = []any{dest}
	out["name"] = headerRuleName(route["name"], index)
	headers := map[string]any{}
	for _, h := range hm {
		switch {
		case h.Exact != nil:
			headers[h.Name] = map[string]any{"exact": *h.Exact}
		case h.Prefix != nil:
			headers[h.Name] = map[string]any{"prefix": *h.Prefix}
		case h.Regex != nil:
			headers[h.Name] = map[string]any{"regex": *h.Regex}
		}
	}
	matches, _ := out["match"].([]any)
	if len(matches) == 0 {
		matches = []any{map[string]any{}}
	}
	for i, m := range matches {
		match, _ := m.(map[string]any)
		match = runtimeCopy(match)
		hs, _ := match["headers"].(map[string]any)
		if hs == nil {
			hs = map[string]any{}
		}
		for k, v := range headers {
			hs[k] = v
		}
		match["headers"] = hs
		matches[i] = match
	}
	out["match"] = matches
	return out
}

// headerRuleName names the header rule put in front of a rule: after it, or by its index
// when it has no name, so two never share one.
func headerRuleName(name any, index int) string {
	if n, _ := name.(string); n != "" {
		return n + "-" + headerRuleSuffix
	}
	return fmt.Sprintf("rule%d-%s", index, headerRuleSuffix)
}

func runtimeCopy(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

// Split is the traffic split a route sends: the canary's weight in percent of the first rule
// that sends to both Services, and whether a header route is in front.
type Split struct {
	Canary int32
	Header bool
}

func (s Split) String() string {
	out := fmt.Sprintf("stable %d%% / canary %d%%", 100-s.Canary, s.Canary)
	if s.Header {
		out += " + header route"
	}
	return out
}

// Read reads the split obj (an HTTPRoute or VirtualService as rendered or as found in a member)
// sends; ok is false when obj does not route to the stable Service.
func Read(obj *unstructured.Unstructured, t *workv1alpha1.TrafficTargets) (Split, bool) {
	var split Split
	list, key, weights := "rules", "backendRefs", func(m map[string]any) (string, bool) {
		name, _ := m["name"].(string)
		return name, isServiceRef(m)
	}
	if obj.GroupVersionKind().Group == VirtualServiceGroup {
		list, key, weights = "http", "route", func(m map[string]any) (string, bool) {
			host, _, _ := unstructured.NestedString(m, "destination", "host")
			switch {
			case hostIs(host, t.StableService):
				return t.StableService, true
			case hostIs(host, t.CanaryService):
				return t.CanaryService, true
			}
			return host, false
		}
	}
	items, _, _ := unstructured.NestedSlice(obj.Object, "spec", list)
	found := false
	for _, it := range items {
		m, _ := it.(map[string]any)
		name, _ := m["name"].(string)
		if strings.HasSuffix(name, headerRuleSuffix) {
			split.Header = true
			continue
		}
		if found || (list == "http" && len(t.VirtualServiceRoutes) > 0 && !slices.Contains(t.VirtualServiceRoutes, name)) {
			continue
		}
		refs, _ := m[key].([]any)
		var stable, canary *int64
		for _, r := range refs {
			ref, _ := r.(map[string]any)
			name, svc := weights(ref)
			if !svc {
				continue
			}
			w, ok := ref["weight"].(int64)
			if !ok {
				w = 1 // Gateway API's default weight; Istio's single destination is 100
				if f, isFloat := ref["weight"].(float64); isFloat {
					w = int64(f)
				}
			}
			switch name {
			case t.StableService:
				stable = &w
			case t.CanaryService:
				canary = &w
			}
		}
		if stable == nil {
			continue
		}
		found = true
		if canary != nil && *stable+*canary > 0 {
			split.Canary = int32(*canary * 100 / (*stable + *canary))
		}
	}
	return split, found
}
