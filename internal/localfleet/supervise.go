package localfleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"
)

// Backoff is how long a supervisor waits before starting a component that exited: Initial after
// the first exit, doubling on each quick exit up to Max, and Initial again once the component
// had run for ResetAfter.
type Backoff struct {
	Initial    time.Duration
	Max        time.Duration
	ResetAfter time.Duration
}

// DefaultBackoff is the local fleet's restart backoff: 1s doubling to 30s, reset after 60s of
// running, like a kubelet's CrashLoopBackOff but shorter, since a local fleet's outages are short.
var DefaultBackoff = Backoff{Initial: time.Second, Max: 30 * time.Second, ResetAfter: time.Minute}

// next is the delay before the next start, given the previous delay (0 before the first exit)
// and how long the component ran before it exited.
func (b Backoff) next(prev, ran time.Duration) time.Duration {
	if prev <= 0 || ran >= b.ResetAfter {
		return b.Initial
	}
	return min(2*prev, b.Max)
}

// Supervisor runs one component of the fleet and starts it again whenever it exits, until it is
// told to stop. It records its own pid, the component's pid and its restarts in the state
// directory, where `down` and `status` read them.
type Supervisor struct {
	// Component is the component's name, e.g. east-apiserver.
	Component string
	// StateDir is the fleet's absolute state directory.
	StateDir string
	// Binary and Args are the component's command.
	Binary string
	Args   []string
	// Log receives the component's output and the supervisor's own lines.
	Log io.Writer
	// Backoff paces restarts; zero means DefaultBackoff.
	Backoff Backoff
	// StopGrace is how long the component may take to exit after the forwarded signal before
	// it is killed.
	StopGrace time.Duration
}

// SupervisorRecord is what a supervisor writes about its component after every change.
type SupervisorRecord struct {
	// SupervisorPID is the supervisor's own pid.
	SupervisorPID int `json:"supervisorPID"`
	// PID is the component's pid while it runs, else 0.
	PID int `json:"pid,omitempty"`
	// State is running, backoff (waiting to start it again) or stopped.
	State string `json:"state"`
	// Started is when the component last started.
	Started time.Time `json:"started,omitzero"`
	// Restarts counts the starts after an exit since this supervisor began.
	Restarts int `json:"restarts"`
	// LastExit is how the component last exited, e.g. "exit status 1" or "signal: killed".
	LastExit string `json:"lastExit,omitempty"`
	// LastExitTime is when it last exited.
	LastExitTime time.Time `json:"lastExitTime,omitzero"`
	// NextStart is when the component starts again while in backoff.
	NextStart time.Time `json:"nextStart,omitzero"`
}

// Record states.
const (
	SupervisorRunning = "running"
	SupervisorBackoff = "backoff"
	SupervisorStopped = "stopped"
)

func pidPath(stateDir, component string) string {
	return filepath.Join(stateDir, "pids", component+".pid")
}

func supervisorPIDPath(stateDir, component string) string {
	return filepath.Join(stateDir, "pids", component+".supervisor.pid")
}

func supervisorRecordPath(stateDir, component string) string {
	return filepath.Join(stateDir, "pids", component+".supervisor.json")
}

// supervisorArgs is the command line a supervisor of the component runs with, after the
// binary; supervisorAlive recognises a supervisor by it.
func supervisorArgs(stateDir, component string) []string {
	return []string{"supervise", "--component=" + component, "--state-dir=" + stateDir}
}

// Run starts the component and supervises it until a signal arrives on stop: the signal is
// forwarded to the component, which is killed if it outlives StopGrace, and Run returns
// without starting it again. An exit for any other reason, whatever its status, is followed by
// a start after the backoff. Run fails only when it cannot record its state or the first start
// fails.
func (s *Supervisor) Run(stop <-chan os.Signal) error {
	if s.Backoff == (Backoff{}) {
		s.Backoff = DefaultBackoff
	}
	if err := os.MkdirAll(filepath.Join(s.StateDir, "pids"), 0o755); err != nil {
		return err
	}
	rec := SupervisorRecord{SupervisorPID: os.Getpid()}
	if err := writeFileAtomic(supervisorPIDPath(s.StateDir, s.Component), []byte(strconv.Itoa(rec.SupervisorPID))); err != nil {
		return err
	}
	var delay time.Duration
	for first := true; ; first = false {
		cmd := exec.Command(s.Binary, s.Args...)
		cmd.Stdout, cmd.Stderr = s.Log, s.Log
		fmt.Fprintf(s.Log, "\n=== %s starting %s\n", time.Now().Format(time.RFC3339), s.Component)
		var ran time.Duration
		if err := cmd.Start(); err != nil {
			if first {
				return fmt.Errorf("starting %s: %w", s.Component, err)
			}
			// A binary that vanished (a rebuild in progress) is an exit like any other.
			rec.LastExit, rec.LastExitTime = "cannot start: "+err.Error(), time.Now()
		} else {
			rec.PID, rec.State, rec.Started, rec.NextStart = cmd.Process.Pid, SupervisorRunning, time.Now(), time.Time{}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			if err := s.recordStart(rec); err != nil {
				_ = cmd.Process.Kill()
				<-exited
				return err
			}
			if first {
				// What flotilla's packages allocated at init is garbage here, and an idle
				// supervisor never allocates enough to collect it: 3.5 MiB less per
				// supervisor, measured, two of them per slim member.
				debug.FreeOSMemory()
			}
			select {
			case sig := <-stop:
				s.stopChild(cmd, sig, exited)
				return s.stopped(rec)
			case err := <-exited:
				rec.LastExit, rec.LastExitTime = exitText(err), time.Now()
				ran = rec.LastExitTime.Sub(rec.Started)
			}
		}
		delay = s.Backoff.next(delay, ran)
		rec.PID, rec.State, rec.NextStart = 0, SupervisorBackoff, time.Now().Add(delay)
		_ = os.Remove(pidPath(s.StateDir, s.Component))
		if err := s.record(rec); err != nil {
			return err
		}
		s.logf("%s exited (%s) after %s; starting it again in %s", s.Component, rec.LastExit, ran.Round(time.Millisecond), delay)
		timer := time.NewTimer(delay)
		select {
		case <-stop:
			timer.Stop()
			return s.stopped(rec)
		case <-timer.C:
		}
		rec.Restarts++
	}
}

