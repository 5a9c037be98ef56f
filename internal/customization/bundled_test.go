package customization_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/internal/customization"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/luavm"
)

var update = flag.Bool("update", false, "rewrite the .golden files from the current results")

// goldenCase is one testdata/<customization>/<case>.yaml: an operation and its inputs.
type goldenCase struct {
	Operation   string         `json:"operation"`
	Desired     map[string]any `json:"desired,omitempty"`
	Observed    map[string]any `json:"observed,omitempty"`
	StatusItems []any          `json:"statusItems,omitempty"`
	Replicas    int32          `json:"replicas,omitempty"`
}

// TestBundledGolden runs every case of every bundled customization and compares the result
// with its .golden file; every bundled customization has a case for each operation it scripts.
func TestBundledGolden(t *testing.T) {
	bundled, err := customization.Bundled()
	if err != nil {
		t.Fatal(err)
	}
	reg := interpret.NewRegistry(luavm.Limits{})
	for i := range bundled {
		ric := &bundled[i]
		t.Run(ric.Name, func(t *testing.T) {
			compiled, err := reg.Compile(ric)
			if err != nil {
				t.Fatalf("compile: %s", customization.Describe(err))
			}
			in := reg.With(compiled)
			cases, _ := filepath.Glob(filepath.Join("testdata", ric.Name, "*.yaml"))
			// Coverage is read from the case files, so it holds whichever cases -run selects.
			covered := map[string]bool{}
			for _, file := range cases {
				if op, ok := interpret.OperationByName(readCase(t, file).Operation); ok {
					covered[op.Name] = true
				}
			}
			for _, op := range interpret.Operations {
				if compiled.Has(op.Name) && !covered[op.Name] {
					t.Errorf("no golden case in testdata/%s for operation %s", ric.Name, op.Name)
				}
			}
			for _, file := range cases {
				name := strings.TrimSuffix(filepath.Base(file), ".yaml")
				t.Run(name, func(t *testing.T) {
					c := readCase(t, file)
					input := interpret.Input{Replicas: c.Replicas, Desired: object(c.Desired), Observed: object(c.Observed)}
					var err error
					if input.StatusItems, err = interpret.ParseStatusItems(c.StatusItems); err != nil {
						t.Fatal(err)
					}
					got, err := interpret.Run(in, c.Operation, input)
					if err != nil {
						t.Fatalf("%s: %v", c.Operation, err)
					}
					compareGolden(t, strings.TrimSuffix(file, ".yaml")+".golden", got)
				})
			}
		})
	}
}

func readCase(t *testing.T, file string) goldenCase {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var c goldenCase
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return c
}

func object(m map[string]any) *unstructured.Unstructured {
	if m == nil {
		return nil
	}
	return &unstructured.Unstructured{Object: wholeNumbers(m).(map[string]any)}
}

// wholeNumbers turns YAML's float64 whole numbers into int64, as the API server gives them.
func wholeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = wholeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = wholeNumbers(e)
		}
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
	}
	return v
}

func compareGolden(t *testing.T, file string, got any) {
	t.Helper()
	out, err := yaml.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(file, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it, then review it)", err)
	}
	if diff := cmp.Diff(string(want), string(out)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", file, diff)
	}
}
