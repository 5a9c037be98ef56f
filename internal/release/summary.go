package release

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/conditions"
)

// Summarize sets a release's Ready, Reconciling and Stalled conditions from its phase, its
// waves and its Valid condition: the kstatus contract every status write keeps.
func Summarize(st *rolloutv1alpha1.ReleaseStatus, generation int64) {
	s := conditions.Summary{Conditions: &st.Conditions, Generation: generation}
	// Ready carries the release's own message; Stalled says what must change.
	defer func() {
		if r := s.Get(conditions.Ready); r != nil && r.Status == metav1.ConditionFalse {
			s.Set(conditions.Ready, metav1.ConditionFalse, r.Reason, orText(st.Message, r.Reason))
		}
	}()
	if v := s.Get(ConditionValid); v != nil && v.Status == metav1.ConditionFalse && !Final(st.Phase) {
		s.Stall(rolloutv1alpha1.ReasonInvalid, v.Message)
		return
	}
	phase := string(st.Phase)
	switch st.Phase {
	case rolloutv1alpha1.ReleaseSucceeded:
		s.Done(metav1.ConditionTrue, phase, orText(st.Message, phase))
		return
	case rolloutv1alpha1.ReleaseSuperseded:
		s.Done(metav1.ConditionFalse, phase, orText(st.Message, phase))
		return
	case rolloutv1alpha1.ReleaseAborted, rolloutv1alpha1.ReleaseRolledBack:
		s.Stall(phase, orText(st.Message, phase))
		return
	case rolloutv1alpha1.ReleasePaused:
		s.Progressing(phase, orText(st.Message, phase))
		return
	}
	for i, w := range st.Waves {
		switch w.Phase {
		case rolloutv1alpha1.WaveFailed:
			s.Stall(rolloutv1alpha1.ReasonWaveFailed, fmt.Sprintf("wave %d/%d (%s) failed: %s; abort or retry the release", i+1, len(st.Waves), w.Name, orText(w.Message, "no message")))
			return
		case rolloutv1alpha1.WaveWaitingForApproval:
			s.Progressing(rolloutv1alpha1.ReasonWaitingForApproval, orText(st.Message, rolloutv1alpha1.ReasonWaitingForApproval))
			return
		}
	}
	reason := string(rolloutv1alpha1.ReleaseProgressing)
	s.Progressing(reason, orText(st.Message, reason))
}
