package kube

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// Conditions returns the apply configurations of conds, each field set as metav1.Condition
// serializes it: observedGeneration left out when zero (it is omitempty), every other field
// always present. A status built with meta.SetStatusCondition thus claims, when applied, the
// same fields it would have claimed as a typed struct.
func Conditions(conds []metav1.Condition) []*metav1ac.ConditionApplyConfiguration {
	out := make([]*metav1ac.ConditionApplyConfiguration, 0, len(conds))
	for _, c := range conds {
		ac := metav1ac.Condition().
			WithType(c.Type).
			WithStatus(c.Status).
			WithLastTransitionTime(c.LastTransitionTime).
			WithReason(c.Reason).
			WithMessage(c.Message)
		if c.ObservedGeneration != 0 {
			ac.WithObservedGeneration(c.ObservedGeneration)
		}
		out = append(out, ac)
	}
	return out
}
