package localfleet

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/flotilla-dev/flotilla/internal/supervisor"
)

// KillManager kills the controller-manager and its supervisor at once (SIGKILL), as a crashed
// node would: nothing is released and nothing starts it again until StartManager.
func (f *LocalFleet) KillManager() error {
	p := f.proc(managerComponent, managerComponent)
	spid, supervised := p.supervisorPID()
	pid, ok := p.pid()
	if supervised {
		_ = syscall.Kill(spid, syscall.SIGKILL)
	}
	if ok {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for (supervised && supervisorAlive(spid, p.stateDir, p.name)) || p.running() {
		if time.Now().After(deadline) {
			return errors.New("the controller-manager outlived SIGKILL for 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = os.Remove(p.pidFile)
	_ = os.Remove(supervisor.SupervisorPIDPath(p.stateDir, p.name))
	return nil
}

// ReplicaAddresses are the health, metrics and inventory addresses of controller-manager
// replica i (from 1; the first is the fleet's ManagerHealthAddress and ManagerMetricsAddress).
func (f *LocalFleet) ReplicaAddresses(i int) (health, metrics, inventory string, err error) {
	if i == 1 {
		return f.ManagerHealthAddress(), f.ManagerMetricsAddress(), fmt.Sprintf("127.0.0.1:%d", f.state.Ports.Inventory), nil
	}
	if i < 2 || i-2 >= len(f.state.Ports.Replicas) {
		return "", "", "", fmt.Errorf("this fleet runs %d controller-manager replicas, not %d", f.managerReplicas(), i)
	}
	p := f.state.Ports.Replicas[i-2]
	return fmt.Sprintf("127.0.0.1:%d", p.Health), fmt.Sprintf("127.0.0.1:%d", p.Metrics), fmt.Sprintf("127.0.0.1:%d", p.Inventory), nil
}
