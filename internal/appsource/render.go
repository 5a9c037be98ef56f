package appsource

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// Limits caps what Render reads. Zero fields get the defaults.
type Limits struct {
	MaxFileBytes  int64 // one file; default 1 MiB
	MaxTotalBytes int64 // all files read by one render; default 8 MiB
	MaxObjects    int   // objects rendered; default 1000
}

// Defaults of Limits.
const (
	DefaultMaxFileBytes  = 1 << 20
	DefaultMaxTotalBytes = 8 << 20
	DefaultMaxObjects    = 1000
)

func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if l.MaxObjects <= 0 {
		l.MaxObjects = DefaultMaxObjects
	}
	return l
}

// Object is one rendered manifest and where it came from.
type Object struct {
	Object *unstructured.Unstructured
	// File is relative to the repository root (the kustomization file for kustomize
	// output), or spec.source.inline[i].
	File string
	// Line is the 1-based line where the object's document starts; 0 for kustomize output.
	Line int
}

// budget counts what one render has read against its Limits.
type budget struct {
	lim     Limits
	total   int64
	objects int
}

func (b *budget) addBytes(file string, n int64) error {
	if n > b.lim.MaxFileBytes {
		return fileError(file, 0, "file is %d bytes, over the limit of %d bytes per file", n, b.lim.MaxFileBytes)
	}
	b.total += n
	if b.total > b.lim.MaxTotalBytes {
		return fileError(file, 0, "reading it takes the render over the limit of %d bytes in all", b.lim.MaxTotalBytes)
	}
	return nil
}

func (b *budget) addObjects(file string, n int) error {
	b.objects += n
	if b.objects > b.lim.MaxObjects {
		return fileError(file, 0, "the render has more than %d objects, the limit", b.lim.MaxObjects)
	}
	return nil
}

