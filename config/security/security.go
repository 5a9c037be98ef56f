// Package security embeds the control-plane objects that make Flotilla safe to share between
// teams: the admission policies that keep Flotilla's derived objects Flotilla's, and the RBAC
// that gives the controller-manager its identity and namespace users their Flotilla rights
// through Kubernetes' admin, edit and view roles. `flotilla up` installs them; a real install
// applies the same files.
package security

import (
	"bytes"
	"embed"
	"io/fs"
	"sort"
)

//go:embed *.yaml
var files embed.FS

// YAML returns every object as one multi-document YAML, in file-name order.
func YAML() []byte {
	names, _ := fs.Glob(files, "*.yaml")
	sort.Strings(names)
	var buf bytes.Buffer
	for _, n := range names {
		data, _ := files.ReadFile(n)
		buf.WriteString("---\n")
		buf.Write(data)
		buf.WriteString("\n")
	}
	return buf.Bytes()
}

// ManagerUser is the user name of the controller-manager's certificate in the local fleet;
// the admission policies let only it (and the in-cluster service account) write derived objects.
const ManagerUser = "system:flotilla:controller-manager"
