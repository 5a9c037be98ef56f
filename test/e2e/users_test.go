package e2e

import (
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/kube"
)

// userClient is a client of cluster ("" for the control plane) that authenticates as user in
// groups with a client certificate of the fleet's CA: it has exactly the rights RBAC gives it.
func userClient(t *testing.T, cluster, user string, groups ...string) client.Client {
	t.Helper()
	path, err := fleet.UserKubeconfig(cluster, user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: kube.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
