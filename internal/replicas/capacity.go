package replicas

import (
	corev1 "k8s.io/api/core/v1"
)

// AvailableReplicas is how many more pods with the given requests fit in a cluster whose ready
// nodes offer allocatable and whose pods already request requested: the least over CPU,
// memory and the pod count. It sums over the cluster, not per node, so it is an upper bound
// the member's own scheduler may not reach when the free room is scattered.
func AvailableReplicas(allocatable, requested, perPod corev1.ResourceList) int64 {
	fit := int64(-1)
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		need, ok := perPod[r]
		if !ok || need.IsZero() {
			continue
		}
		free := allocatable[r]
		free.Sub(requested[r])
		n := free.MilliValue() / need.MilliValue()
		if fit < 0 || n < fit {
			fit = n
		}
	}
	freePods := allocatable[corev1.ResourcePods]
	freePods.Sub(requested[corev1.ResourcePods])
	if n := freePods.Value(); fit < 0 || n < fit {
		fit = n
	}
	return max(fit, 0)
}
