package render

import (
	"encoding/json"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

// Override applies overriders to a rendered manifest, rule by rule, each rule in the order
// image, command, args, env, labels, annotations, plaintext (JSON patch). For image
// components, add sets a component that is empty and replace sets it always; remove clears it.
func Override(obj *unstructured.Unstructured, rules []policyv1alpha1.Overriders) error {
	for _, o := range rules {
		for _, io := range o.ImageOverrider {
			if err := eachContainer(obj, io.ContainerName, func(c map[string]any) error {
				img, _ := c["image"].(string)
				c["image"] = overrideImage(img, io)
				return nil
			}); err != nil {
				return err
			}
		}
		for _, field := range []struct {
			name string
			ovs  []policyv1alpha1.CommandArgsOverrider
		}{{"command", o.CommandOverrider}, {"args", o.ArgsOverrider}} {
			for _, ov := range field.ovs {
				if err := eachContainer(obj, ov.ContainerName, func(c map[string]any) error {
					c[field.name] = overrideList(toStrings(c[field.name]), ov)
					return nil
				}); err != nil {
					return err
				}
			}
		}
		for _, ov := range o.EnvOverrider {
			if err := eachContainer(obj, ov.ContainerName, func(c map[string]any) error {
				c["env"] = overrideEnv(c["env"], ov)
				return nil
			}); err != nil {
				return err
			}
		}
		for _, ov := range o.LabelsOverrider {
			obj.SetLabels(overrideMap(obj.GetLabels(), ov))
		}
		for _, ov := range o.AnnotationsOverrider {
			obj.SetAnnotations(overrideMap(obj.GetAnnotations(), ov))
		}
		if len(o.Plaintext) > 0 {
			if err := applyPlaintext(obj, o.Plaintext); err != nil {
				return err
			}
		}
	}
	return nil
}

// containersPath is where a kind keeps its containers.
func containersPath(kind string) []string {
	switch kind {
	case "Pod":
		return []string{"spec", "containers"}
	case "CronJob":
		return []string{"spec", "jobTemplate", "spec", "template", "spec", "containers"}
	}
	return []string{"spec", "template", "spec", "containers"}
}

func eachContainer(obj *unstructured.Unstructured, name string, fn func(map[string]any) error) error {
	path := containersPath(obj.GetKind())
	list, found, err := unstructured.NestedSlice(obj.Object, path...)
	if err != nil || !found {
		return fmt.Errorf("%s %s has no containers at %s: container overriders do not apply to it", obj.GetKind(), obj.GetName(), strings.Join(path, "."))
	}
	matched := false
	for i, item := range list {
		c, ok := item.(map[string]any)
		if !ok || (name != "" && c["name"] != name) {
			continue
		}
		matched = true
		if err := fn(c); err != nil {
			return err
		}
		list[i] = c
	}
	if name != "" && !matched {
		return fmt.Errorf("%s %s has no container named %q", obj.GetKind(), obj.GetName(), name)
	}
	return unstructured.SetNestedSlice(obj.Object, list, path...)
}

type imageRef struct{ registry, repository, tag, digest string }

func parseImage(s string) imageRef {
	var r imageRef
	s, r.digest, _ = strings.Cut(s, "@")
	if i := strings.LastIndex(s, ":"); i > strings.LastIndex(s, "/") {
		s, r.tag = s[:i], s[i+1:]
	}
	if first, rest, ok := strings.Cut(s, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		r.registry, s = first, rest
	}
	r.repository = s
	return r
}

func (r imageRef) String() string {
	s := r.repository
	if r.registry != "" {
		s = r.registry + "/" + s
	}
	if r.tag != "" {
		s += ":" + r.tag
	}
	if r.digest != "" {
		s += "@" + r.digest
	}
	return s
}

func overrideImage(image string, o policyv1alpha1.ImageOverrider) string {
	r := parseImage(image)
	var part *string
	switch o.Component {
	case "Registry":
		part = &r.registry
	case "Repository":
		part = &r.repository
	default:
		part = &r.tag
	}
	switch o.Operator {
	case policyv1alpha1.OverrideAdd:
		if *part == "" {
			*part = o.Value
		}
	case policyv1alpha1.OverrideReplace:
		*part = o.Value
	case policyv1alpha1.OverrideRemove:
		*part = ""
	}
	return r.String()
}

func toStrings(v any) []string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, i := range items {
		if s, ok := i.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func overrideList(cur []string, o policyv1alpha1.CommandArgsOverrider) []any {
	var out []string
	if o.Operator == policyv1alpha1.OverrideRemove {
		drop := map[string]bool{}
		for _, v := range o.Value {
			drop[v] = true
		}
		for _, c := range cur {
			if !drop[c] {
				out = append(out, c)
			}
		}
	} else {
		out = append(cur, o.Value...)
	}
	res := make([]any, len(out))
	for i, s := range out {
		res[i] = s
	}
	return res
}

func overrideEnv(cur any, o policyv1alpha1.EnvOverrider) []any {
	list, _ := cur.([]any)
	index := map[string]int{}
	for i, e := range list {
		if m, ok := e.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				index[n] = i
			}
		}
	}
	drop := map[int]bool{}
	for _, v := range o.Value {
		i, exists := index[v.Name]
		switch {
		case o.Operator == policyv1alpha1.OverrideRemove:
			if exists {
				drop[i] = true
			}
		case exists:
			list[i] = map[string]any{"name": v.Name, "value": v.Value}
		default:
			index[v.Name] = len(list)
			list = append(list, map[string]any{"name": v.Name, "value": v.Value})
		}
	}
	out := make([]any, 0, len(list))
	for i, e := range list {
		if !drop[i] {
			out = append(out, e)
		}
	}
	return out
}

func overrideMap(cur map[string]string, o policyv1alpha1.LabelAnnotationOverrider) map[string]string {
	if cur == nil {
		cur = map[string]string{}
	}
	for k, v := range o.Value {
		if o.Operator == policyv1alpha1.OverrideRemove {
			delete(cur, k)
		} else {
			cur[k] = v
		}
	}
	return cur
}

func applyPlaintext(obj *unstructured.Unstructured, ops []policyv1alpha1.PlaintextOverrider) error {
	patch := make([]map[string]any, len(ops))
	for i, op := range ops {
		if op.Operator != policyv1alpha1.OverrideRemove && (op.Value == nil || len(op.Value.Raw) == 0) {
			return fmt.Errorf("plaintext[%d] (%s %s): add and replace need a value", i, op.Operator, op.Path)
		}
		p := map[string]any{"op": string(op.Operator), "path": op.Path}
		if op.Value != nil {
			p["value"] = json.RawMessage(op.Value.Raw)
		}
		patch[i] = p
	}
	patchJSON, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	decoded, err := jsonpatch.DecodePatch(patchJSON)
	if err != nil {
		return fmt.Errorf("plaintext overrider: %w", err)
	}
	doc, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	out, err := decoded.Apply(doc)
	if err != nil {
		return fmt.Errorf("plaintext overrider on %s %s: %w (check each path exists in the object)", obj.GetKind(), obj.GetName(), err)
	}
	return obj.UnmarshalJSON(out)
}
