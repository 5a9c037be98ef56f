package supervisor

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/onsi/gomega"
)

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

func record(t *testing.T, s *Supervisor) Record {
	t.Helper()
	rec, _ := ReadRecord(s.StateDir, s.Component)
	return rec
}

// childPID is the pid the supervisor recorded for its component, 0 while none runs.
func childPID(s *Supervisor) int {
	data, err := os.ReadFile(PIDPath(s.StateDir, s.Component))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if pid > 0 && !Alive(pid) {
		return 0
	}
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
			g.Expect(rec.State).To(gomega.Equal(Stopped))
			var delays []string
			for _, m := range regexp.MustCompile(`starting it again in (\S+)`).FindAllStringSubmatch(s.Log.(*syncBuffer).String(), 5) {
				delays = append(delays, m[1])
			}
			if diff := cmp.Diff([]string{"20ms", "40ms", "80ms", "80ms", "80ms"}[:len(delays)], delays); diff != "" || len(delays) < 4 {
				t.Errorf("backoff delays (-want +got):\n%s", diff)
			}
			for _, f := range []string{PIDPath(s.StateDir, s.Component), SupervisorPIDPath(s.StateDir, s.Component)} {
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
	g.Expect(rec.State).To(gomega.Equal(Running))
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
			g.Expect(Alive(pid)).To(gomega.BeFalse(), "the component still runs after the stop")
			rec := record(t, s)
			g.Expect(rec.Restarts).To(gomega.BeZero())
			g.Expect(rec.State).To(gomega.Equal(Stopped))
			g.Expect(s.Log.(*syncBuffer).String()).NotTo(gomega.ContainSubstring("starting it again"))
		})
	}
}

// The command line process.start gives a supervisor parses back into the supervisor it means;
// a malformed one names what is missing.
func TestParse(t *testing.T) {
	s, err := Parse([]string{"--component=east-apiserver", "--state-dir=/tmp/fleet", "--stop-grace=3s", "--", "/bin/kube-apiserver", "--etcd-prefix=/east", "--"})
	if err != nil {
		t.Fatal(err)
	}
	want := &Supervisor{Component: "east-apiserver", StateDir: "/tmp/fleet", StopGrace: 3 * time.Second, Binary: "/bin/kube-apiserver", Args: []string{"--etcd-prefix=/east", "--"}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--state-dir=/d", "--", "/bin/true"}, "--component"},
		{[]string{"--component=c", "--", "/bin/true"}, "--state-dir"},
		{[]string{"--component=c", "--state-dir=/d"}, "-- BINARY"},
		{[]string{"--component=c", "--state-dir=/d", "--stop-grace=soon", "--", "/bin/true"}, "--stop-grace"},
		{[]string{"--component=c", "--state-dir=/d", "--colour=red", "--", "/bin/true"}, "--colour=red"},
	} {
		if _, err := Parse(tt.args); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want an error naming %s", tt.args, err, tt.want)
		}
	}
}
