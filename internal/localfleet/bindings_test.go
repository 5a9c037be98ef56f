package localfleet

import (
	"strings"
	"testing"
)

// The fleet's manager certificate is bound to every role the installed ServiceAccount is,
// and only as itself.
func TestManagerUserBindingsMirrorTheServiceAccounts(t *testing.T) {
	data, err := managerUserBindings()
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, role := range []string{"name: flotilla:controller-manager\n", "name: flotilla:controller-manager:templates\n", "name: flotilla:controller-manager:aggregated-templates\n"} {
		if !strings.Contains(s, role) {
			t.Errorf("no binding to %q in:\n%s", role, s)
		}
	}
	if got := strings.Count(s, "name: system:flotilla:controller-manager"); got != 4 {
		t.Errorf("%d bindings name the certificate user, want 4 (3 ClusterRoleBindings, 1 RoleBinding):\n%s", got, s)
	}
	if strings.Contains(s, "ServiceAccount") {
		t.Errorf("a binding still names the ServiceAccount:\n%s", s)
	}
}
