package e2e

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// userClient is a client of cluster ("" for the control plane) that authenticates as user in
// groups with a client certificate of the fleet's CA: it has exactly the rights RBAC gives it.
func userClient(t *testing.T, cluster, user string, groups ...string) client.Client {
	t.Helper()
	path, err := fleet.UserKubeconfig(cluster, user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return clientFor(t, path)
}
