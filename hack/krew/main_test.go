package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The archive for this machine holds kubectl-flotilla, which runs; the manifest names the
// archive by the sha256 it has, for every platform asked.
func TestPluginArchiveAndManifest(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	out := t.TempDir()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	if err := run(out, "v0.5.0", "https://example.com/v0.5.0", []string{platform}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(out, "flotilla.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string
		Metadata   struct{ Name string }
		Spec       struct {
			Version, Homepage, ShortDescription, Description string
			Platforms                                        []struct {
				Selector         struct{ MatchLabels map[string]string }
				URI, Sha256, Bin string
			}
		}
	}
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		t.Fatalf("manifest: %v\n%s", err, data)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "flotilla" || m.Spec.Version != "v0.5.0" || len(m.Spec.Platforms) != 1 {
		t.Fatalf("manifest:\n%s", data)
	}
	p := m.Spec.Platforms[0]
	name := "kubectl-flotilla_" + runtime.GOOS + "_" + runtime.GOARCH + ".tar.gz"
	if p.Selector.MatchLabels["os"] != runtime.GOOS || p.Selector.MatchLabels["arch"] != runtime.GOARCH || p.URI != "https://example.com/v0.5.0/"+name || p.Bin != "kubectl-flotilla" {
		t.Errorf("platform entry %+v", p)
	}
	archive, err := os.ReadFile(filepath.Join(out, name))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(archive); hex.EncodeToString(sum[:]) != p.Sha256 {
		t.Errorf("manifest sha256 %s is not the archive's", p.Sha256)
	}
	bin := extract(t, filepath.Join(out, name), "kubectl-flotilla")
	got, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(got), "flotilla ") {
		t.Errorf("kubectl-flotilla version: %s %v", got, err)
	}
}

func extract(t *testing.T, archive, name string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in %s: %v", name, archive, err)
		}
		if h.Name != name {
			continue
		}
		if h.Mode&0o111 == 0 {
			t.Errorf("%s is not executable (mode %o)", name, h.Mode)
		}
		path := filepath.Join(t.TempDir(), name)
		out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		out.Close()
		return path
	}
}
