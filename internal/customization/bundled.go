package customization

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
)

// bundledFS holds the customizations shipped in the binary, one file each, named as the object.
//
//go:embed bundled/*.yaml
var bundledFS embed.FS

// Bundled returns the shipped customizations sorted by name.
func Bundled() ([]configv1alpha1.ResourceInterpreterCustomization, error) {
	entries, err := fs.ReadDir(bundledFS, "bundled")
	if err != nil {
		return nil, err
	}
	var out []configv1alpha1.ResourceInterpreterCustomization
	for _, e := range entries {
		data, err := bundledFS.ReadFile(path.Join("bundled", e.Name()))
		if err != nil {
			return nil, err
		}
		ric, err := Parse(data)
		if err != nil {
			return nil, fmt.Errorf("bundled %s: %w", e.Name(), err)
		}
		if want := strings.TrimSuffix(e.Name(), ".yaml"); ric.Name != want {
			return nil, fmt.Errorf("bundled %s: metadata.name is %q, want %q", e.Name(), ric.Name, want)
		}
		out = append(out, *ric)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Parse reads one ResourceInterpreterCustomization from YAML or JSON, strictly: a misspelt
// field is an error that names it, not a script silently left out.
func Parse(data []byte) (*configv1alpha1.ResourceInterpreterCustomization, error) {
	ric := &configv1alpha1.ResourceInterpreterCustomization{}
	if err := yaml.UnmarshalStrict(data, ric); err != nil {
		return nil, fmt.Errorf("not a ResourceInterpreterCustomization: %w", err)
	}
	if ric.APIVersion != configv1alpha1.GroupVersion.String() || ric.Kind != "ResourceInterpreterCustomization" {
		return nil, fmt.Errorf("apiVersion/kind is %s %s, want %s ResourceInterpreterCustomization (a Karmada customization ports by changing apiVersion to %[3]s)",
			ric.APIVersion, ric.Kind, configv1alpha1.GroupVersion.String())
	}
	if ric.Spec.Target.APIVersion == "" || ric.Spec.Target.Kind == "" {
		return nil, fmt.Errorf("spec.target.apiVersion and spec.target.kind are required")
	}
	return ric, nil
}
