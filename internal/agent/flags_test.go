package agent

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// A heartbeat interval the control plane cannot take is refused, naming the flag; the
// default needs no flag.
func TestFlagsRefuseAHeartbeatIntervalThatCannotWork(t *testing.T) {
	base := []string{"--cluster=edge-1", "--control-plane=https://cp.example:9443", "--state-dir=/tmp/agent"}
	parse := func(extra ...string) (Options, error) {
		var f Flags
		fs := pflag.NewFlagSet("flotilla-agent", pflag.ContinueOnError)
		f.Bind(fs)
		if err := fs.Parse(append(append([]string{}, base...), extra...)); err != nil {
			t.Fatal(err)
		}
		return f.Options()
	}
	for _, arg := range []string{"--heartbeat-interval=0s", "--heartbeat-interval=-1s", "--heartbeat-interval=100ms"} {
		if _, err := parse(arg); err == nil || !strings.Contains(err.Error(), "--heartbeat-interval") {
			t.Errorf("%s: error = %v, want it to name --heartbeat-interval", arg, err)
		}
	}
	o, err := parse()
	if err != nil || o.HeartbeatInterval != DefaultHeartbeatInterval {
		t.Errorf("defaults: interval %s, error %v; want %s and no error", o.HeartbeatInterval, err, DefaultHeartbeatInterval)
	}
}
