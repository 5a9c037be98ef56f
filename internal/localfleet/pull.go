package localfleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/registration"
)

// A Pull member is joined without a kubeconfig; its agent, a supervised `flotilla agent`
// beside the member, holds the member's own agent identity (ensureAgent) and dials the
// manager's agent endpoint with the fleet's CA.

func pullAgentComponent(member string) string { return member + "-flotilla-agent" }

func (f *LocalFleet) agentAddress() string { return fmt.Sprintf("127.0.0.1:%d", f.state.Ports.Agent) }

// AgentEndpoint is the controller-manager's agent endpoint, for Pull members' agents.
func (f *LocalFleet) AgentEndpoint() string { return "https://" + f.agentAddress() }

// PullAgentStateDir is where a Pull member's agent keeps its key and certificate.
func (f *LocalFleet) PullAgentStateDir(member string) string {
	return filepath.Join(f.opts.StateDir, "pull-agents", member)
}

// PullAgentArgs are the flags of a Pull member's agent on this fleet, without its token.
func (f *LocalFleet) PullAgentArgs(member, controlPlane string) []string {
	return []string{"agent", "--kubeconfig=" + f.AgentKubeconfig(member), "--cluster=" + member,
		"--control-plane=" + controlPlane, "--ca-file=" + f.CAFile(), "--state-dir=" + f.PullAgentStateDir(member)}
}

// joinPull joins a Pull member and starts its agent. A token is asked for only while the
// agent has no identity yet (a fleet started again keeps its agents' certificates).
func (f *LocalFleet) joinPull(ctx context.Context, c client.Client, m Member) error {
	dir := f.PullAgentStateDir(m.Name)
	args := f.PullAgentArgs(m.Name, f.AgentEndpoint())
	if _, err := os.Stat(filepath.Join(dir, "cert.pem")); errors.Is(err, os.ErrNotExist) {
		_, tok, _, err := registration.JoinPull(ctx, c, registration.PullJoinOptions{Name: m.Name, Labels: m.Labels, Overwrite: true,
			Description: m.Description, ShortName: m.ShortName, Environment: m.Environment})
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		tokenFile := filepath.Join(dir, "bootstrap-token")
		if err := os.WriteFile(tokenFile, []byte(tok.String()), 0o600); err != nil {
			return err
		}
		args = append(args, "--bootstrap-token-file="+tokenFile)
	}
	p := f.proc(pullAgentComponent(m.Name), managerComponent)
	if p.running() {
		return nil
	}
	return p.start(args...)
}
