package appsource

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The cache is CacheDir/teams/<team>/<repository>/<commit>: one tree per team, repository
// and commit. Keying by team costs a second copy when two teams use one public repository,
// and buys that no team ever reads a tree another team's fetch wrote (its credentials, its
// redirects), and that a team's share of the disk is the size of its own directory.
//
// Everything under CacheDir is private to the process's user: directories 0700, files 0600
// (the executable bit is dropped: nothing in a tree is ever run), set with chmod after
// creation so the umask does not matter. go-git's object store of a fetch lives only under
// that fetch's 0700 temp directory and is deleted with it.

var (
	dnsLabel  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	legacyDir = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// teamDirName is a namespace name as is; anything else (never a namespace) is hashed, and no
// team is "_".
func teamDirName(team string) string {
	switch {
	case team == "":
		return "_"
	case dnsLabel.MatchString(team):
		return team
	}
	sum := sha256.Sum256([]byte(team))
	return "_" + hex.EncodeToString(sum[:8])
}

// privateDir makes CacheDir/elem... with every directory from CacheDir down 0700, and removes
// the trees of the cache's layout before teams (CacheDir/<repository>/<commit>) once.
func (f *Fetcher) privateDir(elem ...string) (string, error) {
	if err := os.MkdirAll(f.CacheDir, 0o700); err != nil {
		return "", err
	}
	// Best effort on the root: it may be a mount the process does not own (an emptyDir, a
	// volume), where every directory below is still made private.
	_ = os.Chmod(f.CacheDir, 0o700)
	f.legacy.Do(func() {
		entries, _ := os.ReadDir(f.CacheDir)
		for _, e := range entries {
			if e.IsDir() && legacyDir.MatchString(e.Name()) {
				_ = os.RemoveAll(filepath.Join(f.CacheDir, e.Name()))
			}
		}
	})
	dir := f.CacheDir
	for _, e := range elem {
		dir = filepath.Join(dir, e)
		if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
			return "", err
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// makePrivate makes a checked-out tree's directories 0700 and its files 0600. Symlinks are
// left alone: chmod would follow them.
func makePrivate(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return os.Chmod(p, 0o700)
		case d.Type().IsRegular():
			return os.Chmod(p, 0o600)
		}
		return nil
	})
}

func (f *Fetcher) setSize(dir string, size int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sizes == nil {
		f.sizes = map[string]int64{}
	}
	f.sizes[dir] = size
}

// treeSize is the bytes of a cached tree's files: as measured when it was checked out, or
// (after a restart) summed from the disk.
func (f *Fetcher) treeSize(dir string) int64 {
	f.mu.Lock()
	size, ok := f.sizes[dir]
	f.mu.Unlock()
	if ok {
		return size
	}
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				size += info.Size()
			}
		}
		return nil
	})
	f.setSize(dir, size)
	return size
}

// removeTree renames a tree out of its commit's name first (a removal cut short must not
// leave a partial tree under a commit name), then removes it.
func (f *Fetcher) removeTree(dir string) error {
	doomed := filepath.Join(filepath.Dir(dir), ".tmp-evict-"+filepath.Base(dir)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Rename(dir, doomed); err != nil {
		return err
	}
	f.mu.Lock()
	delete(f.sizes, dir)
	f.mu.Unlock()
	return os.RemoveAll(doomed)
}

type cachedTree struct {
	dir  string
	at   time.Time
	size int64
}

// trees lists the cached trees of a repository directory, and sweeps temp directories left
// by a crash.
func (f *Fetcher) trees(repoDir string) []cachedTree {
	entries, err := os.ReadDir(repoDir)
	if err != nil {
		return nil
	}
	var out []cachedTree
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(e.Name(), ".tmp-"):
			if time.Since(info.ModTime()) > time.Hour {
				_ = os.RemoveAll(filepath.Join(repoDir, e.Name()))
			}
		case e.IsDir() && fullSHA.MatchString(e.Name()):
			out = append(out, cachedTree{dir: filepath.Join(repoDir, e.Name()), at: info.ModTime()})
		}
	}
	return out
}

// evict keeps the f.keep() most recently used commits of a repository (always including
// the one just checked out).
func (f *Fetcher) evict(repoDir, current string) {
	var commits []cachedTree
	for _, t := range f.trees(repoDir) {
		if filepath.Base(t.dir) != current {
			commits = append(commits, t)
		}
	}
	sort.Slice(commits, func(i, j int) bool { return commits[i].at.After(commits[j].at) })
	for i, c := range commits {
		if i >= f.keep()-1 {
			_ = f.removeTree(c.dir)
		}
	}
}

// inUseGrace is how long after its last Checkout a tree is taken to be still in use.
const inUseGrace = time.Minute

// enforceQuota evicts the team's least recently used trees, of any of its repositories but
// never the one just checked out, until the team is within TeamCacheBytes. Other teams'
// trees are never touched. (A tree bigger than the whole share was refused before it was
// written: see measure.)
func (f *Fetcher) enforceQuota(teamDir, current string) {
	unlock := f.lock(teamDir) // taken inside a repository's lock, never the other way round
	defer unlock()
	repos, err := os.ReadDir(teamDir)
	if err != nil {
		return
	}
	var trees []cachedTree
	var total int64
	for _, r := range repos {
		if !r.IsDir() || strings.HasPrefix(r.Name(), ".") {
			continue
		}
		for _, t := range f.trees(filepath.Join(teamDir, r.Name())) {
			t.size = f.treeSize(t.dir)
			total += t.size
			if t.dir != current {
				trees = append(trees, t)
			}
		}
	}
	quota := f.bounds().TeamCacheBytes
	sort.Slice(trees, func(i, j int) bool { return trees[i].at.Before(trees[j].at) })
	for _, t := range trees {
		if total <= quota {
			return
		}
		if time.Since(t.at) < inUseGrace {
			// Another repository's tree handed out moments ago may be rendering now (its
			// Checkout holds no lock past return): the team stays over its share until it ages.
			return
		}
		if f.removeTree(t.dir) == nil {
			total -= t.size
		}
	}
}
