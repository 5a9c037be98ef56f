package image

import (
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime/debug"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// SBOM is an SPDX 2.3 document (JSON) of what the binary at bin was built from: the main
// module, every module linked into it with its version and checksum, and the Go toolchain,
// read from the binary's own build information.
func SBOM(bin string, o Options, index v1.Hash) ([]byte, error) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("build information of %s: %w", bin, err)
	}
	type checksum struct {
		Algorithm string `json:"algorithm"`
		Value     string `json:"checksumValue"`
	}
	type pkg struct {
		Name             string     `json:"name"`
		SPDXID           string     `json:"SPDXID"`
		Version          string     `json:"versionInfo,omitempty"`
		DownloadLocation string     `json:"downloadLocation"`
		FilesAnalyzed    bool       `json:"filesAnalyzed"`
		License          string     `json:"licenseConcluded"`
		Copyright        string     `json:"copyrightText"`
		Checksums        []checksum `json:"checksums,omitempty"`
		ExternalRefs     []any      `json:"externalRefs,omitempty"`
	}
	type relationship struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	}
	unsafe := regexp.MustCompile(`[^A-Za-z0-9.-]+`)
	id := func(name string) string { return "SPDXRef-Package-" + unsafe.ReplaceAllString(name, "-") }
	purl := func(path, version string) []any {
		return []any{map[string]string{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
			"referenceLocator": "pkg:golang/" + path + "@" + version}}
	}
	mainID := id(info.Main.Path)
	packages := []pkg{{Name: info.Main.Path, SPDXID: mainID, Version: o.Version, DownloadLocation: orNoAssertion(o.Source),
		License: "NOASSERTION", Copyright: "NOASSERTION"}}
	relationships := []relationship{{"SPDXRef-DOCUMENT", "DESCRIBES", mainID}}
	deps := append([]*debug.Module(nil), info.Deps...)
	sort.Slice(deps, func(i, j int) bool { return deps[i].Path < deps[j].Path })
	for _, d := range deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		p := pkg{Name: d.Path, SPDXID: id(d.Path), Version: m.Version, DownloadLocation: "NOASSERTION",
			License: "NOASSERTION", Copyright: "NOASSERTION", ExternalRefs: purl(d.Path, m.Version)}
		if m.Sum != "" {
			p.Checksums = []checksum{{Algorithm: "SHA256", Value: m.Sum}}
		}
		packages = append(packages, p)
		relationships = append(relationships, relationship{mainID, "DEPENDS_ON", p.SPDXID})
	}
	packages = append(packages, pkg{Name: "go", SPDXID: "SPDXRef-Package-go", Version: info.GoVersion, DownloadLocation: "https://go.dev/dl/",
		License: "BSD-3-Clause", Copyright: "NOASSERTION"})
	relationships = append(relationships, relationship{"SPDXRef-Package-go", "BUILD_TOOL_OF", mainID})
	doc := map[string]any{
		"spdxVersion":       "SPDX-2.3",
		"dataLicense":       "CC0-1.0",
		"SPDXID":            "SPDXRef-DOCUMENT",
		"name":              "flotilla-controller-manager@" + index.String(),
		"documentNamespace": "https://flotilla.dev/spdx/flotilla-controller-manager/" + index.Hex,
		"creationInfo": map[string]any{"created": o.Created.UTC().Format("2006-01-02T15:04:05Z"),
			"creators": []string{"Tool: flotilla-image"}},
		"packages":      packages,
		"relationships": relationships,
	}
	return json.MarshalIndent(doc, "", "  ")
}

func orNoAssertion(s string) string {
	if s == "" {
		return "NOASSERTION"
	}
	return s
}
