package localfleet

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

var userName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?$`)

// UserKubeconfig writes a kubeconfig for cluster (the control plane when empty) that
// authenticates as user with groups through a client certificate of the fleet's CA, and
// returns its path. Such a user has no rights until RBAC grants them: it is how a platform
// team hands a tenant a login, and how the tests act as one. The same user and groups give
// the same certificate on every call.
func (f *LocalFleet) UserKubeconfig(cluster, user string, groups ...string) (string, error) {
	if cluster == "" {
		cluster = ControlPlaneName
	}
	if !userName.MatchString(user) {
		return "", fmt.Errorf("user %q: use lower-case letters, digits, '-', '.' and ':'", user)
	}
	for _, g := range groups {
		if g == "system:masters" {
			return "", fmt.Errorf("group system:masters bypasses every authorization check; use the fleet's admin kubeconfig for that")
		}
	}
	port := f.apiserverPort(cluster)
	if port == 0 {
		return "", fmt.Errorf("no cluster %q in this fleet (members: %v)", cluster, f.state.Fleet.Names())
	}
	pk := f.pki()
	id := strings.NewReplacer(":", "_").Replace(user)
	if len(groups) > 0 {
		id += "@" + strings.NewReplacer(":", "_", "/", "_").Replace(strings.Join(groups, "+"))
	}
	certFile, keyFile := filepath.Join("users", id+".crt"), filepath.Join("users", id+".key")
	if err := os.MkdirAll(pk.path("users"), 0o700); err != nil {
		return "", err
	}
	if err := pk.issueClient(certFile, keyFile, user, groups); err != nil {
		return "", err
	}
	ca, err := os.ReadFile(pk.path(caCert))
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://127.0.0.1:%d", port), CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificate: pk.path(certFile), ClientKey: pk.path(keyFile)}
	cfg.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: user}
	cfg.CurrentContext = cluster
	path := filepath.Join(f.opts.StateDir, "kubeconfigs", "users", id+"@"+cluster+".kubeconfig")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	return path, clientcmd.WriteToFile(*cfg, path)
}

// EtcdClientURL is where the fleet's etcd serves clients (TLS with required client
// certificates).
func (f *LocalFleet) EtcdClientURL() string {
	return fmt.Sprintf("https://127.0.0.1:%d", f.state.Ports.EtcdClient)
}
