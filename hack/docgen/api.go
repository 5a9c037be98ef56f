package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// apiReference returns one page per CRD in dir, named GROUP_PLURAL.md, and README.md, the
// index by group.
func apiReference(dir string) (map[string]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no CRD YAML in %s", dir)
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		crds = append(crds, crd)
	}
	sort.Slice(crds, func(i, j int) bool {
		a, b := crds[i].Spec, crds[j].Spec
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Names.Kind < b.Names.Kind
	})
	files := map[string]string{}
	var index bytes.Buffer
	index.WriteString("# API reference\n\n")
	index.WriteString("Generated from the CRDs in config/crd/bases by `make docs` (`go run ./hack/docgen`); do not edit.\n")
	index.WriteString("The CRDs are generated from the Go types in api/ by `make generate`.\n\n")
	index.WriteString("| kind | group/version | scope | short names |\n|---|---|---|---|\n")
	for _, crd := range crds {
		name := crd.Spec.Group + "_" + crd.Spec.Names.Plural + ".md"
		files[name] = kindPage(crd)
		var versions []string
		for _, v := range crd.Spec.Versions {
			if v.Served {
				versions = append(versions, crd.Spec.Group+"/"+v.Name)
			}
		}
		fmt.Fprintf(&index, "| [%s](%s) | %s | %s | %s |\n", crd.Spec.Names.Kind, name, strings.Join(versions, ", "), crd.Spec.Scope, strings.Join(crd.Spec.Names.ShortNames, ", "))
	}
	files["README.md"] = index.String()
	return files, nil
}

func kindPage(crd apiextensionsv1.CustomResourceDefinition) string {
	var b bytes.Buffer
	s := crd.Spec
	fmt.Fprintf(&b, "# %s\n\n", s.Names.Kind)
	for _, v := range s.Versions {
		if !v.Served {
			continue
		}
		fmt.Fprintf(&b, "- **apiVersion:** `%s/%s`%s\n", s.Group, v.Name, map[bool]string{true: " (stored)"}[v.Storage])
	}
	fmt.Fprintf(&b, "- **scope:** %s\n", s.Scope)
	fmt.Fprintf(&b, "- **plural:** `%s`", s.Names.Plural)
	if len(s.Names.ShortNames) > 0 {
		fmt.Fprintf(&b, "; **short names:** %s", strings.Join(s.Names.ShortNames, ", "))
	}
	if len(s.Names.Categories) > 0 {
		fmt.Fprintf(&b, "; **categories:** %s", strings.Join(s.Names.Categories, ", "))
	}
	b.WriteString("\n")
	for _, v := range s.Versions {
		if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		if v.Subresources != nil {
			var subs []string
			if v.Subresources.Status != nil {
				subs = append(subs, "status")
			}
			if v.Subresources.Scale != nil {
				subs = append(subs, "scale")
			}
			fmt.Fprintf(&b, "- **subresources:** %s\n", strings.Join(subs, ", "))
		}
		root := v.Schema.OpenAPIV3Schema
		if root.Description != "" {
			fmt.Fprintf(&b, "\n%s\n", strings.TrimSpace(root.Description))
		}
		if len(v.AdditionalPrinterColumns) > 0 {
			b.WriteString("\n## Printer columns\n\n| column | type | JSONPath | shown |\n|---|---|---|---|\n")
			for _, c := range v.AdditionalPrinterColumns {
				shown := "always"
				if c.Priority > 0 {
					shown = "-o wide"
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(c.Name), c.Type, code(c.JSONPath), shown)
			}
		}
		if len(s.Versions) > 1 {
			fmt.Fprintf(&b, "\n## Fields of %s\n\n", v.Name)
		} else {
			b.WriteString("\n## Fields\n\n")
		}
		b.WriteString("| field | type | required | default | validation | description |\n|---|---|---|---|---|---|\n")
		var rows []string
		for _, name := range sortedKeys(root.Properties) {
			if name == "apiVersion" || name == "kind" || name == "metadata" {
				continue
			}
			p := root.Properties[name]
			fields(&rows, name, &p, contains(root.Required, name))
		}
		b.WriteString(strings.Join(rows, ""))
	}
	b.WriteString("\nAll kinds: [index](README.md).\n")
	return b.String()
}

