package execute

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/conditions"
)

// summarize sets a Work's Ready, Reconciling and Stalled conditions (the kstatus contract)
// from its Applied and Interpreted conditions and its health: Ready when applied and healthy
// in the member, Stalled when a person must act (an object owned by someone else and the
// policy says Abort, a customization that fails), Reconciling while it gets there or retries.
func summarize(status *workv1alpha1.WorkStatus, generation int64) {
	s := conditions.Summary{Conditions: &status.Conditions, Generation: generation}
	applied, interpreted := s.Get(workv1alpha1.ConditionApplied), s.Get(workv1alpha1.ConditionInterpreted)
	switch {
	case interpreted != nil && interpreted.Status == metav1.ConditionFalse:
		s.Stall(workv1alpha1.ReasonInterpreterError, interpreted.Message)
	case applied == nil:
		s.Progressing(workv1alpha1.ReasonProgressing, "not applied yet")
	case applied.Status != metav1.ConditionTrue && applied.Reason == "Conflict":
		s.Stall(applied.Reason, applied.Message)
	case applied.Status != metav1.ConditionTrue:
		s.Progressing(workv1alpha1.ReasonApplyFailed, applied.Message)
	case applied.ObservedGeneration != generation:
		s.Progressing(workv1alpha1.ReasonProgressing, "the new manifests are not applied yet")
	case status.Health == workv1alpha1.HealthDegraded:
		s.Progressing(workv1alpha1.ReasonDegraded, "applied; the member object is degraded")
	case status.Health != workv1alpha1.HealthHealthy:
		s.Progressing(workv1alpha1.ReasonProgressing, "applied; waiting for the member object to be healthy")
	default:
		s.Done(metav1.ConditionTrue, workv1alpha1.ReasonReady, "applied and healthy in the member")
	}
}
