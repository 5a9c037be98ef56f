// Command krew packages the CLI as the kubectl plugin `kubectl flotilla`: one tar.gz per
// platform holding the binary as kubectl-flotilla, and a krew plugin manifest naming each
// archive's URL and sha256 (`make krew`). Install from the files without a release:
//
//	kubectl krew install --manifest=dist/krew/flotilla.yaml --archive=dist/krew/kubectl-flotilla_linux_amd64.tar.gz
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

func main() {
	out := flag.String("out", "dist/krew", "directory for the archives and flotilla.yaml")
	version := flag.String("version", "v0.0.0-dev", "the plugin's version (a v-prefixed semantic version)")
	baseURL := flag.String("base-url", "https://github.com/flotilla-dev/flotilla/releases/download/VERSION", "where the archives will be downloaded from (VERSION is replaced)")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "platforms, comma-separated")
	flag.Parse()
	if err := run(*out, *version, strings.ReplaceAll(*baseURL, "VERSION", *version), strings.Split(*platforms, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "krew:", err)
		os.Exit(1)
	}
}

// Archive is one platform's package.
type Archive struct {
	OS, Arch, URI, Sha256 string
}

func run(out, version, baseURL string, platforms []string) error {
	if !strings.HasPrefix(version, "v") {
		return fmt.Errorf("--version %q: krew wants a v-prefixed semantic version, e.g. v0.5.0", version)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var archives []Archive
	for _, p := range platforms {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok {
			return fmt.Errorf("--platforms %q: give OS/ARCH pairs, e.g. linux/amd64", p)
		}
		bin := filepath.Join(out, "kubectl-flotilla-"+goos+"-"+goarch)
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/flotilla")
		build.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building the CLI for %s: %w", p, err)
		}
		name := fmt.Sprintf("kubectl-flotilla_%s_%s.tar.gz", goos, goarch)
		sum, err := writeArchive(filepath.Join(out, name), bin)
		if err != nil {
			return err
		}
		_ = os.Remove(bin)
		archives = append(archives, Archive{OS: goos, Arch: goarch, URI: baseURL + "/" + name, Sha256: sum})
		fmt.Printf("%s %s\n", sum, name)
	}
	manifest, err := Manifest(version, archives)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "flotilla.yaml"), manifest, 0o644)
}

// writeArchive packs bin as kubectl-flotilla with the LICENSE beside it, with fixed times so
// the same binary gives the same archive, and returns its sha256.
func writeArchive(path, bin string) (string, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	add := func(name, file string, mode int64) error {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	}
	if err := add("kubectl-flotilla", bin, 0o755); err != nil {
		return "", err
	}
	if _, err := os.Stat("LICENSE"); err == nil {
		if err := add("LICENSE", "LICENSE", 0o644); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	h := sha256.New()
	_, _ = io.Copy(h, bytes.NewReader(buf.Bytes()))
	return hex.EncodeToString(h.Sum(nil)), nil
}

var manifestTemplate = template.Must(template.New("krew").Parse(`apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: flotilla
spec:
  version: {{.Version}}
  homepage: https://github.com/flotilla-dev/flotilla
  shortDescription: Deliver to a fleet of clusters as if it were one
  description: |
    The Flotilla CLI as a kubectl plugin: join clusters, place and release workloads across
    them in waves, read their status, history and inventory, and install Flotilla into a
    cluster (kubectl flotilla install). The same binary as flotilla.
  platforms:
{{- range .Archives}}
  - selector:
      matchLabels:
        os: {{.OS}}
        arch: {{.Arch}}
    uri: {{.URI}}
    sha256: {{.Sha256}}
    bin: kubectl-flotilla
{{- end}}
`))

// Manifest is the krew plugin manifest for the archives.
func Manifest(version string, archives []Archive) ([]byte, error) {
	var buf bytes.Buffer
	err := manifestTemplate.Execute(&buf, struct {
		Version  string
		Archives []Archive
	}{version, archives})
	return buf.Bytes(), err
}
