package cli

import (
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// `flotilla status` says per component whether it runs, waits out its restart backoff or was
// stopped, and how and when it last exited.
func TestStatusShowsSupervision(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		status    localfleet.ComponentStatus
		wantState string
		wantExit  string
	}{
		{name: "running, never exited", status: localfleet.ComponentStatus{Running: true, Supervision: localfleet.Supervision{Supervised: true}},
			wantState: "running", wantExit: "-"},
		{name: "running after a kill", status: localfleet.ComponentStatus{Running: true, Supervision: localfleet.Supervision{
			Supervised: true, Restarts: 2, LastExit: "signal: killed", LastExitTime: now.Add(-90 * time.Second)}},
			wantState: "running", wantExit: "signal: killed, 1m30s ago"},
		{name: "in backoff", status: localfleet.ComponentStatus{Supervision: localfleet.Supervision{
			Supervised: true, LastExit: "exit status 1", LastExitTime: now.Add(-time.Second), NextStart: now.Add(4 * time.Second)}},
			wantState: "restarting in 4s", wantExit: "exit status 1, 1s ago"},
		{name: "stopped by down", status: localfleet.ComponentStatus{Supervision: localfleet.Supervision{LastExit: "exit status 0", LastExitTime: now.Add(-time.Hour)}},
			wantState: "stopped", wantExit: "exit status 0, 1h0m0s ago"},
		{name: "started by an older flotilla", status: localfleet.ComponentStatus{Running: true},
			wantState: "running (unsupervised: down and up to supervise it)", wantExit: "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := componentState(tt.status, now); got != tt.wantState {
				t.Errorf("state = %q, want %q", got, tt.wantState)
			}
			if got := lastExit(tt.status, now); got != tt.wantExit {
				t.Errorf("last exit = %q, want %q", got, tt.wantExit)
			}
		})
	}
}
