package analysis

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis/analysistest"
)

// A namespace's job metric runs its Jobs in the run's own namespace of each member, whatever
// its spec or arguments say: a pod template naming kube-system (literally or through an
// argument) makes no Job and no namespace there.
func TestAnalysisJobsRunInTheRunsNamespace(t *testing.T) {
	ctx := context.Background()
	member := fake.NewClientset()
	provider := &JobProvider{Members: analysistest.FakeMembers{"eu-1": member}}
	run := analysistest.RunWithArgs(map[string]string{"ns": "kube-system"})
	run.Spec.Clusters = []string{"eu-1"}
	metric := rolloutv1alpha1.Metric{Name: "smoke", Provider: rolloutv1alpha1.MetricProvider{Job: &rolloutv1alpha1.JobMetric{
		Spec: runtime.RawExtension{Raw: []byte(`{"backoffLimit":0,"template":{"metadata":{"namespace":"{{args.ns}}"},"spec":{` + analysistest.RestrictedPod +
			`,"containers":[{"name":"smoke","image":"curl",` + analysistest.RestrictedContainer + `}]}}}`)},
	}}}
	if _, _, err := provider.Measure(ctx, run, metric); !errors.Is(err, ErrInProgress) {
		t.Fatalf("Measure: %v, want ErrInProgress", err)
	}
	jobs, err := member.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		t.Fatalf("%d Jobs in the member, want 1", len(jobs.Items))
	}
	if ns := jobs.Items[0].Namespace; ns != run.Namespace {
		t.Errorf("the Job runs in %s, want the run's namespace %s", ns, run.Namespace)
	}
	if _, err := member.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err == nil {
		t.Error("the member got a kube-system namespace from a tenant's analysis")
	}
}
