package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// exampleMarker, on the line just before a ```yaml fence in docs/*.md, marks the block as an
// example a reader may apply as it stands (docs/README.md, "Tested examples"); fleetMarker
// marks a fleet file for `flotilla up --fleet`, which no API server reads.
const (
	exampleMarker = "<!-- example: tested -->"
	fleetMarker   = "<!-- example: fleet -->"
)

// docObject is one object of a marked block: where it starts in which file, and its YAML.
type docObject struct {
	file string // relative to the repository, e.g. docs/releases.md
	line int    // 1-based line of the object's first line
	yaml string
}

func (o docObject) String() string { return fmt.Sprintf("%s:%d", o.file, o.line) }

// docExamples returns the objects of every block marked with marker in the markdown files in
// dir, in file and line order, and the number of such blocks per file; a marker not followed by
// a ```yaml fence, or a fence never closed, is an error.
func docExamples(dir, marker string) ([]docObject, map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(files)
	var objs []docObject
	blocks := map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		name := filepath.ToSlash(filepath.Join("docs", filepath.Base(f)))
		blocks[name] += 0
		var lines []string
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		for i := 0; i < len(lines); i++ {
			if strings.TrimRight(lines[i], " \t") != marker { // at the start of a line: an indented one is quoted, not marked
				continue
			}
			if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```yaml" {
				return nil, nil, fmt.Errorf("%s:%d: %s must be followed by a ```yaml fence", name, i+1, marker)
			}
			blocks[name]++
			start := i + 2 // index of the block's first line
			end := start
			for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
				end++
			}
			if end == len(lines) {
				return nil, nil, fmt.Errorf("%s:%d: the example's ```yaml fence is never closed", name, i+2)
			}
			docStart, doc := start, []string{}
			flush := func() {
				text := strings.Join(doc, "\n")
				if strings.TrimSpace(stripComments(text)) != "" {
					objs = append(objs, docObject{file: name, line: docStart + 1, yaml: text})
				}
			}
			for j := start; j < end; j++ {
				if strings.TrimSpace(lines[j]) == "---" {
					flush()
					docStart, doc = j+1, nil
					continue
				}
				doc = append(doc, lines[j])
			}
			flush()
			i = end
		}
	}
	return objs, blocks, nil
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// guidePages must each carry at least one tested example.
var guidePages = []string{"docs/concepts.md", "docs/install.md", "docs/placement.md", "docs/releases.md", "docs/drift.md",
	"docs/tenancy.md", "docs/inventory-and-history.md", "docs/dashboard.md"}

// Given the guides in docs/, when every object of every block marked as a tested example is
// applied to the control plane (server-side apply, dry run), then the API server accepts each
// one as it stands: a field that does not exist, a value a CEL rule refuses or a kind the
// control plane does not serve fails here, naming the file and line of the object.
func TestDocsExamplesAreAccepted(t *testing.T) {
	ctx := context.Background()
	objs, blocks, err := docExamples(filepath.Join("..", "..", "docs"), exampleMarker)
	if err != nil {
		t.Fatal(err)
	}
	fleets, _, err := docExamples(filepath.Join("..", "..", "docs"), fleetMarker)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fleets {
		if _, err := localfleet.ParseFleet([]byte(f.yaml)); err != nil {
			t.Errorf("%s: the fleet file is refused by flotilla up: %v", f, err)
		}
	}
	for _, page := range guidePages {
		if blocks[page] == 0 {
			t.Errorf("%s has no block marked %s: each guide carries a complete, tested example", page, exampleMarker)
		}
	}

	// Given: the namespaces the examples write into exist (a dry run does not create them).
	// Those made here are deleted at the end; one that existed is left alone.
	var parsed []*unstructured.Unstructured
	namespaces := map[string]bool{}
	for _, o := range objs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(o.yaml), &u.Object); err != nil {
			t.Fatalf("%s: not YAML: %v", o, err)
		}
		if u.GetNamespace() != "" {
			namespaces[u.GetNamespace()] = true
		}
		if u.GetKind() == "Namespace" && u.GetAPIVersion() == "v1" {
			namespaces[u.GetName()] = true
		}
		parsed = append(parsed, u)
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range namespaces {
			if !yield(n) {
				return
			}
		}
	}) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"flotilla.dev/docs-examples": "true"}}}
		switch err := cp.Create(ctx, ns); {
		case err == nil:
			t.Cleanup(func() { _ = cp.Delete(context.Background(), ns) })
		case apierrors.IsAlreadyExists(err):
		default:
			t.Fatalf("creating namespace %s for the examples: %v", name, err)
		}
	}

	// When / Then: each object is accepted by a server-side dry-run apply.
	applied := 0
	for i, o := range objs {
		u := parsed[i]
		err := cp.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.DryRunAll, client.ForceOwnership, client.FieldOwner("flotilla-docs-examples"))
		if err != nil {
			t.Errorf("%s: %s %s is refused by the control plane: %v", o, u.GetKind(), client.ObjectKeyFromObject(u), err)
			continue
		}
		applied++
	}
	t.Logf("applied %d objects of the docs' examples (dry run); %d fleet files parsed", applied, len(fleets))
}
