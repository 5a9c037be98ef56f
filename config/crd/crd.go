// Package crd embeds the CustomResourceDefinitions generated from api/ by `make generate`, so
// the one binary can install them (`flotilla up`, the end-to-end tests).
package crd

import (
	"embed"

	"github.com/flotilla-dev/flotilla/config"
)

//go:embed bases/*.yaml
var bases embed.FS

// YAML returns every CRD as one multi-document YAML, in file-name order.
func YAML() []byte { return config.JoinYAML(bases, "bases/*.yaml") }
