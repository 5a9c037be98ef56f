package kube

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// CheckMemberCredentials refuses a member kubeconfig that would make the controller-manager
// run a program or read a file of its host: exec credential plugins (unless the platform
// allows the named command), auth-provider plugins, and certificate, key or token files. A
// member credential is data (inline certificates and keys, or a bearer token), since whoever
// can write it into a Secret would otherwise run code as Flotilla. The error names the field.
func CheckMemberCredentials(kc *clientcmdapi.Config, allowedExecCommands []string) error {
	names := make([]string, 0, len(kc.AuthInfos))
	for n := range kc.AuthInfos {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := kc.AuthInfos[n]
		if a == nil {
			continue
		}
		at := fmt.Sprintf("users[%s].user", n)
		switch {
		case a.Exec != nil && !slices.Contains(allowedExecCommands, filepath.Base(a.Exec.Command)):
			return fmt.Errorf("%s.exec: runs the command %q on the controller-manager's host, which member credentials may not do; use a client certificate or a token, or have the platform allow the plugin (--allow-exec-plugin %s)",
				at, a.Exec.Command, filepath.Base(a.Exec.Command))
		case a.AuthProvider != nil:
			return fmt.Errorf("%s.auth-provider: %q plugins run code on the controller-manager's host, which member credentials may not do; use a client certificate or a token", at, a.AuthProvider.Name)
		case a.ClientCertificate != "" || a.ClientKey != "":
			return fmt.Errorf("%s.client-certificate/client-key: files of the controller-manager's host may not be read; inline them (client-certificate-data, client-key-data)", at)
		case a.TokenFile != "":
			return fmt.Errorf("%s.tokenFile: files of the controller-manager's host may not be read; inline the token", at)
		}
	}
	for n, c := range kc.Clusters {
		if c != nil && c.CertificateAuthority != "" {
			return fmt.Errorf("clusters[%s].cluster.certificate-authority: files of the controller-manager's host may not be read; inline it (certificate-authority-data)", n)
		}
	}
	return nil
}
