package localfleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/internal/kube"
)

// AgentUser is the identity Flotilla uses in member: one per member, so a leaked credential
// opens one member and none of the others nor the control plane, and RBAC (not
// system:masters) decides what it may do, so it can be narrowed or revoked in the member.
func AgentUser(member string) string { return "system:flotilla:agent:" + member }

// agentBinding grants member's agent certificate user the agent ClusterRole (defined once, in
// kube, for `flotilla join` too). It is not named flotilla:agent: that binding belongs to the
// ServiceAccount `flotilla join` creates, and unjoin removes it, so joining a local member under
// another name must neither rebind nor remove the fleet's own identity.
const agentBinding = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: flotilla:agent:certificate
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %q}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: %q}
`

// AgentKubeconfig is the kubeconfig Flotilla joins member with: the member's own agent
// certificate, not the fleet's admin one.
func (f *LocalFleet) AgentKubeconfig(member string) string {
	return filepath.Join(f.opts.StateDir, "kubeconfigs", "flotilla-agent@"+member+".kubeconfig")
}

// ensureAgent issues member's agent certificate, writes its kubeconfig and grants it the
// agent role in the member.
func (f *LocalFleet) ensureAgent(ctx context.Context, member string) error {
	pk := f.pki()
	if err := os.MkdirAll(pk.path("agents"), 0o700); err != nil {
		return err
	}
	certFile, keyFile := filepath.Join("agents", member+".crt"), filepath.Join("agents", member+".key")
	if err := pk.issueClient(certFile, keyFile, AgentUser(member), nil); err != nil {
		return err
	}
	ca, err := os.ReadFile(pk.path(caCert))
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(pk.path(certFile))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(pk.path(keyFile))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[member] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://127.0.0.1:%d", f.apiserverPort(member)), CertificateAuthorityData: ca}
	// Inline: the kubeconfig is stored in a Secret by join, and member credentials are data.
	cfg.AuthInfos["flotilla-agent"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[member] = &clientcmdapi.Context{Cluster: member, AuthInfo: "flotilla-agent"}
	cfg.CurrentContext = member
	if err := clientcmd.WriteToFile(*cfg, f.AgentKubeconfig(member)); err != nil {
		return err
	}
	rc, err := f.RESTConfig(member)
	if err != nil {
		return err
	}
	role, err := yaml.Marshal(kube.AgentClusterRole())
	if err != nil {
		return err
	}
	return applyManifests(ctx, rc, []byte(string(role)+"---\n"+fmt.Sprintf(agentBinding, kube.AgentRoleName, AgentUser(member))))
}
