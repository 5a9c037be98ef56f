package localfleet

import (
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/onsi/gomega"
)

// TestMain lets the test binary stand in for `flotilla supervise`, so process.start and
// process.stop are tested against real supervisors without building flotilla.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "supervise" {
		os.Exit(fakeSupervise(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// fakeSupervise parses what process.start passes: --component= --state-dir= --stop-grace= --
// BINARY ARGS.
func fakeSupervise(args []string) int {
	s := &Supervisor{Log: os.Stdout, Backoff: Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond, ResetAfter: time.Hour}}
	for i, a := range args {
		switch {
		case a == "--":
			s.Binary, s.Args = args[i+1], args[i+2:]
		case strings.HasPrefix(a, "--component="):
			s.Component = strings.TrimPrefix(a, "--component=")
		case strings.HasPrefix(a, "--state-dir="):
			s.StateDir = strings.TrimPrefix(a, "--state-dir=")
		case strings.HasPrefix(a, "--stop-grace="):
			s.StopGrace, _ = time.ParseDuration(strings.TrimPrefix(a, "--stop-grace="))
		}
		if s.Binary != "" {
			break
		}
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	if err := s.Run(signals); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func TestBackoffNext(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 30 * time.Second, ResetAfter: time.Minute}
	tests := []struct {
		name      string
		prev, ran time.Duration
		want      time.Duration
	}{
		{name: "first exit", prev: 0, ran: time.Second, want: time.Second},
		{name: "quick exit doubles", prev: time.Second, ran: time.Second, want: 2 * time.Second},
		{name: "doubles again", prev: 8 * time.Second, ran: 0, want: 16 * time.Second},
		{name: "capped", prev: 16 * time.Second, ran: time.Second, want: 30 * time.Second},
		{name: "stays capped", prev: 30 * time.Second, ran: 59 * time.Second, want: 30 * time.Second},
		{name: "reset after a long run", prev: 30 * time.Second, ran: time.Minute, want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := b.next(tt.prev, tt.ran); got != tt.want {
				t.Errorf("next(%s, %s) = %s, want %s", tt.prev, tt.ran, got, tt.want)
			}
		})
	}
}

// syncBuffer is a log both the supervisor and the test use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runSupervisor runs s in the background; the returned func stops it with sig and returns
// Run's error.
func runSupervisor(t *testing.T, s *Supervisor) func(os.Signal) error {
	t.Helper()
	stop := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- s.Run(stop) }()
	stopped := false
	stopFn := func(sig os.Signal) error {
		stopped = true
		stop <- sig
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("the supervisor did not return within 30s of the stop signal")
			return nil
		}
	}
	t.Cleanup(func() {
		if !stopped {
			_ = stopFn(syscall.SIGKILL)
		}
	})
	return stopFn
}

func newTestSupervisor(t *testing.T, binary string, args ...string) *Supervisor {
	t.Helper()
	return &Supervisor{
		Component: "test", StateDir: t.TempDir(), Binary: binary, Args: args, Log: &syncBuffer{},
		Backoff:   Backoff{Initial: 20 * time.Millisecond, Max: 80 * time.Millisecond, ResetAfter: time.Hour},
		StopGrace: 5 * time.Second,
	}
}

func record(t *testing.T, s *Supervisor) SupervisorRecord {
	t.Helper()
	rec, _ := readSupervisorRecord(s.StateDir, s.Component)
	return rec
}

func childPID(s *Supervisor) int {
	p := process{name: s.Component, binary: s.Binary, pidFile: pidPath(s.StateDir, s.Component)}
	pid, _ := p.pid()
	return pid
}

