package security

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// matrixHeader is the header of the surface x attack-class table in docs/security.md.
var matrixHeader = []string{"Surface", "Escalation (generated/inherited)", "Namespace escape", "SSRF and redirects",
	"Traversal and encoding", "Resource exhaustion", "Echoed data", "Cross-team reads"}

// matrixSurfaces are the surfaces that take tenant input today; a new one gets a row.
var matrixSurfaces = []string{"Templates", "PropagationPolicy", "OverridePolicy", "AnalysisTemplate and analysis", "Releases (switches)",
	"TargetPolicy and ClusterTargetPolicy", "Applications and git", "Git push webhook", "Change windows", "Teams", "Inventory API", "Dashboard",
	"Traffic routes", "Lua customizations", "History", "CLI", "Dependencies (dependsOn)", "Works stream (sharded replicas)",
	"Agent endpoint (Pull members)"}

var (
	backticked = regexp.MustCompile("`([^`]*)`")
	testName   = regexp.MustCompile(`^(Test[A-Za-z0-9_]+)(?:/([A-Za-z0-9_]+))?$`)
	testFunc   = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
)

// splitRow returns the cells of a markdown table row.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// testFiles maps each top-level test function of the repository to the contents of the
// *_test.go files that define it.
func testFiles(t *testing.T, root string) map[string][]string {
	t.Helper()
	funcs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel, _ := filepath.Rel(root, path); rel == "bin" || rel == ".git" || (rel != "." && strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(data), -1) {
			funcs[m[1]] = append(funcs[m[1]], string(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return funcs
}

// testExists says whether name (TestX or TestX/sub) names a test of the repository.
func testExists(funcs map[string][]string, name string) bool {
	m := testName.FindStringSubmatch(name)
	if m == nil {
		return false
	}
	for _, src := range funcs[m[1]] {
		if m[2] == "" || strings.Contains(src, `"`+m[2]+`"`) {
			return true
		}
	}
	return false
}

// The standing rule: for every surface that takes tenant input, every attack class has
// a test that covers it (or says why it cannot apply), and the test exists. A new surface is not
// done until its row is filled; a renamed or deleted test fails here, naming the row, the column
// and the test.
func TestSecurityMatrixHasNoEmptyCell(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "|") && strings.Join(splitRow(l), "|") == strings.Join(matrixHeader, "|") {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatalf("docs/security.md has no table with the header | %s |", strings.Join(matrixHeader, " | "))
	}
	if start+1 >= len(lines) || !regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+\s*$`).MatchString(strings.TrimSpace(lines[start+1])) {
		t.Fatalf("line %d: the table's header is not followed by its |---| separator row", start+2)
	}
	funcs := testFiles(t, filepath.Join("..", ".."))
	rows := map[string]bool{}
	for i := start + 2; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
		cells := splitRow(lines[i])
		surface := cells[0]
		if len(cells) != len(matrixHeader) {
			t.Errorf("line %d, row %q: %d cells, want %d (one per column)", i+1, surface, len(cells), len(matrixHeader))
			continue
		}
		if surface == "" {
			t.Errorf("line %d: a row without a surface", i+1)
			continue
		}
		if rows[surface] {
			t.Errorf("line %d, row %q: the surface has two rows", i+1, surface)
		}
		rows[surface] = true
		for c := 1; c < len(cells); c++ {
			cell, column := cells[c], matrixHeader[c]
			switch {
			case cell == "":
				t.Errorf("row %q, column %q: empty; name the tests that cover it, or say `n/a: why` when the class cannot apply", surface, column)
			case strings.HasPrefix(cell, "n/a"):
				reason, ok := strings.CutPrefix(cell, "n/a:")
				if !ok || len(strings.Fields(reason)) < 4 {
					t.Errorf("row %q, column %q: %q; an n/a says why in a few words: `n/a: makes no outbound call`", surface, column, cell)
				}
			default:
				names := backticked.FindAllStringSubmatch(cell, -1)
				if len(names) == 0 {
					t.Errorf("row %q, column %q: %q names no test; list them as `TestName` or `TestName/Subtest`", surface, column, cell)
				}
				if rest := backticked.ReplaceAllString(cell, ""); strings.TrimSpace(strings.ReplaceAll(rest, ",", "")) != "" {
					t.Errorf("row %q, column %q: %q holds more than test names separated by commas (%q)", surface, column, cell, strings.TrimSpace(rest))
				}
				for _, n := range names {
					switch {
					case !testName.MatchString(n[1]):
						t.Errorf("row %q, column %q: `%s` is not a test name (TestName or TestName/Subtest, no package)", surface, column, n[1])
					case !testExists(funcs, n[1]):
						t.Errorf("row %q, column %q: test %s does not exist (no func %s( in a *_test.go file%s)", surface, column, n[1],
							strings.SplitN(n[1], "/", 2)[0], subtestNote(n[1]))
					}
				}
			}
		}
	}
	for _, s := range matrixSurfaces {
		if !rows[s] {
			t.Errorf("the table has no row %q", s)
		}
	}
}

func subtestNote(name string) string {
	if _, sub, ok := strings.Cut(name, "/"); ok {
		return ` that also holds the subtest "` + sub + `"`
	}
	return ""
}

// Every test the rest of docs/security.md names (the rows' descriptions, the findings) exists.
func TestSecurityDocNamesOnlyTestsThatExist(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	funcs := testFiles(t, filepath.Join("..", ".."))
	for i, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "|") {
			continue // the table: TestSecurityMatrixHasNoEmptyCell
		}
		for _, n := range backticked.FindAllStringSubmatch(l, -1) {
			if strings.HasPrefix(n[1], "Test") && testName.MatchString(n[1]) && !testExists(funcs, n[1]) {
				t.Errorf("line %d: test %s does not exist", i+1, n[1])
			}
		}
	}
}
