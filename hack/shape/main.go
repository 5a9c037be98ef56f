// Command shape checks the layout rules `make verify` enforces on internal/:
//
//   - no controller package imports another: a package that declares a Reconcile or
//     SetupWithManager method is a controller, and only the wiring packages (the manager, the
//     agent, the CLI, the bench and the demo) may import one; shared vocabulary lives in
//     packages below;
//   - every Reconcile is shorter than 100 lines: a longer one gets split into phase functions.
//
// It prints every breach with its place and exits 1 when there is one.
package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

const (
	maxReconcile  = 100
	reconcileName = "Reconcile"
)

// wiring may import controllers: they build the manager, the agent (the executor run in a
// Pull member) and the commands around them.
var wiring = map[string]bool{
	"internal/manager": true,
	"internal/agent":   true,
	"internal/cli":     true,
	"internal/bench":   true,
	"internal/demo":    true,
}

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

func main() {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "shape:", err)
		os.Exit(2)
	}
	controllers, problems, err := check(wd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "shape:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	fmt.Printf("shape: %d controllers (%s), no controller imports another, every Reconcile under %d lines\n",
		len(controllers), strings.Join(controllers, " "), maxReconcile)
}

// check reads the packages under root/internal: the controller packages, and every breach.
func check(root string) (controllers, problems []string, err error) {
	pkgs, err := list(root)
	if err != nil {
		return nil, nil, err
	}
	isController := map[string]bool{}
	for _, p := range pkgs {
		controller, long, err := inspect(root, p)
		if err != nil {
			return nil, nil, err
		}
		if controller {
			isController[rel(p.ImportPath)] = true
			controllers = append(controllers, rel(p.ImportPath))
		}
		problems = append(problems, long...)
	}
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		if wiring[from] {
			continue
		}
		for _, imp := range p.Imports {
			if to := rel(imp); isController[to] && to != from {
				problems = append(problems, fmt.Sprintf("%s imports the controller package %s: move what both need into a package below them, or let the manager wire them", from, to))
			}
		}
	}
	sort.Strings(controllers)
	sort.Strings(problems)
	return controllers, problems, nil
}

func list(root string) ([]pkg, error) {
	cmd := exec.Command("go", "list", "-json", "./internal/...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// inspect reports whether a package declares controllers, and every Reconcile too long.
func inspect(root string, p pkg) (bool, []string, error) {
	fset := token.NewFileSet()
	isController := false
	var long []string
	for _, name := range p.GoFiles {
		path := filepath.Join(p.Dir, name)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return false, nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil {
				continue
			}
			switch fn.Name.Name {
			case "SetupWithManager":
				isController = true
			case reconcileName:
				isController = true
				start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
				if n := end - start + 1; n >= maxReconcile {
					long = append(long, fmt.Sprintf("%s:%d: Reconcile is %d lines: split it into phase functions (limit %d)",
						strings.TrimPrefix(path, root+"/"), start, n, maxReconcile))
				}
			}
		}
	}
	return isController, long, nil
}

// rel is an import path of the module relative to it: internal/binding.
func rel(importPath string) string {
	if i := strings.Index(importPath, "/internal/"); i >= 0 {
		return importPath[i+1:]
	}
	return importPath
}