// recordStart writes the record and then the component's pid file of a start: whoever sees
// the new pid also reads the record (restart count, start time) that goes with it.
func (s *Supervisor) recordStart(rec SupervisorRecord) error {
	if err := s.record(rec); err != nil {
		return err
	}
	return writeFileAtomic(pidPath(s.StateDir, s.Component), []byte(strconv.Itoa(rec.PID)))
}

// stopChild forwards sig to the component and waits for it to exit, killing it after
// StopGrace.
func (s *Supervisor) stopChild(cmd *exec.Cmd, sig os.Signal, exited <-chan error) {
	s.logf("%s received; stopping %s (pid %d)", sig, s.Component, cmd.Process.Pid)
	_ = cmd.Process.Signal(sig)
	grace := time.NewTimer(s.StopGrace)
	defer grace.Stop()
	select {
	case <-exited:
	case <-grace.C:
		s.logf("%s did not exit within %s; killing it", s.Component, s.StopGrace)
		_ = cmd.Process.Kill()
		<-exited
	}
}

func (s *Supervisor) stopped(rec SupervisorRecord) error {
	_ = os.Remove(pidPath(s.StateDir, s.Component))
	rec.PID, rec.State, rec.NextStart = 0, SupervisorStopped, time.Time{}
	err := s.record(rec)
	_ = os.Remove(supervisorPIDPath(s.StateDir, s.Component))
	return err
}

func (s *Supervisor) record(rec SupervisorRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return writeFileAtomic(supervisorRecordPath(s.StateDir, s.Component), data)
}

func (s *Supervisor) logf(format string, args ...any) {
	fmt.Fprintf(s.Log, "=== %s supervisor: %s\n", time.Now().Format(time.RFC3339), fmt.Sprintf(format, args...))
}

// exitText says how a component exited, from cmd.Wait's error.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ProcessState.String()
	}
	return err.Error()
}

// writeFileAtomic writes then renames, so a reader never sees a half-written file.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readSupervisorRecord reads what the component's supervisor last wrote; ok is false when
// there is no record.
func readSupervisorRecord(stateDir, component string) (SupervisorRecord, bool) {
	data, err := os.ReadFile(supervisorRecordPath(stateDir, component))
	if err != nil {
		return SupervisorRecord{}, false
	}
	var rec SupervisorRecord
	if json.Unmarshal(data, &rec) != nil {
		return SupervisorRecord{}, false
	}
	return rec, true
}

// supervisorAlive reports whether pid is a live supervisor of this component in this state
// directory, known by its command line: a reused pid is never taken for it.
func supervisorAlive(pid int, stateDir, component string) bool {
	if !notZombie(pid) {
		return false
	}
	args, err := cmdline(pid)
	if err != nil || len(args) < 4 {
		return false
	}
	want := supervisorArgs(stateDir, component)
	for i, w := range want {
		if args[1+i] != w {
			return false
		}
	}
	return true
}

// Supervision is what `flotilla status` shows of a component's supervisor.
type Supervision struct {
	// Supervised is true while a supervisor runs the component (or waits to restart it).
	Supervised    bool
	SupervisorPID int
	// Restarts, LastExit and LastExitTime come from the supervisor's record; they stay after
	// the fleet is stopped, until the next start.
	Restarts     int
	LastExit     string
	LastExitTime time.Time
	// NextStart is when a component in backoff starts again.
	NextStart time.Time
}

func (p process) supervision() Supervision {
	var s Supervision
	s.SupervisorPID, s.Supervised = p.supervisorPID()
	if !s.Supervised {
		s.SupervisorPID = 0
	}
	if rec, ok := readSupervisorRecord(p.stateDir, p.name); ok {
		s.Restarts, s.LastExit, s.LastExitTime = rec.Restarts, rec.LastExit, rec.LastExitTime
		if s.Supervised && rec.State == SupervisorBackoff {
			s.NextStart = rec.NextStart
		}
	}
	return s
}

// supervisorBinary is the flotilla binary that runs `supervise`: the controller-manager's
// binary this fleet was given or last ran, else this very binary.
func (f *LocalFleet) supervisorBinary() string {
	if f.opts.Manager != nil && f.opts.Manager.Binary != "" {
		return f.opts.Manager.Binary
	}
	if f.state.ManagerBinary != "" {
		return f.state.ManagerBinary
	}
	exe, _ := os.Executable()
	return exe
}
