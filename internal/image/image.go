// Package image builds the controller-manager's container image without Docker: the Go binary
// cross-compiled for each platform, laid on a minimal root (a non-root user, a writable home
// and /tmp, nothing else: no shell, no package manager) and written as an OCI image layout
// with an SPDX SBOM beside it. The same commit gives the same digest: file times, owners and
// the image's creation time come from the commit, and the binary is built with -trimpath and
// no build ID. It owns nothing at run time; only `make image` and its test call it.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the manager runs as: distroless's nonroot, so policies written for those images fit.
const (
	UID        = 65532
	User       = "65532:65532"
	Home       = "/home/nonroot"
	Entrypoint = "/flotilla-controller-manager"
)

// Options say what to build and where.
type Options struct {
	// Package is the main package to build, e.g. ./cmd/flotilla-controller-manager, relative to
	// Dir (the module root).
	Package, Dir string
	// Platforms, e.g. linux/amd64 and linux/arm64.
	Platforms []v1.Platform
	// Created is the image's creation time and every file's time: the commit's, for
	// reproducible digests.
	Created time.Time
	// Revision and Source are recorded as OCI annotations (org.opencontainers.image.*).
	Revision, Source, Version string
	// Out is the OCI image layout directory written (replaced).
	Out string
}

// Build cross-compiles the binary for each platform, writes the image index to an OCI layout
// at o.Out and an SPDX SBOM at o.Out/sbom.spdx.json, and returns the index's digest.
func Build(ctx context.Context, o Options) (v1.Hash, error) {
	if err := os.RemoveAll(o.Out); err != nil {
		return v1.Hash{}, err
	}
	work, err := os.MkdirTemp("", "flotilla-image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(work)
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var sbomFrom string
	for _, p := range o.Platforms {
		bin := filepath.Join(work, p.OS+"-"+p.Architecture, filepath.Base(Entrypoint))
		if err := compile(ctx, o, p, bin); err != nil {
			return v1.Hash{}, err
		}
		if sbomFrom == "" {
			sbomFrom = bin
		}
		img, err := platformImage(o, p, bin)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("image for %s/%s: %w", p.OS, p.Architecture, err)
		}
		platform := p
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	index = mutate.Annotations(index, annotations(o)).(v1.ImageIndex)
	path, err := layout.Write(o.Out, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := path.AppendIndex(index); err != nil {
		return v1.Hash{}, err
	}
	digest, err := index.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	sbom, err := SBOM(sbomFrom, o, digest)
	if err != nil {
		return v1.Hash{}, err
	}
	return digest, os.WriteFile(filepath.Join(o.Out, "sbom.spdx.json"), sbom, 0o644)
}

// compile builds a static binary for the platform: no cgo, no paths or build ID of this
// machine in it.
func compile(ctx context.Context, o Options, p v1.Platform, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -buildid=", "-o", out, o.Package)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %w\n%s", o.Package, p.OS, p.Architecture, err, output)
	}
	return nil
}

// platformImage is the root layer and the binary's layer, run as the non-root user.
func platformImage(o Options, p v1.Platform, bin string) (v1.Image, error) {
	root, err := layer(o.Created, rootFiles())
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	app, err := layer(o.Created, []file{{name: strings.TrimPrefix(Entrypoint, "/"), mode: 0o555, data: data}})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), root, app)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = v1.Time{Time: o.Created}
	cfg.Config.User = User
	cfg.Config.Entrypoint = []string{Entrypoint}
	cfg.Config.WorkingDir = Home
	cfg.Config.Env = []string{"HOME=" + Home, "PATH=/"}
	cfg.Config.Labels = annotations(o)
	for i := range cfg.History {
		cfg.History[i].Created = v1.Time{Time: o.Created}
	}
	return mutate.ConfigFile(img, cfg)
}

func annotations(o Options) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "flotilla-controller-manager",
		"org.opencontainers.image.source":   o.Source,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.created":  o.Created.UTC().Format(time.RFC3339),
	}
}

type file struct {
	name     string
	mode     int64
	data     []byte
	dir      bool
	uid, gid int
}

// rootFiles are all the image has besides the binary: who the users are, a home the manager
// may write its caches to (a volume in a read-only pod), and /tmp.
func rootFiles() []file {
	return []file{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/nonroot", mode: 0o700, dir: true, uid: UID, gid: UID},
		{name: "tmp", mode: 0o1777, dir: true},
	}
}

// layer is a tar layer of files with fixed times and owners, so its digest depends on their
// content only.
func layer(at time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: at, Uid: f.uid, Gid: f.gid, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(f.data))}
		if f.dir {
			h.Typeflag, h.Name, h.Size = tar.TypeDir, f.name+"/", 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, tarball.WithMediaType(types.OCILayer))
}
