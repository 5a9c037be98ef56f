package localfleet

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one component the fleet started, known by the pid file it wrote.
type process struct {
	name    string // component name, e.g. east-apiserver
	binary  string // absolute path of the executable
	pidFile string
	logFile string
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

// alive reports whether pid is a live (not zombie) process whose command line starts with binary.
func alive(pid int, binary string) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return string(argv0) == binary
}

// start launches the component detached from the caller's process group, so an interrupted
// `flotilla up` does not take the fleet down with it, and records its pid.
func (p process) start(args ...string) error {
	if pid, ok := p.pid(); ok {
		return fmt.Errorf("%s is already running as pid %d", p.name, pid)
	}
	if err := os.MkdirAll(filepath.Dir(p.logFile), 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(p.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(log, "\n=== %s starting %s\n", time.Now().Format(time.RFC3339), p.name)
	cmd := exec.Command(p.binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	// Reap the child if it exits while we live, so a stopped component never lingers as a
	// zombie, and remember the exit so waiting for readiness can stop at once.
	exited := make(chan struct{})
	exits.Store(cmd.Process.Pid, exited)
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	if err := os.MkdirAll(filepath.Dir(p.pidFile), 0o755); err != nil {
		return err
	}
	// Write then rename, so a reader never sees a half-written pid file.
	tmp := p.pidFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p.pidFile)
}

// stop sends SIGTERM, waits up to grace for the process to exit, then SIGKILLs it. It removes
// the pid file. Stopping a component that is not running is not an error.
func (p process) stop(grace time.Duration) (bool, error) {
	pid, ok := p.pid()
	if !ok {
		_ = os.Remove(p.pidFile)
		return false, nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return false, fmt.Errorf("stopping %s (pid %d): %w", p.name, pid, err)
	}
	deadline := time.Now().Add(grace)
	for alive(pid, p.binary) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(5 * time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = os.Remove(p.pidFile)
	return true, nil
}

// exits maps the pid of each child this process started to a channel closed when it exits.
var exits sync.Map

// exitedEarly reports whether the component is known to have exited: by its exit channel when
// this process started it, else by two failed liveness checks in a row.
func (p process) exitedEarly() bool {
	pid, ok := p.pid()
	if ok {
		return false
	}
	if ch, found := exits.Load(pid); found {
		select {
		case <-ch.(chan struct{}):
			return true
		default:
			return false
		}
	}
	time.Sleep(50 * time.Millisecond)
	_, ok = p.pid()
	return !ok
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
