package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A module whose controller imports another controller, and whose Reconcile is too long,
// is reported on both counts; the wiring package may import both.
func TestCheckReportsControllerEdgesAndLongReconciles(t *testing.T) {
	root := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/fleet\n\ngo 1.26\n")
	write("internal/alpha/alpha.go", "package alpha\n\ntype C struct{}\n\nfunc (C) Reconcile() {\n"+strings.Repeat("\t_ = 1\n", 100)+"}\n")
	write("internal/beta/beta.go", "package beta\n\nimport \"example.com/fleet/internal/alpha\"\n\ntype C struct{ a alpha.C }\n\nfunc (C) SetupWithManager() {}\n")
	write("internal/names/names.go", "package names\n\nconst X = 1\n")
	write("internal/manager/manager.go", "package manager\n\nimport (\n\t_ \"example.com/fleet/internal/alpha\"\n\t_ \"example.com/fleet/internal/beta\"\n)\n")
	controllers, problems, err := check(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(controllers, []string{"internal/alpha", "internal/beta"}) {
		t.Errorf("controllers %v, want alpha and beta", controllers)
	}
	if len(problems) != 2 || !strings.Contains(problems[0], "internal/alpha/alpha.go:5: Reconcile is 102 lines") ||
		!strings.Contains(problems[1], "internal/beta imports the controller package internal/alpha") {
		t.Errorf("problems:\n%s", strings.Join(problems, "\n"))
	}
}
