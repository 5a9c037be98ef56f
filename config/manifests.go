// Package config holds the manifests the binary installs; this file joins embedded YAML files
// into one multi-document stream for crd and security.
package config

import (
	"bytes"
	_ "embed"
	"io/fs"
	"sort"
)

// JoinYAML returns the files of fsys matching pattern as one multi-document YAML, in file-name
// order.
func JoinYAML(fsys fs.FS, pattern string) []byte {
	names, _ := fs.Glob(fsys, pattern)
	sort.Strings(names)
	var buf bytes.Buffer
	for _, n := range names {
		data, _ := fs.ReadFile(fsys, n)
		buf.WriteString("---\n")
		buf.Write(data)
		buf.WriteString("\n")
	}
	return buf.Bytes()
}

// Install is everything `flotilla install` applies: config/default rendered by kustomize
// (`make generate`).
//
//go:embed install.yaml
var Install []byte
