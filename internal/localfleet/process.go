package localfleet

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flotilla-dev/flotilla/internal/supervisor"
)

// process is one component the fleet started, known by the pid file it wrote.
type process struct {
	name    string // component name, e.g. east-apiserver
	binary  string // absolute path of the executable
	pidFile string
	logFile string
	// stateDir and supervisor (the flotilla binary) say how to start the component's
	// supervisor and how to recognise it.
	stateDir   string
	supervisor string
	grace      time.Duration // see stopGrace
	// env is added to the environment the component starts with (through its supervisor).
	env []string
}

// pid returns the recorded pid when that process still runs the recorded binary. A pid that
// was reused by another program is never reported, so `down` cannot kill a stranger.
func (p process) pid() (int, bool) {
	data, err := os.ReadFile(p.pidFile)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, alive(pid, p.binary)
}

// alive reports whether pid is a live (not zombie) process whose command line starts with
// binary. A supervisor of the same binary (the controller-manager's) is never taken for the
// component.
func alive(pid int, binary string) bool {
	if !supervisor.Alive(pid) {
		return false
	}
	args, err := cmdline(pid)
	if err != nil || len(args) == 0 || args[0] != binary {
		return false
	}
	return len(args) < 2 || args[1] != "supervise"
}

// cmdline is the argument vector of pid.
func cmdline(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00"), nil
}

// supervisorPID returns the pid of the component's supervisor while it runs.
func (p process) supervisorPID() (int, bool) {
	data, err := os.ReadFile(supervisor.SupervisorPIDPath(p.stateDir, p.name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, supervisorAlive(pid, p.stateDir, p.name)
}

// supervised reports whether a supervisor runs the component (it may be waiting to restart it).
func (p process) supervised() bool {
	_, ok := p.supervisorPID()
	return ok
}

// running reports whether the component runs under its supervisor.
func (p process) running() bool {
	_, ok := p.pid()
	return ok && p.supervised()
}

// start launches the component under a supervisor (`flotilla supervise`), which starts it
// again whenever it exits. The supervisor is detached from the caller's process group, so an
// interrupted `flotilla up` does not take the fleet down with it. A component whose supervisor
// waits to restart it is started at once by a new supervisor; one that runs without a
// supervisor (started by an older flotilla) is stopped first, so that one supervisor owns it.
func (p process) start(args ...string) error {
	if pid, ok := p.pid(); ok && p.supervised() {
		return fmt.Errorf("%s is already running as pid %d", p.name, pid)
	}
	if _, err := p.stop(p.grace); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.logFile), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.pidFile), 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(p.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	argv := append(supervisor.Args(p.stateDir, p.name), "--stop-grace="+p.grace.String(), "--", p.binary)
	cmd := exec.Command(p.supervisor, append(argv, args...)...)
	if len(p.env) > 0 {
		cmd.Env = append(os.Environ(), p.env...)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the supervisor of %s: %w", p.name, err)
	}
	// Reap the supervisor if it exits while we live, so it never lingers as a zombie.
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	// Return once the supervisor recorded its first start of the component, so the pid file
	// names it (or its exit is recorded for waitFor to report).
	deadline := time.After(30 * time.Second)
	for {
		if rec, ok := supervisor.ReadRecord(p.stateDir, p.name); ok && rec.SupervisorPID == cmd.Process.Pid && rec.State != supervisor.Stopped {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("the supervisor of %s exited; the end of %s:\n%s", p.name, p.logFile, p.logTail(15))
		case <-deadline:
			return fmt.Errorf("the supervisor of %s did not start it in 30s; see %s", p.name, p.logFile)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop stops the component and its supervisor: SIGTERM goes to the supervisor, which forwards
// it and does not restart the component, or straight to a component without a supervisor. It
// waits for both to exit, killing them if they outlive grace (and some slack for the
// supervisor's own kill). It removes the pid files. Stopping a component that is not running
// is not an error.
func (p process) stop(grace time.Duration) (bool, error) {
	spid, supervised := p.supervisorPID()
	pid, ok := p.pid()
	if !supervised && !ok {
		_ = os.Remove(p.pidFile)
		_ = os.Remove(supervisor.SupervisorPIDPath(p.stateDir, p.name))
		return false, nil
	}
	target := pid
	if supervised {
		target = spid
	}
	if err := syscall.Kill(target, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return false, fmt.Errorf("stopping %s (pid %d): %w", p.name, target, err)
	}
	deadline := time.Now().Add(grace + 2*time.Second)
	for {
		supAlive := supervised && supervisorAlive(spid, p.stateDir, p.name)
		pid, ok = p.pid()
		if !supAlive && !ok {
			break
		}
		if time.Now().After(deadline) {
			if ok {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			if supAlive {
				_ = syscall.Kill(spid, syscall.SIGKILL)
			}
			deadline = time.Now().Add(5 * time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = os.Remove(p.pidFile)
	_ = os.Remove(supervisor.SupervisorPIDPath(p.stateDir, p.name))
	return true, nil
}

// exitedEarly reports whether the component is known to have exited since the given time and
// is not running again: its supervisor recorded the exit, or no supervisor runs it (checked
// twice, so a start in progress is not mistaken for an exit).
func (p process) exitedEarly(since time.Time) bool {
	if _, ok := p.pid(); ok {
		return false
	}
	if p.supervised() {
		rec, ok := supervisor.ReadRecord(p.stateDir, p.name)
		return ok && rec.LastExitTime.After(since)
	}
	time.Sleep(50 * time.Millisecond)
	_, ok := p.pid()
	return !ok && !p.supervised()
}

// rssBytes is the resident memory of the running process, or 0.
func (p process) rssBytes() int64 {
	pid, ok := p.pid()
	if !ok {
		return 0
	}
	return processRSS(pid)
}

func processRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// logTail returns the last lines of the component's log, to explain why it failed.
func (p process) logTail(lines int) string {
	data, err := os.ReadFile(p.logFile)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
