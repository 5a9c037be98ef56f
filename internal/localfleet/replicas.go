package localfleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
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
	_ = os.Remove(supervisorPIDPath(p.stateDir, p.name))
	return nil
}

// ManagerReplica is another controller-manager process beside the fleet's own (a second
// replica of a sharded controller-manager), with addresses of its own.
type ManagerReplica struct {
	HealthAddress, MetricsAddress, InventoryAddress string
	cmd                                             *exec.Cmd
	exited                                          chan struct{}
}

// StartManagerReplica starts another controller-manager with the fleet's settings, its own
// addresses and state in dir, and extra flags; it returns once the replica is ready.
func (f *LocalFleet) StartManagerReplica(ctx context.Context, dir string, extra ...string) (*ManagerReplica, error) {
	if f.opts.Manager == nil {
		return nil, errors.New("this fleet runs no controller-manager")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	taken := map[int]bool{}
	ports := make([]int, 3)
	for i := range ports {
		p, err := freePort(taken)
		if err != nil {
			return nil, err
		}
		taken[p], ports[i] = true, p
	}
	r := &ManagerReplica{HealthAddress: fmt.Sprintf("127.0.0.1:%d", ports[0]), MetricsAddress: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		InventoryAddress: fmt.Sprintf("127.0.0.1:%d", ports[2]), exited: make(chan struct{})}
	args := append(f.managerArgs(r.HealthAddress, r.MetricsAddress, r.InventoryAddress, dir), f.opts.Manager.Args...)
	args = append(args, extra...)
	log, err := os.Create(filepath.Join(dir, "controller-manager.log"))
	if err != nil {
		return nil, err
	}
	r.cmd = exec.Command(f.state.ManagerBinary, args...)
	r.cmd.Stdout, r.cmd.Stderr = log, log
	if err := r.cmd.Start(); err != nil {
		_ = log.Close()
		return nil, err
	}
	go func() {
		_ = r.cmd.Wait()
		_ = log.Close()
		close(r.exited)
	}()
	ready, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if err := httpOK(ready, http.DefaultClient, "http://"+r.HealthAddress+"/readyz"); err == nil {
			return r, nil
		}
		select {
		case <-r.exited:
			return nil, fmt.Errorf("the controller-manager replica exited; see %s", log.Name())
		case <-ready.Done():
			_ = r.Kill()
			return nil, fmt.Errorf("the controller-manager replica was not ready within 2m; see %s", log.Name())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Kill kills the replica (SIGKILL) and waits for it to exit.
func (r *ManagerReplica) Kill() error { return r.signal(syscall.SIGKILL) }

// Stop stops the replica (SIGTERM: it releases its Leases) and waits for it to exit.
func (r *ManagerReplica) Stop() error { return r.signal(syscall.SIGTERM) }

func (r *ManagerReplica) signal(sig syscall.Signal) error {
	select {
	case <-r.exited:
		return nil
	default:
	}
	if err := r.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-r.exited:
		return nil
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
		return nil
	}
}
