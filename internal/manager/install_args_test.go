package manager

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/flotilla-dev/flotilla/config"
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
	if !o.LeaderElection || o.MetricsSecure == nil || !*o.MetricsSecure || o.HistoryDSN == "" {
		t.Errorf("the installed manager runs without leader election, secure metrics or its history store: %+v", args)
	}
}
