package security

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"sigs.k8s.io/yaml"
)

// userWritten are the kinds people write (a team's contributors or the platform); the others
// (bindings, Works, AnalysisRuns) are Flotilla's own.
var userWritten = []string{
	"apps.flotilla.dev_applications.yaml",
	"apps.flotilla.dev_clustertargetpolicies.yaml",
	"apps.flotilla.dev_targetpolicies.yaml",
	"cluster.flotilla.dev_clusters.yaml",
	"config.flotilla.dev_resourceinterpretercustomizations.yaml",
	"policy.flotilla.dev_clusteroverridepolicies.yaml",
	"policy.flotilla.dev_clusterpropagationpolicies.yaml",
	"policy.flotilla.dev_overridepolicies.yaml",
	"policy.flotilla.dev_propagationpolicies.yaml",
	"rollout.flotilla.dev_analysistemplates.yaml",
	"rollout.flotilla.dev_changewindows.yaml",
	"rollout.flotilla.dev_clusterchangewindows.yaml",
	"rollout.flotilla.dev_clusteranalysistemplates.yaml",
	"rollout.flotilla.dev_releases.yaml",
	"tenancy.flotilla.dev_teams.yaml",
}

// Everything Flotilla does per item of a list or map a user writes (a selector per cluster, an
// override per rendered Work, a metric per measurement) multiplies: every list in the spec of a
// kind people write has maxItems and every map maxProperties, so admission bounds the fan-out
// before any controller sees it. Schemaless values (a Job spec, a JSON patch value) are bounded
// by the request size only and are skipped.
func TestEveryUserWrittenKindBoundsItsListsAndMaps(t *testing.T) {
	for _, file := range userWritten {
		data, err := os.ReadFile(filepath.Join("..", "crd", "bases", file))
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Versions []struct {
					Name   string `json:"name"`
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(crd.Spec.Versions) == 0 {
			t.Fatalf("%s: no versions", file)
		}
		for _, v := range crd.Spec.Versions {
			props, _ := v.Schema.OpenAPIV3Schema["properties"].(map[string]any)
			spec, ok := props["spec"].(map[string]any)
			if !ok {
				t.Errorf("%s %s: no spec schema", file, v.Name)
				continue
			}
			for _, p := range unbounded(spec, "spec") {
				t.Errorf("%s %s: %s", file, v.Name, p)
			}
		}
	}
}

// unbounded lists the lists without maxItems and maps without maxProperties under s.
func unbounded(s map[string]any, path string) []string {
	if s["x-kubernetes-preserve-unknown-fields"] == true {
		return nil
	}
	var out []string
	switch s["type"] {
	case "array":
		if _, ok := s["maxItems"]; !ok {
			out = append(out, path+" is a list without maxItems")
		}
		if items, ok := s["items"].(map[string]any); ok {
			out = append(out, unbounded(items, path+"[]")...)
		}
	case "object":
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			if _, ok := s["maxProperties"]; !ok {
				out = append(out, path+" is a map without maxProperties")
			}
			out = append(out, unbounded(ap, path+"{}")...)
		}
	}
	props, _ := s["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if p, ok := props[n].(map[string]any); ok {
			out = append(out, unbounded(p, path+"."+n)...)
		}
	}
	return out
}
