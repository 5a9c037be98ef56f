// Package analysistest holds the fixtures the analysis tests share: fake members, metrics and
// runs of each provider, and a counting web server. Test code only.
package analysistest

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// CountingServer answers every path with handler and counts the requests it got.
func CountingServer(t *testing.T, handler http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// WebPathMetric reads {$.ok} from url.
func WebPathMetric(url string) rolloutv1alpha1.Metric {
	return rolloutv1alpha1.Metric{Name: "m", Provider: rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: url, JSONPath: "{$.ok}"}}}
}

// FakeMembers hands out a fake clientset per cluster; a cluster without one is unreachable.
type FakeMembers map[string]*fake.Clientset

func (f FakeMembers) Clientset(cluster string) (kubernetes.Interface, error) {
	cs, ok := f[cluster]
	if !ok {
		return nil, fmt.Errorf("cluster %s is not connected", cluster)
	}
	return cs, nil
}

// RestrictedPod and RestrictedContainer are what Pod Security "restricted" asks of a pod and
// each of its containers.
const (
	RestrictedPod       = `"securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}}`
	RestrictedContainer = `"securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}`
)

// JobMetric runs a restricted curl Job against {{args.host}}.
func JobMetric() rolloutv1alpha1.Metric {
	return rolloutv1alpha1.Metric{
		Name: "smoke",
		Provider: rolloutv1alpha1.MetricProvider{Job: &rolloutv1alpha1.JobMetric{
			Metadata: rolloutv1alpha1.JobMetadata{Labels: map[string]string{"team": "shop"}},
			Spec:     runtime.RawExtension{Raw: []byte(`{"backoffLimit":0,"template":{"spec":{` + RestrictedPod + `,"containers":[{"name":"smoke","image":"curl","args":["https://{{args.host}}/health"],` + RestrictedContainer + `}]}}}`)},
		}},
	}
}

// JobRun is a run of the job metric in clusters.
func JobRun(clusters ...string) *rolloutv1alpha1.AnalysisRun {
	run := RunWithArgs(map[string]string{"host": "checkout.shop"})
	run.Spec.Clusters = clusters
	return run
}

// Finish marks a member Job as finished, as the Job controller would.
func Finish(t *testing.T, cs *fake.Clientset, namespace, name string, condition batchv1.JobConditionType) {
	t.Helper()
	ctx := context.Background()
	job, err := cs.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: condition, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"})
	if _, err := cs.BatchV1().Jobs(namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// WebMetric is a web metric called name.
func WebMetric(name string) rolloutv1alpha1.Metric {
	return rolloutv1alpha1.Metric{Name: name, Provider: rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: "http://x"}}}
}

// RunWithArgs is the run shop/checkout-analysis with args.
func RunWithArgs(args map[string]string) *rolloutv1alpha1.AnalysisRun {
	run := &rolloutv1alpha1.AnalysisRun{}
	run.Namespace, run.Name = "shop", "checkout-analysis"
	for k, v := range args {
		run.Spec.Args = append(run.Spec.Args, rolloutv1alpha1.Argument{Name: k, Value: ptr.To(v)})
	}
	return run
}
