package binding

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/conditions"
)

// ReasonWaitingForDependencies: a cluster's first Work waits for the template's dependencies.
const ReasonWaitingForDependencies = "WaitingForDependencies"

// summarize sets a binding's Ready, Reconciling and Stalled conditions from the conditions
// it has (the kstatus contract): Ready when applied and healthy everywhere it is placed,
// Stalled when a customization fails (someone must fix it), Reconciling otherwise (applying,
// members rolling out, a member retried, degraded while failover may act, not scheduled yet).
func summarize(status *workv1alpha1.ResourceBindingStatus, placed bool, generation int64) {
	s := conditions.Summary{Conditions: &status.Conditions, Generation: generation}
	applied, healthy, interpreted := s.Get(workv1alpha1.ConditionApplied), s.Get(workv1alpha1.ConditionHealthy), s.Get(workv1alpha1.ConditionInterpreted)
	switch {
	case interpreted != nil && interpreted.Status == metav1.ConditionFalse:
		s.Stall(workv1alpha1.ReasonInterpreterError, interpreted.Message)
	case !placed:
		msg := "no cluster chosen yet"
		if sc := s.Get(workv1alpha1.ConditionScheduled); sc != nil && sc.Message != "" {
			msg = sc.Message
		}
		s.Progressing(workv1alpha1.ReasonNotScheduled, msg)
	case applied != nil && applied.Status == metav1.ConditionFalse && applied.Reason == "ApplyFailed":
		s.Progressing(workv1alpha1.ReasonApplyFailed, applied.Message)
	case applied != nil && applied.Status == metav1.ConditionFalse && applied.Reason == ReasonWaitingForDependencies:
		// A verdict, not progress: written at once, so users see what it waits for.
		s.Progressing(ReasonWaitingForDependencies, applied.Message)
	case applied == nil || applied.Status != metav1.ConditionTrue:
		s.Progressing(workv1alpha1.ReasonProgressing, "waiting for the members to apply it")
	case healthy != nil && healthy.Reason == string(workv1alpha1.HealthDegraded):
		s.Progressing(workv1alpha1.ReasonDegraded, healthy.Message)
	case healthy == nil || healthy.Status != metav1.ConditionTrue:
		s.Progressing(workv1alpha1.ReasonProgressing, "applied; waiting for it to be healthy in every cluster")
	default:
		s.Done(metav1.ConditionTrue, workv1alpha1.ReasonReady, "applied and healthy in every target cluster")
	}
}
