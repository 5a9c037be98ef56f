package localfleet

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/flotilla-dev/flotilla/internal/supervisor"
)

// TestMain lets the test binary stand in for `flotilla supervise`, so process.start and
// process.stop are tested against real supervisors without building flotilla.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "supervise" {
		os.Exit(fakeSupervise(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// fakeSupervise runs the supervisor as flotilla-supervisor does, from what process.start passes
// after "supervise", with a short backoff.
func fakeSupervise(args []string) int {
	s, err := supervisor.Parse(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s.Log = os.Stdout
	s.Backoff = supervisor.Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond, ResetAfter: time.Hour}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	if err := s.Run(signals); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
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
		pidFile: supervisor.PIDPath(dir, "sleeper"), logFile: filepath.Join(dir, "logs", "sleeper.log"),
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
	g.Expect(supervisor.Alive(second)).To(gomega.BeFalse())
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
	g.Expect(supervisor.Alive(orphan)).To(gomega.BeFalse())
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
