package binding

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// summarize sets a binding's Ready, Reconciling and Stalled conditions from the conditions
// it has (the kstatus contract): Ready when applied and healthy everywhere it is placed,
// Stalled when a customization fails (someone must fix it), Reconciling otherwise (applying,
// members rolling out, a member retried, degraded while failover may act, not scheduled yet).
func summarize(status *workv1alpha1.ResourceBindingStatus, placed bool, generation int64) {
	set := func(typ string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation})
	}
	is := func(typ string) *metav1.Condition { return meta.FindStatusCondition(status.Conditions, typ) }
	progress := func(reason, msg string) {
		set(workv1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
		set(workv1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
		meta.RemoveStatusCondition(&status.Conditions, workv1alpha1.ConditionStalled)
	}
	applied, healthy, interpreted := is(workv1alpha1.ConditionApplied), is(workv1alpha1.ConditionHealthy), is(workv1alpha1.ConditionInterpreted)
	switch {
	case interpreted != nil && interpreted.Status == metav1.ConditionFalse:
		set(workv1alpha1.ConditionReady, metav1.ConditionFalse, workv1alpha1.ReasonInterpreterError, interpreted.Message)
		set(workv1alpha1.ConditionStalled, metav1.ConditionTrue, workv1alpha1.ReasonInterpreterError, interpreted.Message)
		meta.RemoveStatusCondition(&status.Conditions, workv1alpha1.ConditionReconciling)
	case !placed:
		msg := "no cluster chosen yet"
		if s := is(workv1alpha1.ConditionScheduled); s != nil && s.Message != "" {
			msg = s.Message
		}
		progress(workv1alpha1.ReasonNotScheduled, msg)
	case applied != nil && applied.Status == metav1.ConditionFalse && applied.Reason == "ApplyFailed":
		progress(workv1alpha1.ReasonApplyFailed, applied.Message)
	case applied == nil || applied.Status != metav1.ConditionTrue:
		progress(workv1alpha1.ReasonProgressing, "waiting for the members to apply it")
	case healthy != nil && healthy.Reason == string(workv1alpha1.HealthDegraded):
		progress(workv1alpha1.ReasonDegraded, healthy.Message)
	case healthy == nil || healthy.Status != metav1.ConditionTrue:
		progress(workv1alpha1.ReasonProgressing, "applied; waiting for it to be healthy in every cluster")
	default:
		set(workv1alpha1.ConditionReady, metav1.ConditionTrue, workv1alpha1.ReasonReady, "applied and healthy in every target cluster")
		meta.RemoveStatusCondition(&status.Conditions, workv1alpha1.ConditionReconciling)
		meta.RemoveStatusCondition(&status.Conditions, workv1alpha1.ConditionStalled)
	}
}