// readFile reads name through the root, so a symlink cannot lead out of the repository, and
// counts it against the budget before it is read in full.
func (b *budget) readFile(r *os.Root, name string) ([]byte, error) {
	f, err := r.Open(name)
	if err != nil {
		return nil, openError(name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileError(name, 0, "%v", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fileError(name, 0, "not a regular file")
	}
	if fi.Size() > b.lim.MaxFileBytes {
		return nil, b.addBytes(name, fi.Size())
	}
	// The limit holds even if the file grows between Stat and Read.
	data, err := io.ReadAll(io.LimitReader(f, b.lim.MaxFileBytes+1))
	if err != nil {
		return nil, fileError(name, 0, "%v", err)
	}
	if err := b.addBytes(name, int64(len(data))); err != nil {
		return nil, err
	}
	return data, nil
}

// openError names the file and says plainly when os.Root refused a path that leaves the
// repository (its error text is the only sign).
func openError(name string, err error) *Error {
	if strings.Contains(err.Error(), "escapes from parent") || strings.Contains(err.Error(), "path escapes") {
		return fileError(name, 0, "refused: it leads outside the repository (a symlink?)")
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fileError(name, 0, "does not exist (a dangling symlink?)")
	}
	return fileError(name, 0, "%v", err)
}

// cleanSourcePath checks spec.source.git.path: relative, clean, inside the repository.
func cleanSourcePath(p string) (string, error) {
	if p == "" || p == "." {
		return ".", nil
	}
	switch {
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/"):
		return "", permanent(FieldPath, "path %q must be relative to the repository root", p)
	case strings.Contains(p, `\`):
		return "", permanent(FieldPath, "path %q must use / as separator", p)
	case path.Clean(p) != p:
		return "", permanent(FieldPath, "path %q is not clean: write %q", p, path.Clean(p))
	case !filepath.IsLocal(p):
		return "", permanent(FieldPath, "path %q leads outside the repository", p)
	}
	return p, nil
}

// kustomizationNames are the files that make a directory a kustomization, as kustomize
// looks for them.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

func findKustomization(r *os.Root, dir string) string {
	for _, n := range kustomizationNames {
		p := path.Join(dir, n)
		if fi, err := r.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// RenderDir renders root/sourcePath (spec.source.git.path; "" is the root): with kustomize
// when it holds a kustomization, otherwise every *.yaml, *.yml and *.json file under it
// (recursively, in path order; names starting with "." are skipped, so .github and the like
// are not taken for manifests). Objects need apiVersion, kind and metadata.name; a v1 List
// is expanded into its items.
func RenderDir(root, sourcePath string, lim Limits) ([]Object, error) {
	lim = lim.withDefaults()
	rel, err := cleanSourcePath(sourcePath)
	if err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, &Error{Field: FieldPath, Err: fmt.Errorf("opening the checkout: %w", err)}
	}
	defer r.Close()
	fi, err := r.Stat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, permanent(FieldPath, "path %q does not exist in the repository", rel)
	case err != nil:
		e := openError(rel, err)
		e.Field = FieldPath
		return nil, e
	}
	b := &budget{lim: lim}
	if fi.IsDir() {
		if k := findKustomization(r, rel); k != "" {
			return renderKustomization(r, rel, k, b)
		}
	}
	files, err := manifestFiles(r, rel, fi.IsDir())
	if err != nil {
		return nil, err
	}
	var out []Object
	for _, name := range files {
		data, err := b.readFile(r, name)
		if err != nil {
			return nil, err
		}
		objs, err := decodeManifests(name, data, b)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func isManifestName(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// manifestFiles lists the manifest files under dir, sorted by path. Symlinked directories
// are not followed (no loops); symlinked files are read if they stay in the repository.
func manifestFiles(r *os.Root, dir string, isDir bool) ([]string, error) {
	if !isDir {
		return []string{dir}, nil
	}
	var files []string
	err := fs.WalkDir(r.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return openError(p, err)
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !isManifestName(d.Name()) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			fi, err := r.Stat(p)
			if err != nil {
				return openError(p, err)
			}
			if !fi.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, fileError(dir, 0, "%v", err)
	}
	sort.Strings(files)
	return files, nil
}

// RenderInline renders inline manifests, each one JSON or YAML object (a v1 List is
// expanded); File is spec.source.inline[i].
func RenderInline(manifests [][]byte, lim Limits) ([]Object, error) {
	b := &budget{lim: lim.withDefaults()}
	var out []Object
	for i, m := range manifests {
		name := fmt.Sprintf("%s[%d]", FieldInline, i)
		if err := b.addBytes(name, int64(len(m))); err != nil {
			return nil, err
		}
		objs, err := decodeManifests(name, m, b)
		if err != nil {
			return nil, err
		}
		if len(objs) == 0 {
			return nil, fileError(name, 0, "empty manifest")
		}
		out = append(out, objs...)
	}
	return out, nil
}

// document is one YAML document of a file: its text and the file line its text starts at.
type document struct {
	text      []byte
	startLine int // line of text's first line
	firstLine int // first line with content; 0 if none (an empty document)
}

// splitDocuments splits a multi-document YAML stream on "---" lines, keeping each document's
// place in the file so errors can name absolute lines. Content after "--- " on the
// separator line belongs to the next document.
func splitDocuments(data []byte) []document {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var docs []document
	cur := document{startLine: 1}
	var buf bytes.Buffer
	flush := func() {
		cur.text = bytes.Clone(buf.Bytes())
		docs = append(docs, cur)
		buf.Reset()
	}
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		bare := bytes.TrimRight(line, "\r\n")
		if bytes.HasPrefix(bare, []byte("---")) && (len(bare) == 3 || bare[3] == ' ' || bare[3] == '\t') {
			flush()
			cur = document{startLine: lineNo}
			line = bytes.TrimLeft(line[3:], " \t")
		}
		if cur.firstLine == 0 {
			if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
				cur.firstLine = lineNo
			}
		}
		buf.Write(line)
	}
	flush()
	return docs
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// yamlError turns a parser error into one naming file and absolute line: the parser counts
// lines from the start of the document, the user from the start of the file.
func yamlError(file string, startLine int, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	line := 0
	msg = yamlLine.ReplaceAllStringFunc(msg, func(m string) string {
		n, _ := strconv.Atoi(m[len("line "):])
		abs := startLine + n - 1
		if line == 0 {
			line = abs
		}
		return "line " + strconv.Itoa(abs)
	})
	if line != 0 {
		// file:line already says where; "yaml: line 12: x" would say it twice.
		msg = strings.Replace(msg, "yaml: line "+strconv.Itoa(line)+": ", "yaml: ", 1)
	}
	if line == 0 {
		line = startLine
	}
	return fileError(file, line, "%s", msg)
}

// decodeManifests decodes every document of one file (YAML or JSON; JSON is YAML).
func decodeManifests(file string, data []byte, b *budget) ([]Object, error) {
	var out []Object
	for _, d := range splitDocuments(data) {
		if d.firstLine == 0 {
			continue
		}
		// Strict: a duplicated key is almost always a mistake that would silently drop a value.
		j, err := yaml.YAMLToJSONStrict(d.text)
		if err != nil {
			return nil, yamlError(file, d.startLine, err)
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			continue
		}
		objs, err := objectsFromJSON(file, d.firstLine, j)
		if err != nil {
			return nil, err
		}
		if err := b.addObjects(file, len(objs)); err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// objectsFromJSON checks one decoded document and expands a List.
func objectsFromJSON(file string, line int, j []byte) ([]Object, error) {
	var v any
	// utiljson keeps integers as int64, as unstructured's accessors (NestedInt64) and the
	// rest of the API machinery expect; encoding/json would make them float64.
	if err := utiljson.Unmarshal(j, &v); err != nil {
		return nil, fileError(file, line, "%v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fileError(file, line, "a manifest must be an object (a mapping), not %s", describe(v))
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "List" {
		if u.GetAPIVersion() == "" {
			return nil, fileError(file, line, "List is missing apiVersion")
		}
		items, ok := m["items"].([]any)
		if !ok && m["items"] != nil {
			return nil, fileError(file, line, "List items must be a sequence")
		}
		out := make([]Object, 0, len(items))
		for i, it := range items {
			im, ok := it.(map[string]any)
			if !ok {
				return nil, fileError(file, line, "List items[%d] must be an object, not %s", i, describe(it))
			}
			iu := &unstructured.Unstructured{Object: im}
			if err := checkIdentity(iu); err != nil {
				return nil, fileError(file, line, "List items[%d]: %v", i, err)
			}
			out = append(out, Object{Object: iu, File: file, Line: line})
		}
		return out, nil
	}
	if err := checkIdentity(u); err != nil {
		return nil, fileError(file, line, "%v", err)
	}
	if strings.HasPrefix(u.GetAPIVersion(), "kustomize.config.k8s.io/") {
		return nil, fileError(file, line, "%s is a kustomize file, not a manifest: point spec.source.git.path at its directory", u.GetKind())
	}
	return []Object{{Object: u, File: file, Line: line}}, nil
}

// checkIdentity requires what names an object: without these it cannot be applied or tracked.
func checkIdentity(u *unstructured.Unstructured) error {
	for _, f := range []string{"apiVersion", "kind"} {
		switch v := u.Object[f].(type) {
		case string:
			if v == "" {
				return fmt.Errorf("object is missing %s", f)
			}
		case nil:
			return fmt.Errorf("object is missing %s", f)
		default:
			return fmt.Errorf("%s must be a string, not %s", f, describe(v))
		}
	}
	md, hasMD := u.Object["metadata"]
	if hasMD && md != nil {
		if _, isMap := md.(map[string]any); !isMap {
			return fmt.Errorf("%s: metadata must be an object", u.GetKind())
		}
	}
	if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "name"); found && v != nil {
		if _, ok := v.(string); !ok {
			// YAML 1.1 reads y, no, on, 1e3 and the like as non-strings.
			return fmt.Errorf("%s: metadata.name must be a string, not %s: quote it", u.GetKind(), describe(v))
		}
	}
	if name, _, _ := unstructured.NestedString(u.Object, "metadata", "name"); name == "" {
		if u.GetKind() == "Kustomization" || u.GetKind() == "Component" {
			// Reported by the caller with a hint; kustomize files usually have no name.
			if strings.HasPrefix(u.GetAPIVersion(), "kustomize.config.k8s.io/") {
				return nil
			}
		}
		return fmt.Errorf("%s is missing metadata.name", u.GetKind())
	}
	return nil
}

func describe(v any) string {
	switch v.(type) {
	case []any:
		return "a sequence"
	case string:
		return "a string"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	default:
		return fmt.Sprintf("a %T", v)
	}
}
