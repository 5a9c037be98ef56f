package agent

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/testenv"
)

// An agent run from `flotilla join --mode Pull --agent-manifest`, applied in a real member,
// keeps its identity and its snapshot of Works in the member's Secrets with the manifest's
// ServiceAccount and nothing more, and a snapshot larger than a Secret holds is refused
// naming the way out.
func TestTheManifestsAgentKeepsItsStateInMemberSecrets(t *testing.T) {
	ctx := context.Background()
	cfg, c := testenv.Start(t)
	out, err := Manifest(ManifestOptions{Cluster: "store-42", ControlPlane: "https://cp.example:8444", Token: "abcdef.0123456789abcdef0123456789abcdef",
		Image: ImageRepository + ":test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range manifestObjects(t, out) {
		if err := c.Patch(ctx, u, client.Apply, client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			t.Fatalf("applying the manifest's %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	asAgent := rest.CopyConfig(cfg)
	asAgent.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + manifestNamespace + ":" + manifestName,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + manifestNamespace, "system:authenticated"}}
	kc, err := kubernetes.NewForConfig(asAgent)
	if err != nil {
		t.Fatal(err)
	}
	store := secretStore{kube: kc, namespace: manifestNamespace, name: IdentitySecretName}

	if cert, key, err := store.read(ctx); err != nil || cert != nil || key != nil {
		t.Fatalf("a member with no identity yet: %q %q %v; want nothing and no error", cert, key, err)
	}
	if err := store.write(ctx, []byte("CERT"), []byte("KEY")); err != nil {
		t.Fatalf("the agent's ServiceAccount keeping its identity: %v", err)
	}
	if cert, key, err := store.read(ctx); err != nil || string(cert) != "CERT" || string(key) != "KEY" {
		t.Errorf("the identity read back: %q %q %v", cert, key, err)
	}
	if err := store.writeSnapshot(ctx, []byte("works")); err != nil {
		t.Fatalf("the agent's ServiceAccount keeping its snapshot: %v", err)
	}
	if got, err := store.readSnapshot(ctx); err != nil || string(got) != "works" {
		t.Errorf("the snapshot read back: %q %v", got, err)
	}
	if err := store.writeSnapshot(ctx, make([]byte, maxSnapshotSecretBytes+1)); err == nil || !strings.Contains(err.Error(), "--state-dir") {
		t.Errorf("a snapshot over a Secret's size: %v; want refused naming --state-dir", err)
	}
	if got, err := store.readSnapshot(ctx); err != nil || string(got) != "works" {
		t.Errorf("the kept snapshot after a refused one: %q %v; want the earlier one", got, err)
	}
	sec, err := kc.CoreV1().Secrets(manifestNamespace).Get(ctx, IdentitySecretName, metav1.GetOptions{})
	if err != nil || string(sec.Type) != "kubernetes.io/tls" {
		t.Errorf("the identity Secret: %v %v; want a kubernetes.io/tls Secret", sec.Type, err)
	}
}
