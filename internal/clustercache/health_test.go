package clustercache

import (
	"errors"
	"strings"
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

func TestOptionsValidateNamesTheFlag(t *testing.T) {
	ok := DefaultOptions()
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults must be valid: %v", err)
	}
	tests := []struct {
		mutate func(*Options)
		want   string
	}{
		{func(o *Options) { o.ProbePeriod = 0 }, "--probe-period 0s: must be greater than zero"},
		{func(o *Options) { o.ProbeTimeout = 0 }, "--probe-timeout 0s"},
		{func(o *Options) { o.ProbeTimeout = time.Minute }, "--probe-timeout 1m0s: must be greater than zero and at most --probe-period (10s)"},
		{func(o *Options) { o.FailureThreshold = 0 }, "--failure-threshold 0: must be at least 1"},
		{func(o *Options) { o.DiscoveryInterval = time.Second }, "--discovery-interval 1s: must be at least --probe-period (10s)"},
		{func(o *Options) { o.DiscoveryInterval = 0 }, "--discovery-interval 0s: must be at least --probe-period (10s)"},
	}
	for _, tt := range tests {
		o := DefaultOptions()
		tt.mutate(&o)
		if err := o.Validate(); err == nil || err.Error() != tt.want && !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("got %v, want %q", err, tt.want)
		}
	}
}
