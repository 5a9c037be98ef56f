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
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kustomizeMu serialises kustomize builds: krusty keeps process-wide state (the OpenAPI
// schema) that concurrent builds race on.
var kustomizeMu sync.Mutex

// renderKustomization runs kustomize on dir after refusing anything that would make it
// reach outside the repository. Kustomize reads through rootFS: only the repository, via
// os.Root, within the render's budget.
func renderKustomization(r *os.Root, dir, kfile string, b *budget) ([]Object, error) {
	if err := checkKustomizations(r, dir, b.lim); err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsRootOnly
	opts.PluginConfig = types.DisabledPluginConfig() // no exec plugins, no helm
	opts.Reorder = krusty.ReorderOptionUnspecified   // the order `kustomize build` gives
	fsys := &rootFS{r: r, b: b}
	kustomizeMu.Lock()
	m, err := krusty.MakeKustomizer(opts).Run(fsys, vpath(dir))
	kustomizeMu.Unlock()
	if fsys.err != nil {
		return nil, fsys.err // a limit or an escape, clearer than kustomize's wrapping of it
	}
	if err != nil {
		return nil, &Error{Field: FieldPath, File: kfile, Permanent: true, Err: fmt.Errorf("kustomize: %w", err)}
	}
	var out []Object
	for _, res := range m.Resources() {
		j, err := res.MarshalJSON()
		if err != nil {
			return nil, fileError(kfile, 0, "kustomize output %s: %v", res.CurId(), err)
		}
		objs, err := objectsFromJSON(kfile, 0, j)
		if err != nil {
			return nil, err
		}
		if err := b.addObjects(kfile, len(objs)); err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// kustRef is one entry of a kustomization that names a file, directory or URL.
type kustRef struct {
	field string
	raw   string // as written, for messages
	value string // the path kustomize loads
}

// kustomizationRefs lists the entries kustomize would load, from every field that takes a
// path. Inline content (patches, generator configs written in place) is skipped.
func kustomizationRefs(doc map[string]any) []kustRef {
	var refs []kustRef
	add := func(field string, v any) {
		if s, ok := v.(string); ok && s != "" && !strings.Contains(s, "\n") {
			value := s
			if strings.HasSuffix(field, ".files") {
				// "key=path" names the data key; only the path is loaded.
				if _, p, found := strings.Cut(s, "="); found {
					value = p
				}
			}
			refs = append(refs, kustRef{field: field, raw: s, value: value})
		}
	}
	list := func(field string) []any {
		l, _ := doc[field].([]any)
		return l
	}
	for _, f := range []string{"resources", "bases", "components", "crds", "configurations",
		"patchesStrategicMerge", "generators", "transformers", "validators"} {
		for _, v := range list(f) {
			add(f, v)
		}
	}
	for _, f := range []string{"patches", "patchesJson6902", "replacements"} {
		for _, v := range list(f) {
			if m, ok := v.(map[string]any); ok {
				add(f, m["path"])
			}
		}
	}
	for _, f := range []string{"configMapGenerator", "secretGenerator"} {
		for _, v := range list(f) {
			m, ok := v.(map[string]any)
			if !ok {
				continue
			}
			for _, key := range []string{"files", "envs"} {
				l, _ := m[key].([]any)
				for _, e := range l {
					add(f+"."+key, e)
				}
			}
			add(f+".env", m["env"])
		}
	}
	for _, v := range list("helmCharts") {
		if m, ok := v.(map[string]any); ok {
			add("helmCharts.repo", m["repo"])
		}
	}
	if m, ok := doc["helmGlobals"].(map[string]any); ok {
		add("helmGlobals.chartHome", m["chartHome"])
	}
	if m, ok := doc["openapi"].(map[string]any); ok {
		add("openapi.path", m["path"])
	}
	return refs
}

// scpLike is user@host:path, which kustomize clones over ssh.
var scpLike = regexp.MustCompile(`^[a-z0-9._~-]+@[a-z0-9.-]+:`)

// isRemote recognises every spelling kustomize would fetch over the network (git clone or
// HTTP): URLs, scp-like addresses, github.com shorthands, go-getter prefixes, ?ref=.
func isRemote(s string) bool {
	t := strings.ToLower(strings.TrimSpace(s))
	return strings.Contains(t, "://") || strings.HasPrefix(t, "git@") || strings.HasPrefix(t, "git::") ||
		strings.HasPrefix(t, "github.com/") || strings.HasPrefix(t, "github.com:") ||
		strings.Contains(t, "?ref=") || scpLike.MatchString(t)
}

// checkKustomizations reads every kustomization kustomize may load for dir (those under dir,
// and the bases they reach elsewhere in the repository) and refuses remote entries before
// kustomize runs, since kustomize would clone or download them itself. A resource, base or
// component that is missing is refused too: kustomize would retry it as a remote URL.
func checkKustomizations(r *os.Root, dir string, lim Limits) error {
	var queue []string
	seen := map[string]bool{}
	enqueue := func(k string) {
		if !seen[k] {
			seen[k] = true
			queue = append(queue, k)
		}
	}
	err := fs.WalkDir(r.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return openError(p, err)
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		if !d.IsDir() {
			for _, n := range kustomizationNames {
				if d.Name() == n {
					enqueue(p)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		// Read on its own budget: kustomize reads these again and counts them then.
		data, err := (&budget{lim: Limits{MaxFileBytes: lim.MaxFileBytes, MaxTotalBytes: lim.MaxFileBytes, MaxObjects: 1}}).readFile(r, k)
		if err != nil {
			return err
		}
		var doc map[string]any
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return yamlError(k, 1, err)
		}
		kdir := path.Dir(k)
		for _, ref := range kustomizationRefs(doc) {
			if isRemote(ref.raw) {
				return fileError(k, 0, "%s entry %q is remote: remote bases are refused (nothing is fetched outside the git source); copy it into the repository", ref.field, ref.raw)
			}
			target := path.Join(kdir, ref.value)
			if path.IsAbs(ref.value) {
				target = strings.TrimPrefix(path.Clean(ref.value), "/")
			}
			if target != "." && target != "" && !filepath.IsLocal(target) {
				return fileError(k, 0, "%s entry %q leads outside the repository", ref.field, ref.raw)
			}
			switch ref.field {
			case "resources", "bases", "components":
			default:
				continue // other files are loaded (and refused, if outside the root) by kustomize
			}
			fi, err := r.Stat(target)
			if errors.Is(err, fs.ErrNotExist) {
				return fileError(k, 0, "%s entry %q does not exist in the repository", ref.field, ref.raw)
			}
			if err != nil {
				return openError(target, err) // names the symlink that leaves the repository
			}
			if fi.IsDir() {
				if kk := findKustomization(r, target); kk != "" {
					enqueue(kk)
				}
			}
		}
	}
	return nil
}

// vpath is the path kustomize sees for a repository-relative path: the repository is the
// whole of its filesystem, rooted at "/".
func vpath(rel string) string {
	if rel == "." || rel == "" {
		return "/"
	}
	return "/" + rel
}

// rootFS is a read-only kustomize filesystem whose "/" is the repository root. Reads go
// through os.Root (a symlink cannot leave the repository) and the render's budget. Paths are
// cleaned lexically, so kustomize's root-only rule is checked on the path as written;
// symlinks inside the repository may point elsewhere inside it.
type rootFS struct {
	r   *os.Root
	b   *budget
	err error // first refused read: reported instead of kustomize's error
}

var _ filesys.FileSystem = (*rootFS)(nil)

var errReadOnly = errors.New("the repository is read-only to kustomize")

func (f *rootFS) rel(name string) string {
	p := filepath.ToSlash(name)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	p = path.Clean(p)
	if p == "/" {
		return "."
	}
	return p[1:]
}

func (f *rootFS) Create(string) (filesys.File, error) { return nil, errReadOnly }
func (f *rootFS) Mkdir(string) error                  { return errReadOnly }
func (f *rootFS) MkdirAll(string) error               { return errReadOnly }
func (f *rootFS) RemoveAll(string) error              { return errReadOnly }
func (f *rootFS) WriteFile(string, []byte) error      { return errReadOnly }

func (f *rootFS) Open(name string) (filesys.File, error) {
	data, err := f.ReadFile(name)
	if err != nil {
		return nil, err
	}
	fi, err := f.r.Stat(f.rel(name))
	if err != nil {
		return nil, err
	}
	return &roFile{Reader: bytes.NewReader(data), info: fi}, nil
}

func (f *rootFS) IsDir(name string) bool {
	fi, err := f.r.Stat(f.rel(name))
	return err == nil && fi.IsDir()
}

func (f *rootFS) ReadDir(name string) ([]string, error) {
	entries, err := fs.ReadDir(f.r.FS(), f.rel(name))
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (f *rootFS) CleanedAbs(name string) (filesys.ConfirmedDir, string, error) {
	rel := f.rel(name)
	fi, err := f.r.Stat(rel)
	if err != nil {
		return "", "", fmt.Errorf("'%s': %w", vpath(rel), err)
	}
	if fi.IsDir() {
		return filesys.ConfirmedDir(vpath(rel)), "", nil
	}
	return filesys.ConfirmedDir(vpath(path.Dir(rel))), path.Base(rel), nil
}

func (f *rootFS) Exists(name string) bool {
	_, err := f.r.Stat(f.rel(name))
	return err == nil
}

func (f *rootFS) Glob(pattern string) ([]string, error) {
	matches, err := fs.Glob(f.r.FS(), f.rel(pattern))
	if err != nil {
		return nil, err
	}
	for i, m := range matches {
		matches[i] = vpath(m)
	}
	return matches, nil
}

func (f *rootFS) ReadFile(name string) ([]byte, error) {
	if f.err != nil {
		return nil, f.err
	}
	rel := f.rel(name)
	// Kustomize probes for files that may not exist (each kustomization file name, a
	// resource that is a directory): those misses are normal, not refusals.
	if _, err := f.r.Lstat(rel); err != nil {
		return nil, err
	}
	data, err := f.b.readFile(f.r, rel)
	if err != nil {
		f.err = err
		return nil, err
	}
	return data, nil
}

func (f *rootFS) Walk(name string, fn filepath.WalkFunc) error {
	return fs.WalkDir(f.r.FS(), f.rel(name), func(p string, d fs.DirEntry, err error) error {
		var info fs.FileInfo
		if d != nil {
			info, _ = d.Info()
		}
		return fn(vpath(p), info, err)
	})
}

// roFile is a file already read within the budget.
type roFile struct {
	*bytes.Reader
	info fs.FileInfo
}

var _ io.ReadWriteCloser = (*roFile)(nil)

func (*roFile) Write([]byte) (int, error)    { return 0, errReadOnly }
func (*roFile) Close() error                 { return nil }
func (r *roFile) Stat() (os.FileInfo, error) { return r.info, nil }
