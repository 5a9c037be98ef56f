package agent

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Flags are the agent's command-line flags (flotilla-agent and `flotilla agent`).
type Flags struct {
	o         Options
	tokenFile string
	zap       zap.Options
}

// Bind adds the flags to fs.
func (f *Flags) Bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.o.Cluster, "cluster", "", "the name this member was joined under (flotilla join NAME --mode Pull)")
	fs.StringVar(&f.o.ControlPlane, "control-plane", "", "the control plane's agent endpoint, https://HOST:PORT (its controller-manager's --agent-bind-address)")
	fs.StringVar(&f.o.CAFile, "ca-file", "", "CA of the agent endpoint's serving certificate (default: the system roots)")
	fs.StringVar(&f.tokenFile, "bootstrap-token-file", "", "file holding the bootstrap token flotilla join printed; used once, while --state-dir holds no identity")
	fs.StringVar(&f.o.StateDir, "state-dir", "", "directory for the agent's key and certificate; it must outlive restarts")
	fs.StringVar(&f.o.IdentitySecret, "identity-secret", "", "NAMESPACE/NAME of a Secret in the member that keeps the agent's key and certificate instead of --state-dir (an agent run as a Deployment)")
	fs.StringVar(&f.o.MetricsAddress, "metrics-bind-address", "0", "address of the Prometheus metrics; 0 turns it off")
	fs.StringVar(&f.o.HealthAddress, "health-probe-bind-address", "0", "address of /healthz and /readyz; 0 turns it off")
	fs.DurationVar(&f.o.HeartbeatInterval, "heartbeat-interval", DefaultHeartbeatInterval, "how often the agent reports its member's health; keep it well under the controller-manager's --agent-silence-limit")
	gofs := flag.NewFlagSet("zap", flag.ContinueOnError)
	f.zap.BindFlags(gofs)
	fs.AddGoFlagSet(gofs)
}

// Options checks the flags and reads the token file.
func (f *Flags) Options() (Options, error) {
	o := f.o
	if o.HeartbeatInterval <= 0 {
		return o, fmt.Errorf("--heartbeat-interval %s: give a positive duration of at least 1s (default %s)", o.HeartbeatInterval, DefaultHeartbeatInterval)
	}
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return o, fmt.Errorf("--bootstrap-token-file: %w", err)
		}
		o.BootstrapToken = strings.TrimSpace(string(b))
	}
	o.Version = "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		o.Version = bi.Main.Version
	}
	return o, o.Validate()
}

// Logger is the logger the zap flags ask for.
func (f *Flags) Logger() logr.Logger { return zap.New(zap.UseFlagOptions(&f.zap)) }
