package interpret

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// podSpecPaths are where a workload keeps its pod spec: a pod template (Deployment,
// StatefulSet, DaemonSet, ReplicaSet, Job, Argo Rollout), a CronJob's job template, a Pod's own.
var podSpecPaths = [][]string{{"spec", "template", "spec"}, {"spec", "jobTemplate", "spec", "template", "spec"}, {"spec"}}

// Images lists the images a workload runs, the one answer history, the inventory API (and so
// the dashboard) and the CLI give: init containers first, as they run first, then containers,
// each image once. Nil for an object without a pod spec.
func Images(obj *unstructured.Unstructured) []string {
	for _, path := range podSpecPaths {
		var out []string
		found := false
		for _, field := range []string{"initContainers", "containers"} {
			cs, ok, _ := unstructured.NestedSlice(obj.Object, append(slices.Clone(path), field)...)
			found = found || ok
			for _, c := range cs {
				if m, ok := c.(map[string]any); ok {
					if img, ok := m["image"].(string); ok && img != "" && !slices.Contains(out, img) {
						out = append(out, img)
					}
				}
			}
		}
		if found {
			return out
		}
	}
	return nil
}
