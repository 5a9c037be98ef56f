package apideps

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// forbidden are the import path prefixes no package of the api module may depend on.
var forbidden = []string{
	"sigs.k8s.io/controller-runtime",
	"github.com/go-git/",
	"github.com/jackc/pgx",
	"modernc.org/sqlite",
	"github.com/mattn/go-sqlite3",
	"github.com/yuin/gopher-lua",
	"github.com/chromedp/",
	"github.com/flotilla-dev/flotilla/internal",
}

// The API types depend on apimachinery and k8s.io/api only; the generated apply configurations
// add client-go's apply configurations of meta/v1 (which bring client-go's rest and discovery),
// and nothing of the controller-manager either.
func TestAPIModuleDependsOnNothingOfTheControllerManager(t *testing.T) {
	apiDir, err := filepath.Abs(filepath.Join("..", "..", "api"))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := packages(t, apiDir)
	var types, applyConfigs []string
	for _, p := range pkgs {
		switch {
		case strings.Contains(p, "/internal"): // not importable from outside; reached through the others
		case strings.Contains(p, "/applyconfiguration"):
			applyConfigs = append(applyConfigs, p)
		default:
			types = append(types, p)
		}
	}
	if len(types) == 0 || len(applyConfigs) == 0 {
		t.Fatalf("api/ lists %d type packages and %d apply configuration packages; want some of each:\n%s", len(types), len(applyConfigs), strings.Join(pkgs, "\n"))
	}
	for _, tc := range []struct {
		name    string
		imports []string
		also    []string // forbidden here besides the common list
	}{
		{"types", types, []string{"k8s.io/client-go/"}},
		{"apply configurations", applyConfigs, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := consumer(t, apiDir, tc.imports)
			deps := goList(t, dir, "-deps", "./...")
			if !slices.Contains(deps, "k8s.io/apimachinery/pkg/apis/meta/v1") || !slices.Contains(deps, tc.imports[0]) {
				t.Fatalf("go list -deps did not list the api packages and apimachinery; it listed:\n%s", strings.Join(deps, "\n"))
			}
			for _, b := range append(slices.Clone(forbidden), tc.also...) {
				var found []string
				for _, d := range deps {
					if strings.HasPrefix(d, b) {
						found = append(found, d)
					}
				}
				if len(found) > 0 {
					t.Errorf("a program importing only the api module's %s builds %d packages of %s, such as %s: that is not for api/ (who imports it? `cd api && go mod why %s`)", tc.name, len(found), b, found[0], found[0])
				}
			}
		})
	}
}

// packages returns the import paths of the api module's packages: each directory with a
// non-test Go file. (Not `go list` in api/: with -mod=mod it would tidy api/go.mod to fit a
// forbidden import, and this test must leave the tree alone.)
func packages(t *testing.T, apiDir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(apiDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, err := filepath.Rel(apiDir, filepath.Dir(path))
		if err != nil {
			return err
		}
		p := "github.com/flotilla-dev/flotilla/api"
		if rel != "." {
			p += "/" + filepath.ToSlash(rel)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// consumer writes a module in a temporary directory whose main package imports pkgs, with
// the api module replaced by apiDir (its go.sum copied, so the module cache is enough).
func consumer(t *testing.T, apiDir string, pkgs []string) string {
	t.Helper()
	dir := t.TempDir()
	gomod := fmt.Sprintf("module example.com/apiconsumer\n\ngo 1.26.0\n\nrequire github.com/flotilla-dev/flotilla/api v0.0.0\n\nreplace github.com/flotilla-dev/flotilla/api => %s\n", apiDir)
	var main strings.Builder
	main.WriteString("package main\n\nimport (\n")
	for _, p := range pkgs {
		fmt.Fprintf(&main, "\t_ %q\n", p)
	}
	main.WriteString(")\n\nfunc main() {}\n")
	sum, err := os.ReadFile(filepath.Join(apiDir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(main.String())} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goList runs `go list args...` in dir with modules resolved as the Makefile does (GOPROXY
// and GONOSUMDB from the environment) and returns its lines.
func goList(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the api module's dependencies: %v", err)
	}
	cmd := exec.Command(goBin, append([]string{"list"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr)
	}
	return strings.Fields(string(out))
}