// Whatever the exit status, the component is started again, with a delay that doubles up to
// the maximum; the record counts the restarts and says how it last exited.
func TestSupervisorRestartsWhateverTheExit(t *testing.T) {
	tests := []struct {
		binary   string
		lastExit string
	}{
		{binary: "/usr/bin/false", lastExit: "exit status 1"},
		{binary: "/usr/bin/true", lastExit: "exit status 0"},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.binary), func(t *testing.T) {
			g := gomega.NewWithT(t)
			s := newTestSupervisor(t, tt.binary)
			stop := runSupervisor(t, s)
			g.Eventually(func() int { return record(t, s).Restarts }).WithTimeout(20 * time.Second).Should(gomega.BeNumerically(">=", 4))
			g.Expect(stop(syscall.SIGTERM)).To(gomega.Succeed())

			rec := record(t, s)
			g.Expect(rec.LastExit).To(gomega.Equal(tt.lastExit))
			g.Expect(rec.State).To(gomega.Equal(SupervisorStopped))
			var delays []string
			for _, m := range regexp.MustCompile(`starting it again in (\S+)`).FindAllStringSubmatch(s.Log.(*syncBuffer).String(), 5) {
				delays = append(delays, m[1])
			}
			if diff := cmp.Diff([]string{"20ms", "40ms", "80ms", "80ms", "80ms"}[:len(delays)], delays); diff != "" || len(delays) < 4 {
				t.Errorf("backoff delays (-want +got):\n%s", diff)
			}
			for _, f := range []string{pidPath(s.StateDir, s.Component), supervisorPIDPath(s.StateDir, s.Component)} {
				if _, err := os.Stat(f); !os.IsNotExist(err) {
					t.Errorf("%s is left after the stop (err %v)", filepath.Base(f), err)
				}
			}
		})
	}
}

// A component that ran for ResetAfter starts again after the initial delay, not a longer one.
func TestSupervisorResetsBackoffAfterALongRun(t *testing.T) {
	g := gomega.NewWithT(t)
	s := newTestSupervisor(t, "/usr/bin/sleep", "0.1")
	s.Backoff.ResetAfter = 50 * time.Millisecond
	stop := runSupervisor(t, s)
	g.Eventually(func() int { return record(t, s).Restarts }).WithTimeout(20 * time.Second).Should(gomega.BeNumerically(">=", 3))
	g.Expect(stop(syscall.SIGTERM)).To(gomega.Succeed())
	for _, m := range regexp.MustCompile(`starting it again in (\S+)`).FindAllStringSubmatch(s.Log.(*syncBuffer).String(), -1) {
		g.Expect(m[1]).To(gomega.Equal("20ms"))
	}
}

// A component killed from outside comes back with a new pid; the record says it was killed.
func TestSupervisorRestartsAKilledComponent(t *testing.T) {
	g := gomega.NewWithT(t)
	s := newTestSupervisor(t, "/usr/bin/sleep", "600")
	stop := runSupervisor(t, s)
	g.Eventually(func() int { return childPID(s) }).WithTimeout(10 * time.Second).ShouldNot(gomega.BeZero())
	first := childPID(s)
	g.Expect(record(t, s).SupervisorPID).To(gomega.Equal(os.Getpid()))

	g.Expect(syscall.Kill(first, syscall.SIGKILL)).To(gomega.Succeed())
	g.Eventually(func() int { return childPID(s) }).WithTimeout(10 * time.Second).
		Should(gomega.And(gomega.Not(gomega.BeZero()), gomega.Not(gomega.Equal(first))))
	rec := record(t, s)
	g.Expect(rec.Restarts).To(gomega.Equal(1))
	g.Expect(rec.LastExit).To(gomega.Equal("signal: killed"))
	g.Expect(rec.State).To(gomega.Equal(SupervisorRunning))
	g.Expect(stop(syscall.SIGTERM)).To(gomega.Succeed())
}

// A stop signal is forwarded to the component, which is not started again; one that ignores
// it is killed after the grace.
func TestSupervisorStopDoesNotRestart(t *testing.T) {
	tests := []struct {
		name  string
		sig   syscall.Signal
		args  []string
		grace time.Duration
	}{
		{name: "SIGTERM forwarded", sig: syscall.SIGTERM, args: []string{"-c", "exec sleep 600"}, grace: 30 * time.Second},
		{name: "SIGINT forwarded", sig: syscall.SIGINT, args: []string{"-c", "exec sleep 600"}, grace: 30 * time.Second},
		{name: "ignored SIGTERM ends in a kill", sig: syscall.SIGTERM, args: []string{"-c", `trap "" TERM; while :; do sleep 0.05; done`}, grace: 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			s := newTestSupervisor(t, "/usr/bin/sh", tt.args...)
			s.StopGrace = tt.grace
			stop := runSupervisor(t, s)
			g.Eventually(func() int { return childPID(s) }).WithTimeout(10 * time.Second).ShouldNot(gomega.BeZero())
			pid := childPID(s)
			g.Expect(stop(tt.sig)).To(gomega.Succeed())
			g.Expect(notZombie(pid)).To(gomega.BeFalse(), "the component still runs after the stop")
			rec := record(t, s)
			g.Expect(rec.Restarts).To(gomega.BeZero())
			g.Expect(rec.State).To(gomega.Equal(SupervisorStopped))
			g.Expect(s.Log.(*syncBuffer).String()).NotTo(gomega.ContainSubstring("starting it again"))
		})
	}
}

