package main

import (
	"strings"
	"testing"
)

// The API reference names every field by its path, with type, required, default, enum,
// validation and description from the CRD's schema.
func TestAPIReferenceRows(t *testing.T) {
	files, err := apiReference("../../config/crd/bases")
	if err != nil {
		t.Fatal(err)
	}
	page := files["policy.flotilla.dev_propagationpolicies.md"]
	for _, want := range []string{
		"- **apiVersion:** `policy.flotilla.dev/v1alpha1` (stored)",
		"- **scope:** Namespaced",
		"| `spec.rollout.waves[].gates.analysis.templates[].clusterScope` | boolean |  |  |  | clusterScope names a ClusterAnalysisTemplate instead. |",
		"| `spec.failover.application.purgeMode` | string |  | `\"Graceful\"` | one of `\"Graceful\"`, `\"Immediately\"`, `\"Never\"` |",
		"| `spec.resourceSelectors` | []object | yes |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the PropagationPolicy page lacks %q", want)
		}
	}
	if !strings.Contains(files["README.md"], "[PropagationPolicy](policy.flotilla.dev_propagationpolicies.md)") {
		t.Error("the index does not link the PropagationPolicy page")
	}
}

// The CLI reference has a page per command, and the same bytes however often it is built: a
// default that depends on the machine is written as such.
func TestCLIReferenceIsDeterministic(t *testing.T) {
	a, err := cliReference()
	if err != nil {
		t.Fatal(err)
	}
	b, err := cliReference()
	if err != nil {
		t.Fatal(err)
	}
	for name, page := range a {
		if b[name] != page {
			t.Errorf("%s differs between two runs", name)
		}
	}
	for _, name := range []string{"flotilla.md", "flotilla_release_promote.md", "flotilla_up.md", "README.md"} {
		if a[name] == "" {
			t.Errorf("no page %s", name)
		}
	}
	if !strings.Contains(a["flotilla_controller-manager.md"], "| `--lua-max-concurrent-calls` | int | "+machineDependent+" |") {
		t.Error("the GOMAXPROCS-derived default of --lua-max-concurrent-calls is not marked machine-dependent")
	}
}
