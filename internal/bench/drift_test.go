package bench

import (
	"strings"
	"testing"
	"time"
)

func TestDriftOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o    DriftOptions
		flag string // named in the error; empty for valid options
	}{
		{DriftOptions{Templates: 1000, Changes: 100}, ""},
		{DriftOptions{Templates: 1, Changes: 1}, ""},
		{DriftOptions{Templates: 0, Changes: 100}, "--templates 0"},
		{DriftOptions{Templates: -3, Changes: 100}, "--templates -3"},
		{DriftOptions{Templates: 10, Changes: 0}, "--changes 0"},
		{DriftOptions{Templates: 10, Changes: -1}, "--changes -1"},
	} {
		err := tc.o.Validate()
		switch {
		case tc.flag == "" && err != nil:
			t.Errorf("%+v: unexpected error %v", tc.o, err)
		case tc.flag != "" && (err == nil || !strings.Contains(err.Error(), tc.flag)):
			t.Errorf("%+v: error %v, want one naming %q", tc.o, err, tc.flag)
		}
	}
}

func TestPct(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[int]time.Duration{50: 50 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond, 1: time.Millisecond} {
		if got := pct(d, p); got != want {
			t.Errorf("pct(1..100ms, %d) = %s, want %s", p, got, want)
		}
	}
	if d[0] != 100*time.Millisecond {
		t.Errorf("pct sorted its input")
	}
	one := []time.Duration{7 * time.Millisecond}
	for _, p := range []int{0, 50, 99, 100} {
		if got := pct(one, p); got != 7*time.Millisecond {
			t.Errorf("pct(one sample, %d) = %s, want 7ms", p, got)
		}
	}
}
