package clustercache

import (
	"errors"
	"testing"
	"time"
)

func TestNextHealth(t *testing.T) {
	boom := errors.New("connection refused")
	now := time.Unix(1000, 0)
	tests := []struct {
		name          string
		start         Readiness
		probes        []error
		threshold     int
		wantReadiness Readiness
		wantFailures  int
		wantError     string
	}{
		{name: "first success makes ready", start: ReadinessUnknown, probes: []error{nil}, threshold: 3, wantReadiness: ReadinessReady},
		{name: "failures below threshold keep ready", start: ReadinessReady, probes: []error{boom, boom}, threshold: 3, wantReadiness: ReadinessReady, wantFailures: 2, wantError: boom.Error()},
		{name: "threshold failures make not ready", start: ReadinessReady, probes: []error{boom, boom, boom}, threshold: 3, wantReadiness: ReadinessNotReady, wantFailures: 3, wantError: boom.Error()},
		{name: "failures below threshold keep unknown", start: ReadinessUnknown, probes: []error{boom}, threshold: 2, wantReadiness: ReadinessUnknown, wantFailures: 1, wantError: boom.Error()},
		{name: "one success recovers", start: ReadinessReady, probes: []error{boom, boom, boom, nil}, threshold: 3, wantReadiness: ReadinessReady},
		{name: "a success resets the count", start: ReadinessReady, probes: []error{boom, boom, nil, boom, boom}, threshold: 3, wantReadiness: ReadinessReady, wantFailures: 2, wantError: boom.Error()},
		{name: "threshold zero acts as one", start: ReadinessReady, probes: []error{boom}, threshold: 0, wantReadiness: ReadinessNotReady, wantFailures: 1, wantError: boom.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Health{Readiness: tt.start}
			for i, err := range tt.probes {
				h = nextHealth(h, probeResult{at: now.Add(time.Duration(i) * time.Second), err: err}, tt.threshold)
			}
			if h.Readiness != tt.wantReadiness || h.ConsecutiveFailures != tt.wantFailures || h.LastError != tt.wantError {
				t.Errorf("got readiness=%s failures=%d error=%q, want %s %d %q", h.Readiness, h.ConsecutiveFailures, h.LastError, tt.wantReadiness, tt.wantFailures, tt.wantError)
			}
			if want := now.Add(time.Duration(len(tt.probes)-1) * time.Second); !h.LastProbeTime.Equal(want) {
				t.Errorf("LastProbeTime = %v, want %v", h.LastProbeTime, want)
			}
		})
	}
}
