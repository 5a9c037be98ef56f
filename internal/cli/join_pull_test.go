package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/testenv"
)

// `flotilla join NAME --mode Pull` against a real control plane: the Cluster holds no
// endpoint and no credentials, stdout is the bootstrap token alone (so it can go to a file),
// and --agent-manifest prints instead the YAML that runs the agent in the member.
func TestJoinPullWritesTheClusterAndPrintsOnlyTheToken(t *testing.T) {
	cfg, c := testenv.Start(t)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cp"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["cp"] = &clientcmdapi.Context{Cluster: "cp", AuthInfo: "admin"}
	kc.CurrentContext = "cp"
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	join := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		cmd := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		cmd.SetArgs(append([]string{"join", "--kubeconfig", kubeconfig, "--mode", "Pull"}, args...))
		err := cmd.Execute()
		return out.String(), errOut.String(), err
	}

	out, errOut, err := join("store-42", "--label", "tier=edge")
	if err != nil {
		t.Fatalf("join: %v\n%s", err, errOut)
	}
	if !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{32}\n$`).MatchString(out) {
		t.Errorf("stdout %q; want the bootstrap token alone", out)
	}
	if !strings.Contains(errOut, "flotilla-agent --cluster store-42") {
		t.Errorf("stderr %q; want how to start the agent", errOut)
	}
	cl := &clusterv1alpha1.Cluster{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "store-42"}, cl); err != nil {
		t.Fatal(err)
	}
	if cl.Spec.SyncMode != clusterv1alpha1.SyncModePull || cl.Spec.Endpoint != "" || cl.Spec.CredentialsSecretRef.Name != "" || cl.Labels["tier"] != "edge" {
		t.Errorf("the Cluster: mode %s, endpoint %q, credentials %q, labels %v; want Pull with neither, labelled tier=edge",
			cl.Spec.SyncMode, cl.Spec.Endpoint, cl.Spec.CredentialsSecretRef.Name, cl.Labels)
	}

	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, cfg.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = join("store-43", "--agent-manifest", "--control-plane-url", "https://cp.example:8444", "--agent-ca-file", ca)
	if err != nil {
		t.Fatalf("join --agent-manifest: %v\n%s", err, errOut)
	}
	for _, want := range []string{"kind: Deployment", "--cluster=store-43", "--control-plane=https://cp.example:8444", "kind: ServiceAccount"} {
		if !strings.Contains(out, want) {
			t.Errorf("the agent manifest lacks %q", want)
		}
	}
	if _, _, err := join("store-44", "--agent-manifest", "--control-plane-url", "http://cp.example:8444"); err == nil || !strings.Contains(err.Error(), "--control-plane-url") {
		t.Errorf("a cleartext control-plane URL: %v; want refused naming --control-plane-url", err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "store-44"}, &clusterv1alpha1.Cluster{}); err == nil {
		t.Error("a refused join wrote its Cluster")
	}
}
