package v1alpha1

import (
	"fmt"
	"regexp"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// ParseDuration reads a duration field of a rollout: a Go duration string ("90s", "1h30m") or
// whole seconds (90), as Argo Rollouts writes them. field names it in the error. A nil value
// is (0, false, nil).
//
// The fields are IntOrString rather than metav1.Duration on purpose: metav1.Duration fails to
// decode a bad string, and one such object stored before validation caught it would fail every
// LIST of its kind in every controller. An IntOrString always decodes; a bad value is reported
// on the object that carries it.
func ParseDuration(field string, v *intstr.IntOrString) (time.Duration, bool, error) {
	if v == nil {
		return 0, false, nil
	}
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return 0, true, fmt.Errorf("%s: %d is negative; write whole seconds from 0 up", field, v.IntVal)
		}
		return time.Duration(v.IntVal) * time.Second, true, nil
	}
	d, err := time.ParseDuration(v.StrVal)
	if err != nil {
		return 0, true, fmt.Errorf("%s: %q is not a duration; write one such as 90s, 10m or 1h30m, or whole seconds such as 600", field, v.StrVal)
	}
	if d < 0 {
		return 0, true, fmt.Errorf("%s: %q is negative; write a duration from 0s up", field, v.StrVal)
	}
	return d, true, nil
}

// DurationSeconds is an IntOrString holding whole seconds, for building rollouts in code.
func DurationSeconds(seconds int32) *intstr.IntOrString {
	v := intstr.FromInt32(seconds)
	return &v
}

// DurationOf is an IntOrString holding d as a Go duration string, for building rollouts in code.
func DurationOf(d time.Duration) *intstr.IntOrString {
	v := intstr.FromString(d.String())
	return &v
}

// Validate checks every duration of the strategy and returns the first bad one, its field
// path rooted at prefix (for example "spec.strategy").
func (r *RolloutStrategy) Validate(prefix string) error {
	if _, _, err := ParseDuration(prefix+".progressDeadline", r.ProgressDeadline); err != nil {
		return err
	}
	if r.BlueGreen != nil {
		if _, _, err := ParseDuration(prefix+".blueGreen.scaleDownDelay", r.BlueGreen.ScaleDownDelay); err != nil {
			return err
		}
	}
	for i, w := range r.Waves {
		at := fmt.Sprintf("%s.waves[%d]", prefix, i)
		if _, _, err := ParseDuration(at+".gates.bakeTime", w.Gates.BakeTime); err != nil {
			return err
		}
		for k, st := range w.Steps {
			if st.SetHeaderRoute != nil {
				for m, h := range st.SetHeaderRoute.Match {
					if h.Regex == nil {
						continue
					}
					if _, err := regexp.Compile(*h.Regex); err != nil {
						return fmt.Errorf("%s.steps[%d].setHeaderRoute.match[%d].regex: not an RE2 regular expression (%v); fix it or use exact or prefix", at, k, m, err)
					}
				}
			}
			if st.Pause == nil {
				continue
			}
			if _, _, err := ParseDuration(fmt.Sprintf("%s.steps[%d].pause.duration", at, k), st.Pause.Duration); err != nil {
				return err
			}
		}
	}
	return nil
}
