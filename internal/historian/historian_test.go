package historian

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

func TestOutcomeOfAClusterStatus(t *testing.T) {
	for _, c := range []struct {
		cs   workv1alpha1.ClusterStatus
		want string
	}{
		{workv1alpha1.ClusterStatus{}, ""},
		{workv1alpha1.ClusterStatus{Message: "conflict: not Flotilla's"}, OutcomeFailed},
		{workv1alpha1.ClusterStatus{Applied: true, Health: workv1alpha1.HealthProgressing}, OutcomeApplied},
		{workv1alpha1.ClusterStatus{Applied: true, Health: workv1alpha1.HealthHealthy}, OutcomeHealthy},
		{workv1alpha1.ClusterStatus{Applied: true, Health: workv1alpha1.HealthHealthy, Suspended: true}, ""},
		{workv1alpha1.ClusterStatus{Applied: true, Health: workv1alpha1.HealthDegraded}, OutcomeFailed},
	} {
		if got := outcomeOf(c.cs); got != c.want {
			t.Errorf("%+v: %q, want %q", c.cs, got, c.want)
		}
	}
}

func TestImagesOfWorkloadsAndCronJobs(t *testing.T) {
	deploy := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"initContainers": []any{map[string]any{"image": "init:1"}},
		"containers":     []any{map[string]any{"image": "web:2"}, map[string]any{"image": "sidecar:3"}},
	}}}}}
	if got := imagesOf(deploy); len(got) != 3 || got[0] != "init:1" || got[2] != "sidecar:3" {
		t.Errorf("deployment images %v", got)
	}
	cron := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"image": "job:1"}},
	}}}}}}}
	if got := imagesOf(cron); len(got) != 1 || got[0] != "job:1" {
		t.Errorf("cronjob images %v", got)
	}
	if got := imagesOf(&unstructured.Unstructured{Object: map[string]any{"data": map[string]any{}}}); len(got) != 0 {
		t.Errorf("configmap images %v", got)
	}
}
