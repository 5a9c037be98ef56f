package appsource

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// summary is "file:line kind/name" per object, to compare renders at a glance.
func summary(objs []Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, fmt.Sprintf("%s:%d %s/%s", o.File, o.Line, o.Object.GetKind(), o.Object.GetName()))
	}
	return out
}

func mustSummary(t *testing.T, objs []Object, err error, want ...string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(objs); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("render:\n got %q\nwant %q", got, want)
	}
}

func mustFileError(t *testing.T, err error, file string, line int, contains string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *Error naming %s, got %T %v", file, err, err)
	}
	if !e.Permanent || e.File != file || e.Line != line || !strings.Contains(err.Error(), contains) {
		t.Fatalf("want permanent error at %s:%d containing %q, got File=%q Line=%d Permanent=%v: %v",
			file, line, contains, e.File, e.Line, e.Permanent, err)
	}
	return e
}

func TestRenderDirPlainYAMLRecursive(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"apps/b.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: b1}
---
---
# only a comment: an empty document
---
# the object starts below its comment
apiVersion: apps/v1
kind: Deployment
metadata:
  name: b2
spec:
  replicas: 3
`,
		"apps/a.yaml":                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"apps/nested/deep/c.yml":     "\n\napiVersion: v1\nkind: Service\nmetadata: {name: c}\n",
		"apps/nested/d.json":         `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "d"}}`,
		"apps/list.yaml":             "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: l1}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: l2}}\n",
		"apps/README.md":             "not a manifest: ignored",
		"apps/.hidden/workflow.yaml": "on: push\n", // dot directories are not manifests
		"other/x.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
	})
	objs, err := RenderDir(root, "apps", Limits{})
	mustSummary(t, objs, err,
		"apps/a.yaml:1 ConfigMap/a",
		"apps/b.yaml:1 ConfigMap/b1",
		"apps/b.yaml:9 Deployment/b2",
		"apps/list.yaml:1 ConfigMap/l1",
		"apps/list.yaml:1 ConfigMap/l2",
		"apps/nested/d.json:1 Secret/d",
		"apps/nested/deep/c.yml:3 Service/c",
	)
	// Integers stay int64, as unstructured needs them.
	if r, ok := objs[2].Object.Object["spec"].(map[string]any)["replicas"].(int64); !ok || r != 3 {
		t.Errorf("replicas = %#v, want int64 3", objs[2].Object.Object["spec"])
	}

	objs, err = RenderDir(root, "", Limits{})
	if err != nil || len(objs) != 8 {
		t.Fatalf("render of the whole repository: %d objects, %v; want 8", len(objs), err)
	}
	objs, err = RenderDir(root, "other/x.yaml", Limits{})
	mustSummary(t, objs, err, "other/x.yaml:1 ConfigMap/x")
}

func TestRenderDirYAMLErrorsNameAbsoluteLine(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"apps/web.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: first}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: second
  labels: a: b
`,
	})
	_, err := RenderDir(root, "apps", Limits{})
	e := mustFileError(t, err, "apps/web.yaml", 9, "yaml: mapping values are not allowed in this context")
	if got := e.Error(); got != "apps/web.yaml:9: yaml: mapping values are not allowed in this context" {
		t.Errorf("Error() = %q", got)
	}

	writeFiles(t, root, map[string]string{
		"apps/web.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {x: \"1\"}\nkind: Secret\n",
	})
	_, err = RenderDir(root, "apps", Limits{})
	mustFileError(t, err, "apps/web.yaml", 9, `key "kind" already set`)
}

func TestRenderDirRequiresIdentity(t *testing.T) {
	for _, tc := range []struct {
		doc, want string
	}{
		{"kind: ConfigMap\nmetadata: {name: a}\n", "missing apiVersion"},
		{"apiVersion: v1\nmetadata: {name: a}\n", "missing kind"},
		{"apiVersion: apps/v1\nkind: Deployment\nmetadata: {labels: {a: b}}\n", "Deployment is missing metadata.name"},
		{"- just\n- a list\n", "must be an object"},
		{"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap}\n", "List items[0]: ConfigMap is missing metadata.name"},
	} {
		root := t.TempDir()
		// The failing document starts on line 6, after a good one and a comment.
		writeFiles(t, root, map[string]string{"x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\n# next\n" + tc.doc})
		_, err := RenderDir(root, "", Limits{})
		mustFileError(t, err, "x.yaml", 6, tc.want)
	}
	// A kustomization in a plain directory is named, with what to do instead.
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"apps/prod/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n"})
	_, err := RenderDir(root, "apps", Limits{})
	mustFileError(t, err, "apps/prod/kustomization.yaml", 1, "point spec.source.git.path at its directory")
}

