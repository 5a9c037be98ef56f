package manager

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/flotilla-dev/flotilla/config"
	"github.com/flotilla-dev/flotilla/internal/install"
)

// The Deployment that flotilla install applies passes only flags this manager has, with
// values it accepts: a renamed flag would otherwise surface as a crash-looping pod.
func TestTheInstalledDeploymentsArgsAreTheManagersFlags(t *testing.T) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(config.Install), 4096)
	var args []string
	for {
		d := &appsv1.Deployment{}
		if err := dec.Decode(d); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if d.Kind == "Deployment" && d.Name == "flotilla-controller-manager" {
			args = d.Spec.Template.Spec.Containers[0].Args
		}
	}
	if len(args) == 0 {
		t.Fatal("config/install.yaml has no controller-manager Deployment with args")
	}
	o := parseManagerArgs(t, args)
	if !o.LeaderElection || o.MetricsSecure == nil || !*o.MetricsSecure || o.HistoryDSN == "" {
		t.Errorf("the installed manager runs without leader election, secure metrics or its history store: %+v", args)
	}
}

// A sharded install's pods pass the manager's checks as the kubelet starts them: the pod name
// (as long as a Deployment's pods get) is a valid replica identity, and with no inventory
// certificate given the replica issues its own.
func TestTheShardedInstallsArgsPassTheShardChecks(t *testing.T) {
	objs, err := install.Objects(install.Options{Shard: true})
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, u := range objs {
		if u.GetKind() == "Deployment" {
			c := u.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			for _, a := range c["args"].([]any) {
				a := strings.ReplaceAll(a.(string), "$(POD_NAME)", "flotilla-controller-manager-7c9d8f6b54-x2kqz")
				args = append(args, strings.ReplaceAll(a, "$(POD_IP)", "10.244.1.17"))
			}
		}
	}
	o := parseManagerArgs(t, args)
	if err := o.checkShard(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	if !o.selfIssuedShardCertificates() || o.Shard.Address != "10.244.1.17:9443" {
		t.Fatalf("self-issued %v, address %s", o.selfIssuedShardCertificates(), o.Shard.Address)
	}
}

// parseManagerArgs reads args as the manager's command line does.
func parseManagerArgs(t *testing.T, args []string) Options {
	t.Helper()
	f := NewFlags()
	fs := pflag.NewFlagSet("flotilla-controller-manager", pflag.ContinueOnError)
	f.Bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	o, err := f.Options(fs)
	if err != nil {
		t.Fatal(err)
	}
	return o
}
