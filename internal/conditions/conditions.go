// Package conditions keeps the kstatus contract on any kind's status: Ready says whether the
// object got where its spec asks, Reconciling is True while the controller works on it, and
// Stalled is True when it cannot go on without someone changing something. Every summary
// (Work, binding, release, analysis run) writes the three through one Summary, so kubectl
// wait, Argo CD and kstatus read every kind the same way. It owns no condition of its own and
// must not import any controller.
package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The condition types of the kstatus contract.
const (
	Ready       = "Ready"
	Reconciling = "Reconciling"
	Stalled     = "Stalled"
)

// Summary writes the kstatus conditions into a status's conditions, for its generation.
type Summary struct {
	Conditions *[]metav1.Condition
	Generation int64
}

// Set sets one condition for the summary's generation.
func (s Summary) Set(typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(s.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: s.Generation})
}

// Get is the condition of that type, nil when there is none.
func (s Summary) Get(typ string) *metav1.Condition {
	return meta.FindStatusCondition(*s.Conditions, typ)
}

// Done: the object is where its spec asks (Ready True), or will stay where it is without
// being stuck (Ready False); nothing is in progress.
func (s Summary) Done(ready metav1.ConditionStatus, reason, msg string) {
	s.Set(Ready, ready, reason, msg)
	meta.RemoveStatusCondition(s.Conditions, Reconciling)
	meta.RemoveStatusCondition(s.Conditions, Stalled)
}

// Progressing: not Ready yet, the controller is getting there (or retrying).
func (s Summary) Progressing(reason, msg string) {
	s.Set(Ready, metav1.ConditionFalse, reason, msg)
	s.Set(Reconciling, metav1.ConditionTrue, reason, msg)
	meta.RemoveStatusCondition(s.Conditions, Stalled)
}

// Stall: not Ready, and it will not be until someone changes something.
func (s Summary) Stall(reason, msg string) {
	s.Set(Ready, metav1.ConditionFalse, reason, msg)
	s.Set(Stalled, metav1.ConditionTrue, reason, msg)
	meta.RemoveStatusCondition(s.Conditions, Reconciling)
}