func TestRenderDirPathSafety(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"apps/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"})
	for p, want := range map[string]string{
		"../apps":     "leads outside the repository",
		"/apps":       "must be relative",
		"apps/../..":  "not clean",
		"./apps":      `not clean: write "apps"`,
		"apps/":       "not clean",
		"missing/dir": `path "missing/dir" does not exist in the repository`,
	} {
		_, err := RenderDir(root, p, Limits{})
		mustPermanent(t, err, FieldPath, want)
	}
}

func TestRenderDirRefusesSymlinksLeavingTheRepository(t *testing.T) {
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: stolen}\n"})
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"apps/a.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"shared/c.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\n",
	})
	// A symlink that stays inside is fine.
	if err := os.Symlink("../shared/c.yaml", filepath.Join(root, "apps/b.yaml")); err != nil {
		t.Fatal(err)
	}
	objs, err := RenderDir(root, "apps", Limits{})
	mustSummary(t, objs, err, "apps/a.yaml:1 ConfigMap/a", "apps/b.yaml:1 ConfigMap/shared")

	for _, target := range []string{filepath.Join(outside, "secret.yaml"), "../../" + filepath.Base(outside) + "/secret.yaml"} {
		link := filepath.Join(root, "apps/z.yaml")
		os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		_, err = RenderDir(root, "apps", Limits{})
		mustFileError(t, err, "apps/z.yaml", 0, "leads outside the repository")
	}
	// The path itself may not leave either.
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	_, err = RenderDir(root, "escape", Limits{})
	mustPermanent(t, err, FieldPath, "leads outside the repository")
}

func TestRenderDirLimits(t *testing.T) {
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\n" // 50 bytes with a 2-letter name
	}
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"big/a.yaml": cm("aa") + "data: {x: \"" + strings.Repeat("x", 200) + "\"}\n"})
	_, err := RenderDir(root, "big", Limits{MaxFileBytes: 100})
	mustFileError(t, err, "big/a.yaml", 0, "over the limit of 100 bytes per file")

	writeFiles(t, root, map[string]string{"total/a.yaml": cm("aa"), "total/b.yaml": cm("bb"), "total/c.yaml": cm("cc")})
	_, err = RenderDir(root, "total", Limits{MaxTotalBytes: 120})
	mustFileError(t, err, "total/c.yaml", 0, "over the limit of 120 bytes in all")

	writeFiles(t, root, map[string]string{"count/a.yaml": cm("aa") + "---\n" + cm("bb") + "---\n" + cm("cc")})
	_, err = RenderDir(root, "count", Limits{MaxObjects: 2})
	mustFileError(t, err, "count/a.yaml", 0, "more than 2 objects")
	if _, err := RenderDir(root, "count", Limits{MaxObjects: 3}); err != nil {
		t.Fatalf("exactly at the limit: %v", err)
	}
}

func TestRenderInline(t *testing.T) {
	objs, err := RenderInline([][]byte{
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j"}}`),
		[]byte("# yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: why\n"),
	}, Limits{})
	mustSummary(t, objs, err, "spec.source.inline[0]:1 ConfigMap/j", "spec.source.inline[1]:2 Secret/why")

	_, err = RenderInline([][]byte{[]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b: c\n")}, Limits{})
	mustFileError(t, err, "spec.source.inline[1]", 4, "mapping values are not allowed")
	_, err = RenderInline([][]byte{[]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: yes}\n")}, Limits{})
	mustFileError(t, err, "spec.source.inline[0]", 1, "metadata.name must be a string, not a boolean: quote it")
	_, err = RenderInline([][]byte{[]byte(`{"apiVersion":"v1","kind":"ConfigMap"}`)}, Limits{})
	mustFileError(t, err, "spec.source.inline[0]", 1, "ConfigMap is missing metadata.name")
	_, err = RenderInline([][]byte{[]byte("# nothing\n")}, Limits{})
	mustFileError(t, err, "spec.source.inline[0]", 0, "empty manifest")
	_, err = RenderInline([][]byte{[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + strings.Repeat("n", 100) + `"}}`)}, Limits{MaxFileBytes: 64})
	mustFileError(t, err, "spec.source.inline[0]", 0, "over the limit of 64 bytes")
}

func TestSplitDocumentsKeepsLines(t *testing.T) {
	docs := splitDocuments([]byte("a: 1\n--- # c\nb: 2\n---\n\n# x\n---\n--- {c: 3}\n"))
	var got []string
	for _, d := range docs {
		got = append(got, fmt.Sprintf("%d/%d:%q", d.startLine, d.firstLine, d.text))
	}
	want := []string{`1/1:"a: 1\n"`, `2/3:"# c\nb: 2\n"`, `4/0:"\n\n# x\n"`, `7/0:"\n"`, `8/8:"{c: 3}\n"`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("splitDocuments:\n got %v\nwant %v", got, want)
	}
}
