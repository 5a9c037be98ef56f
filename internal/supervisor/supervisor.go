// Package supervisor runs one process of a local fleet and starts it again whenever it exits,
// recording the process's pid, restarts and last exit in the fleet's state directory, where
// `flotilla status` and `down` read them. It imports the standard library only: a fleet of a
// hundred members runs two hundred supervisors, so their binary (cmd/flotilla-supervisor) must
// stay small. It knows nothing of the fleet's components and never starts one on its own.
package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
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

// Record is what a supervisor writes about its component after every change.
type Record struct {
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
	Running    = "running"
	BackingOff = "backoff"
	Stopped    = "stopped"
)

func PIDPath(stateDir, component string) string {
	return filepath.Join(stateDir, "pids", component+".pid")
}

func SupervisorPIDPath(stateDir, component string) string {
	return filepath.Join(stateDir, "pids", component+".supervisor.pid")
}

func RecordPath(stateDir, component string) string {
	return filepath.Join(stateDir, "pids", component+".supervisor.json")
}

// Args is the command line a supervisor of the component runs with, after the
// binary; supervisorAlive recognises a supervisor by it.
func Args(stateDir, component string) []string {
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
	rec := Record{SupervisorPID: os.Getpid()}
	if err := WriteFileAtomic(SupervisorPIDPath(s.StateDir, s.Component), []byte(strconv.Itoa(rec.SupervisorPID))); err != nil {
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
			rec.PID, rec.State, rec.Started, rec.NextStart = cmd.Process.Pid, Running, time.Now(), time.Time{}
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
		rec.PID, rec.State, rec.NextStart = 0, BackingOff, time.Now().Add(delay)
		_ = os.Remove(PIDPath(s.StateDir, s.Component))
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
func (s *Supervisor) recordStart(rec Record) error {
	if err := s.record(rec); err != nil {
		return err
	}
	return WriteFileAtomic(PIDPath(s.StateDir, s.Component), []byte(strconv.Itoa(rec.PID)))
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

func (s *Supervisor) stopped(rec Record) error {
	_ = os.Remove(PIDPath(s.StateDir, s.Component))
	rec.PID, rec.State, rec.NextStart = 0, Stopped, time.Time{}
	err := s.record(rec)
	_ = os.Remove(SupervisorPIDPath(s.StateDir, s.Component))
	return err
}

func (s *Supervisor) record(rec Record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return WriteFileAtomic(RecordPath(s.StateDir, s.Component), data)
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

// WriteFileAtomic writes then renames, so a reader never sees a half-written file.
func WriteFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadRecord reads what the component's supervisor last wrote; ok is false when
// there is no record.
func ReadRecord(stateDir, component string) (Record, bool) {
	data, err := os.ReadFile(RecordPath(stateDir, component))
	if err != nil {
		return Record{}, false
	}
	var rec Record
	if json.Unmarshal(data, &rec) != nil {
		return Record{}, false
	}
	return rec, true
}

// Parse reads the command line a supervisor is started with, after its "supervise" word:
// --component=NAME --state-dir=DIR [--stop-grace=DURATION] -- BINARY [ARGS...]. Log and Backoff
// are left for the caller.
func Parse(args []string) (*Supervisor, error) {
	s := &Supervisor{StopGrace: 10 * time.Second}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 >= len(args) {
				return nil, errors.New("no component command after --: give the binary and its arguments")
			}
			s.Binary, s.Args = args[i+1], args[i+2:]
			i = len(args)
		case strings.HasPrefix(a, "--component="):
			s.Component = strings.TrimPrefix(a, "--component=")
		case strings.HasPrefix(a, "--state-dir="):
			dir, err := filepath.Abs(strings.TrimPrefix(a, "--state-dir="))
			if err != nil {
				return nil, fmt.Errorf("--state-dir: %w", err)
			}
			s.StateDir = dir
		case strings.HasPrefix(a, "--stop-grace="):
			d, err := time.ParseDuration(strings.TrimPrefix(a, "--stop-grace="))
			if err != nil {
				return nil, fmt.Errorf("--stop-grace: %w (a duration such as 10s)", err)
			}
			s.StopGrace = d
		default:
			return nil, fmt.Errorf("unknown argument %q: supervise --component=NAME --state-dir=DIR [--stop-grace=10s] -- BINARY [ARGS...]", a)
		}
	}
	switch {
	case s.Component == "":
		return nil, errors.New("--component: name the component, e.g. east-apiserver")
	case s.StateDir == "":
		return nil, errors.New("--state-dir: give the fleet's state directory")
	case s.Binary == "":
		return nil, errors.New("no component command: end the flags with -- BINARY [ARGS...]")
	}
	return s, nil
}

// Alive says whether pid is a process that has not exited: a zombie, exited but not yet
// reaped, has.
func Alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i <= 0 || i+2 >= len(stat) || (stat[i+2] != 'Z' && stat[i+2] != 'X')
}
