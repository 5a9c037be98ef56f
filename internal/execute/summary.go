package execute

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// summarize sets a Work's Ready, Reconciling and Stalled conditions (the kstatus contract)
// from its Applied and Interpreted conditions and its health: Ready when applied and healthy
// in the member, Stalled when a person must act (an object owned by someone else and the
// policy says Abort, a customization that fails), Reconciling while it gets there or retries.
func summarize(status *workv1alpha1.WorkStatus, generation int64) {
	set := func(typ string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation})
	}
	progress := func(reason, msg string) {
		set(workv1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
		set(workv1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
		meta.RemoveStatusCondition(&status.Conditions, workv1alpha1.ConditionStalled)
	}
	stall := func(reason, msg string) {
		set(workv1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
		set(workv1alpha1.ConditionStalled, metav1.ConditionTrue, reason, msg)
		meta.RemoveStatusCondition(&status.Conditions, workv1alpha1.ConditionReconciling)
	}
	applied := meta.FindStatusCondition(status.Conditions, workv1alpha1.ConditionApplied)
	interpreted := meta.FindStatusCondition(status.Conditions, workv1alpha1.ConditionInterpreted)
	switch {
	case interpreted != nil && interpreted.Status == metav1.ConditionFalse:
		stall(workv1alpha1.ReasonInterpreterError, interpreted.Message)
	case applied == nil:
		progress(workv1alpha1.ReasonProgressing, "not applied yet")
	case applied.Status != metav1.ConditionTrue && applied.Reason == "Conflict":
		stall(applied.Reason, applied.Message)
	case applied.Status != metav1.ConditionTrue:
		progress(workv1alpha1.ReasonApplyFailed, applied.Message)
	case applied.ObservedGeneration != generation:
		progress(workv1alpha1.ReasonProgressing, "the new manifests are not applied yet")
	case status.Health == workv1alpha1.HealthDegraded:
		progress(workv1alpha1.ReasonDegraded, "applied; the member object is degraded")
	case status.Health != workv1alpha1.HealthHealthy:
		progress(workv1alpha1.ReasonProgressing, "applied; waiting for the member object to be healthy")
	default:
		set(workv1alpha1.ConditionReady, metav1.ConditionTrue, workv1alpha1.ReasonReady, "applied and healthy in the member")
		meta.RemoveStatusCondition(&status.Conditions, workv1alpha1.ConditionReconciling)
		meta.RemoveStatusCondition(&status.Conditions, workv1alpha1.ConditionStalled)
	}
}
