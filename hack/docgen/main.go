// Command docgen writes the generated references under docs/reference: the command line from
// the cobra command tree (docs/reference/cli) and the API from the CRD YAML that
// controller-gen writes into config/crd/bases (docs/reference/api). `make docs` runs it and
// `make verify` fails when its output differs from the tree.
//
// The output is deterministic: commands, flags, kinds and fields are sorted, no date is
// written, and a flag default that depends on the machine (the home directory, the number of
// CPUs) is found by building the command tree twice under two environments and is written as
// "depends on the machine" instead of this machine's value.
//
// Run it from the repository root: go run ./hack/docgen
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	out := flag.String("out", "docs/reference", "directory to write the references into (its cli/ and api/ are replaced)")
	crds := flag.String("crds", "config/crd/bases", "directory of the generated CRD YAML")
	flag.Parse()
	if err := run(*out, *crds); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

func run(out, crds string) error {
	cli, err := cliReference()
	if err != nil {
		return fmt.Errorf("cli reference: %w", err)
	}
	api, err := apiReference(crds)
	if err != nil {
		return fmt.Errorf("api reference: %w", err)
	}
	if err := replaceDir(filepath.Join(out, "cli"), cli); err != nil {
		return err
	}
	return replaceDir(filepath.Join(out, "api"), api)
}

// replaceDir makes dir hold exactly files (name -> content): a page of a removed command or
// kind disappears with it.
func replaceDir(dir string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if _, keep := files[filepath.Base(f)]; !keep {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// cell makes text fit in one markdown table cell.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "<", "&lt;")
	s = strings.ReplaceAll(s, ">", "&gt;")
	return s
}

// code quotes s as inline code, safe in a table cell (a backtick inside picks a longer fence).
func code(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", `\|`)
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}
