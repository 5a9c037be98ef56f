package clustercache

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	resourcehelper "k8s.io/component-helpers/resource"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
)

// summaries computes the node count and resource summary from the member's informers; both
// are nil until the informers have synced, so a half-filled cache never shows as capacity.
func (m *member) summaries() (*clusterv1alpha1.NodeSummary, *clusterv1alpha1.ResourceSummary) {
	nodeInformer := m.factory.Core().V1().Nodes()
	podInformer := m.factory.Core().V1().Pods()
	if !nodeInformer.Informer().HasSynced() || !podInformer.Informer().HasSynced() {
		return nil, nil
	}
	nodes, err := nodeInformer.Lister().List(labels.Everything())
	if err != nil {
		return nil, nil
	}
	pods, err := podInformer.Lister().List(labels.Everything())
	if err != nil {
		return nil, nil
	}
	ns, rs := summarize(nodes, pods)
	return &ns, &rs
}

// summarize sums allocatable over ready nodes and requests over pods bound to a node and not
// finished; each such pod also counts one against the pods resource.
func summarize(nodes []*corev1.Node, pods []*corev1.Pod) (clusterv1alpha1.NodeSummary, clusterv1alpha1.ResourceSummary) {
	ns := clusterv1alpha1.NodeSummary{Total: int32(len(nodes))}
	tracked := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods}
	alloc := zeroList(tracked)
	for _, n := range nodes {
		if !nodeReady(n) {
			continue
		}
		ns.Ready++
		for _, r := range tracked {
			if q, ok := n.Status.Allocatable[r]; ok {
				sum := alloc[r]
				sum.Add(q)
				alloc[r] = sum
			}
		}
	}
	req := zeroList(tracked)
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		podReq := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := podReq[r]; ok {
				sum := req[r]
				sum.Add(q)
				req[r] = sum
			}
		}
		pc := req[corev1.ResourcePods]
		pc.Add(resource.MustParse("1"))
		req[corev1.ResourcePods] = pc
	}
	rs := clusterv1alpha1.ResourceSummary{Allocatable: alloc, Requested: req}
	rs.Usage = clusterv1alpha1.ResourceUsage{
		CPU:    percent(req[corev1.ResourceCPU], alloc[corev1.ResourceCPU]),
		Memory: percent(req[corev1.ResourceMemory], alloc[corev1.ResourceMemory]),
		Pods:   percent(req[corev1.ResourcePods], alloc[corev1.ResourcePods]),
	}
	return ns, rs
}

func zeroList(names []corev1.ResourceName) corev1.ResourceList {
	l := corev1.ResourceList{}
	for _, n := range names {
		l[n] = resource.MustParse("0")
	}
	return l
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func percent(used, total resource.Quantity) string {
	if total.IsZero() {
		return "0%"
	}
	return fmt.Sprintf("%d%%", int64(float64(used.MilliValue())/float64(total.MilliValue())*100+0.5))
}
