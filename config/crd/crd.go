// Package crd embeds the CustomResourceDefinitions generated from api/ by `make generate`, so
// the one binary can install them (`flotilla up`, the end-to-end tests).
package crd

import (
	"bytes"
	"embed"
	"io/fs"
	"sort"
)

//go:embed bases/*.yaml
var bases embed.FS

// YAML returns every CRD as one multi-document YAML, in file-name order.
func YAML() []byte {
	names, _ := fs.Glob(bases, "bases/*.yaml")
	sort.Strings(names)
	var buf bytes.Buffer
	for _, n := range names {
		data, _ := bases.ReadFile(n)
		buf.WriteString("---\n")
		buf.Write(data)
	}
	return buf.Bytes()
}
