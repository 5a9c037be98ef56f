package localfleet

import (
	"os"
	"path/filepath"
	"time"

	"github.com/flotilla-dev/flotilla/internal/supervisor"
)

// supervisorAlive reports whether pid is a live supervisor of this component in this state
// directory, known by its command line: a reused pid is never taken for it.
func supervisorAlive(pid int, stateDir, component string) bool {
	if !supervisor.Alive(pid) {
		return false
	}
	args, err := cmdline(pid)
	if err != nil || len(args) < 4 {
		return false
	}
	want := supervisor.Args(stateDir, component)
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
	if rec, ok := supervisor.ReadRecord(p.stateDir, p.name); ok {
		s.Restarts, s.LastExit, s.LastExitTime = rec.Restarts, rec.LastExit, rec.LastExitTime
		if s.Supervised && rec.State == supervisor.BackingOff {
			s.NextStart = rec.NextStart
		}
	}
	return s
}

// SupervisorBinaryName is the small supervisor's binary (cmd/flotilla-supervisor), which `make
// build` puts beside flotilla.
const SupervisorBinaryName = "flotilla-supervisor"

// supervisorBinary runs each component's supervisor: flotilla-supervisor beside the flotilla
// binary this fleet was given or last ran (else this very binary) when it is there, for its
// small memory (about 1 MiB where `flotilla supervise` keeps 12, two per slim member), else that
// flotilla binary itself, whose hidden `supervise` command does the same.
func (f *LocalFleet) supervisorBinary() string {
	flotilla := ""
	switch {
	case f.opts.Manager != nil && f.opts.Manager.Binary != "":
		flotilla = f.opts.Manager.Binary
	case f.state.ManagerBinary != "":
		flotilla = f.state.ManagerBinary
	default:
		flotilla, _ = os.Executable()
	}
	small := filepath.Join(filepath.Dir(flotilla), SupervisorBinaryName)
	if st, err := os.Stat(small); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return small
	}
	return flotilla
}
