package install

import (
	"context"
	"fmt"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ManagerKubeconfig is a kubeconfig for the controller-manager's ServiceAccount in the API
// server of cfg, with a bound token of ttl (the server may shorten it): what a manager outside
// that server (the dedicated layout) runs with. It returns when the token expires.
func ManagerKubeconfig(ctx context.Context, cfg *rest.Config, ttl time.Duration) ([]byte, time.Time, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, time.Time{}, err
	}
	seconds := int64(ttl.Seconds())
	tr, err := kube.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, ManagerServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("requesting a token for serviceaccount %s/%s (is Flotilla installed?): %w", Namespace, ManagerServiceAccount, err)
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return nil, time.Time{}, fmt.Errorf("reading the API server's CA: %w", err)
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["flotilla"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: ca, TLSServerName: cfg.ServerName, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos[ManagerServiceAccount] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["flotilla"] = &clientcmdapi.Context{Cluster: "flotilla", AuthInfo: ManagerServiceAccount}
	kc.CurrentContext = "flotilla"
	data, err := clientcmd.Write(*kc)
	return data, tr.Status.ExpirationTimestamp.Time, err
}
