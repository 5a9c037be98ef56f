// Command image builds the controller-manager's OCI image (amd64 and arm64) without Docker
// into an OCI image layout, with an SPDX SBOM beside it: `make image`. The image's times come
// from the commit ($SOURCE_DATE_EPOCH if set), so one commit gives one digest. Push it with any
// OCI tool, e.g. `crane push dist/image REGISTRY/flotilla-controller-manager:TAG`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/flotilla-dev/flotilla/internal/image"
)

func main() {
	out := flag.String("out", "dist/image", "OCI image layout directory to write (replaced)")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "platforms, comma-separated")
	pkg := flag.String("package", "./cmd/flotilla-controller-manager", "the main package to put in the image (./cmd/flotilla-agent for the agent's)")
	flag.Parse()
	if err := run(*out, *platforms, *pkg); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(out, platformList, pkg string) error {
	o := image.Options{Package: pkg, Dir: ".", Out: out,
		Source: "https://github.com/flotilla-dev/flotilla"}
	for _, p := range strings.Split(platformList, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok {
			return fmt.Errorf("--platforms %q: give OS/ARCH pairs, e.g. linux/amd64,linux/arm64", p)
		}
		o.Platforms = append(o.Platforms, v1.Platform{OS: os, Architecture: arch})
	}
	o.Revision = git("rev-parse", "HEAD")
	o.Version = git("describe", "--tags", "--always", "--dirty")
	created := os.Getenv("SOURCE_DATE_EPOCH")
	if created == "" {
		created = git("log", "-1", "--format=%ct")
	}
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		return fmt.Errorf("the image's time: no commit time (%q) and no $SOURCE_DATE_EPOCH", created)
	}
	o.Created = time.Unix(secs, 0).UTC()
	start := time.Now()
	digest, err := image.Build(context.Background(), o)
	if err != nil {
		return err
	}
	fmt.Printf("image: %s written to %s (%s) in %.0fs, SBOM %s/sbom.spdx.json\n", digest, out, platformList, time.Since(start).Seconds(), out)
	return nil
}

func git(args ...string) string {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