// testProcess is a component started the way the fleet starts one, with the test binary as
// its supervisor.
func testProcess(t *testing.T, dir string) process {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return process{
		name: "sleeper", binary: "/usr/bin/sleep",
		pidFile: pidPath(dir, "sleeper"), logFile: filepath.Join(dir, "logs", "sleeper.log"),
		stateDir: dir, supervisor: exe, grace: 5 * time.Second,
	}
}

// A deliberate stop (down, StopComponent) ends the supervisor first, so the component is not
// started again; a kill from outside is undone. Only this state directory's supervisor is
// recognised.
func TestProcessStartStopUnderSupervision(t *testing.T) {
	g := gomega.NewWithT(t)
	dir := t.TempDir()
	p := testProcess(t, dir)
	t.Cleanup(func() { _, _ = p.stop(time.Second) })

	g.Expect(p.start("600")).To(gomega.Succeed())
	g.Eventually(p.running).WithTimeout(10 * time.Second).Should(gomega.BeTrue())
	first, _ := p.pid()
	spid, ok := p.supervisorPID()
	g.Expect(ok).To(gomega.BeTrue())
	g.Expect(p.start("600")).To(gomega.MatchError(gomega.ContainSubstring("already running")))

	other := p
	other.stateDir = t.TempDir()
	g.Expect(supervisorAlive(spid, other.stateDir, p.name)).To(gomega.BeFalse(), "another fleet's directory must not claim this supervisor")
	g.Expect(alive(spid, p.supervisor)).To(gomega.BeFalse(), "a supervisor is never taken for the component")

	g.Expect(syscall.Kill(first, syscall.SIGKILL)).To(gomega.Succeed())
	g.Eventually(func() int { pid, _ := p.pid(); return pid }).WithTimeout(10 * time.Second).
		Should(gomega.And(gomega.Not(gomega.BeZero()), gomega.Not(gomega.Equal(first))))
	g.Expect(p.supervision().Restarts).To(gomega.Equal(1))
	second, _ := p.pid()

	stopped, err := p.stop(p.grace)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(stopped).To(gomega.BeTrue())
	g.Expect(notZombie(second)).To(gomega.BeFalse())
	g.Expect(supervisorAlive(spid, dir, p.name)).To(gomega.BeFalse())
	g.Consistently(func() bool { _, ok := p.pid(); return ok }).WithTimeout(500*time.Millisecond).Should(gomega.BeFalse(),
		"a deliberately stopped component must stay stopped")
	sup := p.supervision()
	g.Expect(sup.Supervised).To(gomega.BeFalse())
	g.Expect(sup.LastExit).To(gomega.Equal("signal: killed"))

	stopped, err = p.stop(p.grace)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(stopped).To(gomega.BeFalse(), "stopping a stopped component is a no-op")
}

// A component started without a supervisor (by an older flotilla) is stopped and started again
// under one, so one supervisor owns every component.
func TestProcessStartAdoptsAnUnsupervisedComponent(t *testing.T) {
	g := gomega.NewWithT(t)
	dir := t.TempDir()
	p := testProcess(t, dir)
	t.Cleanup(func() { _, _ = p.stop(time.Second) })
	g.Expect(os.MkdirAll(filepath.Dir(p.pidFile), 0o755)).To(gomega.Succeed())
	orphan := startDetached(t, p.binary, "600")
	g.Expect(os.WriteFile(p.pidFile, fmt.Appendf(nil, "%d", orphan), 0o644)).To(gomega.Succeed())
	g.Expect(p.running()).To(gomega.BeFalse())

	g.Expect(p.start("600")).To(gomega.Succeed())
	g.Eventually(p.running).WithTimeout(10 * time.Second).Should(gomega.BeTrue())
	pid, _ := p.pid()
	g.Expect(pid).NotTo(gomega.Equal(orphan))
	g.Expect(notZombie(orphan)).To(gomega.BeFalse())
}

// startDetached starts binary as a process this test reaps, and returns its pid.
func startDetached(t *testing.T, binary string, args ...string) int {
	t.Helper()
	proc, err := os.StartProcess(binary, append([]string{binary}, args...), &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = proc.Wait() }()
	t.Cleanup(func() { _ = proc.Kill() })
	return proc.Pid
}
