package clustercache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
)

func node(name string, ready bool, cpu, mem, pods string) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse(pods)},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
		},
	}
}

func pod(nodeName string, phase corev1.PodPhase, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
		}}}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func TestSummarize(t *testing.T) {
	nodes := []*corev1.Node{
		node("a", true, "8", "32Gi", "110"),
		node("b", true, "8", "32Gi", "110"),
		node("down", false, "64", "256Gi", "110"), // not ready: no capacity counted
	}
	pods := []*corev1.Pod{
		pod("a", corev1.PodRunning, "2", "8Gi"),
		pod("b", corev1.PodPending, "1500m", "4Gi"),
		pod("", corev1.PodPending, "100", "1Ti"),      // unscheduled: requests nothing yet
		pod("a", corev1.PodSucceeded, "100", "1Ti"),   // finished
		pod("b", corev1.PodFailed, "100", "1Ti"),      // finished
		pod("down", corev1.PodRunning, "500m", "4Gi"), // bound: still counts
	}
	ns, rs := summarize(nodes, pods)
	if diff := cmp.Diff(clusterv1alpha1.NodeSummary{Total: 3, Ready: 2}, ns); diff != "" {
		t.Errorf("node summary (-want +got):\n%s", diff)
	}
	want := map[corev1.ResourceName][2]string{
		corev1.ResourceCPU:    {"16", "4"},
		corev1.ResourceMemory: {"64Gi", "16Gi"},
		corev1.ResourcePods:   {"220", "3"},
	}
	for r, w := range want {
		if a := rs.Allocatable[r]; a.Cmp(resource.MustParse(w[0])) != 0 {
			t.Errorf("allocatable %s = %s, want %s", r, a.String(), w[0])
		}
		if q := rs.Requested[r]; q.Cmp(resource.MustParse(w[1])) != 0 {
			t.Errorf("requested %s = %s, want %s", r, q.String(), w[1])
		}
	}
	if diff := cmp.Diff(clusterv1alpha1.ResourceUsage{CPU: "25%", Memory: "25%", Pods: "1%"}, rs.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}