// fields appends a row for the field at path and for every field below it.
func fields(rows *[]string, path string, p *apiextensionsv1.JSONSchemaProps, required bool) {
	req := ""
	if required {
		req = "yes"
	}
	def := ""
	if p.Default != nil {
		def = code(string(p.Default.Raw))
	}
	*rows = append(*rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s |\n", code(path), cell(typeOf(p)), req, def, validation(p), cell(p.Description)))
	switch {
	case p.Type == "object" && len(p.Properties) > 0:
		for _, name := range sortedKeys(p.Properties) {
			c := p.Properties[name]
			fields(rows, path+"."+name, &c, contains(p.Required, name))
		}
	case p.Type == "array" && p.Items != nil && p.Items.Schema != nil:
		it := p.Items.Schema
		if it.Type == "object" && len(it.Properties) > 0 {
			for _, name := range sortedKeys(it.Properties) {
				c := it.Properties[name]
				fields(rows, path+"[]."+name, &c, contains(it.Required, name))
			}
		} else if v := itemValidation(it); v != "" {
			*rows = append(*rows, fmt.Sprintf("| %s | %s |  |  | %s | each item |\n", code(path+"[]"), cell(typeOf(it)), v))
		}
	case p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil:
		v := p.AdditionalProperties.Schema
		if v.Type == "object" && len(v.Properties) > 0 {
			for _, name := range sortedKeys(v.Properties) {
				c := v.Properties[name]
				fields(rows, path+".KEY."+name, &c, contains(v.Required, name))
			}
		}
	}
}

func typeOf(p *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case p.XIntOrString:
		return "int or string"
	case p.Type == "array" && p.Items != nil && p.Items.Schema != nil:
		return "[]" + typeOf(p.Items.Schema)
	case p.Type == "object" && p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil:
		return "map[string]" + typeOf(p.AdditionalProperties.Schema)
	case p.Type == "integer" && p.Format != "":
		return p.Format
	case p.Type == "string" && p.Format != "":
		return "string (" + p.Format + ")"
	case p.Type == "" && p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields:
		return "any"
	case p.Type == "object" && p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields:
		return "object (any fields)"
	case p.XEmbeddedResource:
		return "object (a Kubernetes object)"
	}
	if p.Type == "" {
		return "any"
	}
	return p.Type
}

// validation lists the schema's constraints on this field, in a fixed order.
func validation(p *apiextensionsv1.JSONSchemaProps) string {
	var out []string
	if len(p.Enum) > 0 {
		var vals []string
		for _, e := range p.Enum {
			vals = append(vals, code(string(e.Raw)))
		}
		out = append(out, "one of "+strings.Join(vals, ", "))
	}
	out = append(out, bounds(p)...)
	if p.XListType != nil {
		lt := "list type " + *p.XListType
		if len(p.XListMapKeys) > 0 {
			lt += " (keys " + strings.Join(p.XListMapKeys, ", ") + ")"
		}
		out = append(out, lt)
	}
	if p.XMapType != nil {
		out = append(out, "map type "+*p.XMapType)
	}
	if p.Items != nil && p.Items.Schema != nil && (p.Items.Schema.Type != "object" || len(p.Items.Schema.Properties) == 0) {
		for _, v := range bounds(p.Items.Schema) {
			out = append(out, "each item: "+v)
		}
	}
	for _, r := range p.XValidations {
		msg := r.Message
		if msg == "" && r.MessageExpression != "" {
			msg = "message from " + code(r.MessageExpression)
		}
		out = append(out, "rule "+code(r.Rule)+": "+cell(msg))
	}
	return strings.Join(out, "; ")
}

func itemValidation(p *apiextensionsv1.JSONSchemaProps) string {
	if len(p.XValidations) == 0 && len(p.Enum) == 0 {
		return ""
	}
	return validation(p)
}

func bounds(p *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	num := func(label string, f *float64, exclusive bool) {
		if f != nil {
			s := strconv.FormatFloat(*f, 'f', -1, 64)
			if exclusive {
				label += " (exclusive)"
			}
			out = append(out, label+" "+s)
		}
	}
	i := func(label string, v *int64) {
		if v != nil {
			out = append(out, label+" "+strconv.FormatInt(*v, 10))
		}
	}
	num("minimum", p.Minimum, p.ExclusiveMinimum)
	num("maximum", p.Maximum, p.ExclusiveMaximum)
	i("min length", p.MinLength)
	i("max length", p.MaxLength)
	i("min items", p.MinItems)
	i("max items", p.MaxItems)
	i("min properties", p.MinProperties)
	i("max properties", p.MaxProperties)
	if p.Pattern != "" {
		out = append(out, "pattern "+code(p.Pattern))
	}
	if p.UniqueItems {
		out = append(out, "unique items")
	}
	return out
}

func sortedKeys(m map[string]apiextensionsv1.JSONSchemaProps) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
