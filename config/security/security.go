// Package security embeds the control-plane objects that make Flotilla safe to share between
// teams: the admission policies that keep Flotilla's derived objects Flotilla's, and the RBAC
// that gives namespace users their Flotilla rights through Kubernetes' admin, edit and view
// roles. config/default includes them, so `flotilla install` and `flotilla up` apply them; the
// controller-manager's own roles are in config/rbac.
package security

import (
	"embed"

	"github.com/flotilla-dev/flotilla/config"
)

//go:embed *.yaml
var files embed.FS

// YAML returns every object as one multi-document YAML, in file-name order.
func YAML() []byte { return config.JoinYAML(files, "*.yaml") }

// ManagerUser is the user name of the controller-manager's certificate in the local fleet;
// the admission policies let only it (and the in-cluster service account) write derived objects.
const ManagerUser = "system:flotilla:controller-manager"
