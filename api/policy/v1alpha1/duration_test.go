package v1alpha1

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestParseDuration(t *testing.T) {
	str := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	cases := []struct {
		name    string
		in      *intstr.IntOrString
		want    time.Duration
		set     bool
		wantErr string
	}{
		{"unset", nil, 0, false, ""},
		{"go duration", str("1m30s"), 90 * time.Second, true, ""},
		{"whole seconds as Argo writes them", DurationSeconds(30), 30 * time.Second, true, ""},
		{"zero", DurationSeconds(0), 0, true, ""},
		{"words", str("five minutes"), 0, true, `bakeTime: "five minutes" is not a duration; write one such as 90s`},
		{"negative string", str("-5s"), 0, true, `bakeTime: "-5s" is negative`},
		{"negative seconds", DurationSeconds(-5), 0, true, "bakeTime: -5 is negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, set, err := ParseDuration("bakeTime", c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want || set != c.set {
				t.Fatalf("got %v %v %v, want %v %v", got, set, err, c.want, c.set)
			}
		})
	}
}

// A strategy stored before validation caught its bad duration decodes, and Validate names the
// field, so the release controller can hold it with a message instead of failing every list.
func TestRolloutStrategyValidateNamesTheField(t *testing.T) {
	bad := intstr.FromString("abc")
	r := &RolloutStrategy{Waves: []Wave{
		{Name: "one", Gates: Gates{BakeTime: DurationSeconds(10)}},
		{Name: "two", Steps: []CanaryStep{{Pause: &PauseStep{}}, {Pause: &PauseStep{Duration: &bad}}}},
	}}
	err := r.Validate("spec.strategy")
	if err == nil || !strings.Contains(err.Error(), `spec.strategy.waves[1].steps[1].pause.duration: "abc" is not a duration`) {
		t.Fatalf("got %v", err)
	}
	r.Waves[1].Steps[1].Pause.Duration = DurationOf(time.Minute)
	if err := r.Validate("spec.strategy"); err != nil {
		t.Fatalf("valid strategy refused: %v", err)
	}
	r.ProgressDeadline = &bad
	if err := r.Validate("spec.strategy"); err == nil || !strings.Contains(err.Error(), "spec.strategy.progressDeadline") {
		t.Fatalf("got %v", err)
	}
}
