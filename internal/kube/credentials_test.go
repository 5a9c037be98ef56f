package kube

import (
	"strings"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestCheckMemberCredentials(t *testing.T) {
	kc := func(a *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) *clientcmdapi.Config {
		cfg := clientcmdapi.NewConfig()
		cfg.AuthInfos["u"] = a
		if c == nil {
			c = &clientcmdapi.Cluster{Server: "https://m:6443", CertificateAuthorityData: []byte("ca")}
		}
		cfg.Clusters["m"] = c
		return cfg
	}
	cases := []struct {
		name    string
		cfg     *clientcmdapi.Config
		allowed []string
		want    string
	}{
		{"inline certificate", kc(&clientcmdapi.AuthInfo{ClientCertificateData: []byte("c"), ClientKeyData: []byte("k")}, nil), nil, ""},
		{"bearer token", kc(&clientcmdapi.AuthInfo{Token: "t"}, nil), nil, ""},
		{"exec plugin", kc(&clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "/bin/sh", Args: []string{"-c", "touch /tmp/pwned"}}}, nil), nil, `users[u].user.exec: runs the command "/bin/sh"`},
		{"allowed exec plugin", kc(&clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "/usr/bin/aws-iam-authenticator"}}, nil), []string{"aws-iam-authenticator"}, ""},
		{"allowed name does not allow another", kc(&clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "sh"}}, nil), []string{"aws-iam-authenticator"}, "users[u].user.exec"},
		{"auth provider", kc(&clientcmdapi.AuthInfo{AuthProvider: &clientcmdapi.AuthProviderConfig{Name: "oidc"}}, nil), nil, "users[u].user.auth-provider"},
		{"token file", kc(&clientcmdapi.AuthInfo{TokenFile: "/etc/shadow"}, nil), nil, "users[u].user.tokenFile"},
		{"certificate file", kc(&clientcmdapi.AuthInfo{ClientCertificate: "/root/.ssh/id_rsa"}, nil), nil, "users[u].user.client-certificate/client-key"},
		{"CA file", kc(&clientcmdapi.AuthInfo{Token: "t"}, &clientcmdapi.Cluster{Server: "https://m", CertificateAuthority: "/etc/passwd"}), nil, "clusters[m].cluster.certificate-authority"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckMemberCredentials(c.cfg, c.allowed)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
