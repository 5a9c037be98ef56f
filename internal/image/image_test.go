package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// The manager's image, built twice from the same tree: one index for amd64 and arm64 with the
// same digest both times; each image runs as the non-root user, starts the manager, and holds
// nothing but the root files and the binary; the binary taken from the layer of this
// machine's platform runs (its help, and a usage mistake exits 2); the SBOM lists what the
// binary was built from.
func TestTheManagerImage(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Package: "./cmd/flotilla-controller-manager", Dir: root, Created: time.Unix(1795000000, 0).UTC(),
		Revision: "0123456789abcdef", Version: "test", Source: "https://github.com/flotilla-dev/flotilla",
		Platforms: []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}}
	o.Out = filepath.Join(t.TempDir(), "first")
	first, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	again := o
	again.Out = filepath.Join(t.TempDir(), "again")
	second, err := Build(context.Background(), again)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("the same tree gave two digests: %s and %s", first, second)
	}

	p, err := layout.FromPath(o.Out)
	if err != nil {
		t.Fatal(err)
	}
	outer, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	om, err := outer.IndexManifest()
	if err != nil || len(om.Manifests) != 1 {
		t.Fatalf("layout index: %v %+v", err, om)
	}
	index, err := outer.ImageIndex(om.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var archs []string
	for _, d := range im.Manifests {
		archs = append(archs, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := index.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Config.User != User || !slices.Equal(cfg.Config.Entrypoint, []string{Entrypoint}) || cfg.Architecture != d.Platform.Architecture || cfg.OS != "linux" {
			t.Errorf("%s: user %q, entrypoint %q, platform %s/%s", archs[len(archs)-1], cfg.Config.User, cfg.Config.Entrypoint, cfg.OS, cfg.Architecture)
		}
		if !cfg.Created.Time.Equal(o.Created) {
			t.Errorf("%s: created %s, want the commit's time %s", archs[len(archs)-1], cfg.Created.Time, o.Created)
		}
		files := filesOf(t, img)
		want := []string{"etc/", "etc/group", "etc/passwd", "flotilla-controller-manager", "home/", "home/nonroot/", "tmp/"}
		if got := slices.Sorted(maps.Keys(files)); !slices.Equal(got, want) {
			t.Errorf("%s holds %v, want only %v", archs[len(archs)-1], got, want)
		}
		if d.Platform.Architecture != runtime.GOARCH {
			continue
		}
		bin := filepath.Join(t.TempDir(), "flotilla-controller-manager")
		if err := os.WriteFile(bin, files["flotilla-controller-manager"], 0o755); err != nil {
			t.Fatal(err)
		}
		help, err := exec.Command(bin, "-h").CombinedOutput()
		if err != nil || !strings.Contains(string(help), "--leader-elect") {
			t.Errorf("the image's binary -h: %v\n%s", err, help)
		}
		var exit *exec.ExitError
		if err := exec.Command(bin, "--no-such-flag").Run(); !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("the image's binary with an unknown flag: %v, want exit 2", err)
		}
	}
	if !slices.Equal(archs, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %v", archs)
	}

	data, err := os.ReadFile(filepath.Join(o.Out, "sbom.spdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sbom struct {
		SPDXVersion string `json:"spdxVersion"`
		Name        string `json:"name"`
		Packages    []struct {
			Name    string `json:"name"`
			Version string `json:"versionInfo"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(data, &sbom); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, p := range sbom.Packages {
		names[p.Name] = p.Version
	}
	if sbom.SPDXVersion != "SPDX-2.3" || !strings.HasSuffix(sbom.Name, first.String()) ||
		names["github.com/flotilla-dev/flotilla"] != "test" || names["k8s.io/client-go"] == "" || names["sigs.k8s.io/controller-runtime"] == "" || names["go"] == "" {
		t.Errorf("SBOM %s with %d packages", sbom.Name, len(sbom.Packages))
	}
	if _, ok := names["github.com/chromedp/chromedp"]; ok {
		t.Error("the SBOM lists chromedp: the manager links browser code")
	}
}

func filesOf(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(tr)
			files[h.Name] = data
			if h.Name == "home/nonroot/" && (h.Uid != UID || h.Gid != UID) {
				t.Errorf("the home belongs to %d:%d, want the non-root user", h.Uid, h.Gid)
			}
		}
		rc.Close()
	}
	return files
}
