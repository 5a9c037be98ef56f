package analysisrun

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis"
	"github.com/flotilla-dev/flotilla/internal/analysis/analysistest"
	"github.com/flotilla-dev/flotilla/internal/eventstest"
)

// harness reconciles one run with a clock the test moves.
type harness struct {
	t        *testing.T
	client   client.Client
	ctrl     *Controller
	recorder *events.FakeRecorder
	now      time.Time
	key      client.ObjectKey
}

func newHarness(t *testing.T, run *rolloutv1alpha1.AnalysisRun, members analysis.Members) *harness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := rolloutv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(run).WithStatusSubresource(&rolloutv1alpha1.AnalysisRun{}).Build()
	h := &harness{t: t, client: c, recorder: events.NewFakeRecorder(10), now: t0, key: client.ObjectKeyFromObject(run)}
	h.ctrl = &Controller{Client: c, Members: members, Recorder: h.recorder, Now: func() time.Time { return h.now }, Egress: testLoopback}
	return h
}

func (h *harness) reconcile() (ctrl.Result, *rolloutv1alpha1.AnalysisRun) {
	h.t.Helper()
	res, err := h.ctrl.Reconcile(context.Background(), ctrl.Request{NamespacedName: h.key})
	if err != nil {
		h.t.Fatal(err)
	}
	return res, h.get()
}

func (h *harness) get() *rolloutv1alpha1.AnalysisRun {
	h.t.Helper()
	run := &rolloutv1alpha1.AnalysisRun{}
	if err := h.client.Get(context.Background(), h.key, run); err != nil {
		h.t.Fatal(err)
	}
	return run
}

func (h *harness) events() []string { return eventstest.Drain(h.recorder) }

func newRun(metrics ...rolloutv1alpha1.Metric) *rolloutv1alpha1.AnalysisRun {
	run := &rolloutv1alpha1.AnalysisRun{Spec: rolloutv1alpha1.AnalysisRunSpec{Metrics: metrics}}
	run.Namespace, run.Name = "shop", "checkout-analysis"
	return run
}

func TestControllerMeasuresOnSchedule(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	metric := rolloutv1alpha1.Metric{Name: "health", Count: ptr.To[int32](2), Interval: "1m", SuccessCondition: "result == true",
		Provider: rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: srv.URL, JSONPath: "{$.ok}"}}}
	h := newHarness(t, newRun(metric), nil)

	res, run := h.reconcile()
	if run.Status.Phase != rolloutv1alpha1.AnalysisRunning || run.Status.StartedAt == nil || !run.Status.StartedAt.Time.Equal(t0) {
		t.Fatalf("after the first reconcile: %+v", run.Status)
	}
	if r := run.Status.MetricResults[0]; r.Count != 1 || r.Successful != 1 || r.Measurements[0].Value != "true" {
		t.Errorf("first measurement: %+v", r)
	}
	if res.RequeueAfter != time.Minute {
		t.Errorf("requeue after %s, want 1m", res.RequeueAfter)
	}

	// Early: nothing is due, nothing is written.
	h.now = t0.Add(30 * time.Second)
	rv := run.ResourceVersion
	res, run = h.reconcile()
	if calls.Load() != 1 || run.ResourceVersion != rv || res.RequeueAfter != 30*time.Second {
		t.Errorf("early reconcile: %d calls, resourceVersion %s->%s, requeue %s", calls.Load(), rv, run.ResourceVersion, res.RequeueAfter)
	}

	h.now = t0.Add(time.Minute)
	res, run = h.reconcile()
	if run.Status.Phase != rolloutv1alpha1.AnalysisSuccessful || res.RequeueAfter != 0 || calls.Load() != 2 {
		t.Fatalf("after the second measurement: %s %q, requeue %s, %d calls", run.Status.Phase, run.Status.Message, res.RequeueAfter, calls.Load())
	}
	if got := h.events(); len(got) != 1 || !strings.HasPrefix(got[0], "Normal AnalysisSuccessful") {
		t.Errorf("events = %q", got)
	}

	// A completed run is left alone.
	h.now = t0.Add(time.Hour)
	_, run = h.reconcile()
	if calls.Load() != 2 || run.Status.Phase != rolloutv1alpha1.AnalysisSuccessful || len(h.events()) != 0 {
		t.Errorf("a completed run was measured again (%d calls)", calls.Load())
	}
}

func TestControllerErrorsEndInError(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	metric := rolloutv1alpha1.Metric{Name: "rate", ConsecutiveErrorLimit: ptr.To[int32](1),
		Provider: rolloutv1alpha1.MetricProvider{Prometheus: &rolloutv1alpha1.PrometheusMetric{Address: closed.URL, Query: "up"}}}
	h := newHarness(t, newRun(metric), nil)

	res, run := h.reconcile()
	if run.Status.Phase != rolloutv1alpha1.AnalysisRunning || res.RequeueAfter != analysis.ErrorRetryDelay {
		t.Fatalf("after one error: %s, requeue %s", run.Status.Phase, res.RequeueAfter)
	}
	h.now = t0.Add(analysis.ErrorRetryDelay)
	_, run = h.reconcile()
	if run.Status.Phase != rolloutv1alpha1.AnalysisError || !strings.Contains(run.Status.Message, "metric rate: 2 errors in a row exceed consecutiveErrorLimit 1") {
		t.Errorf("after two errors: %s %q", run.Status.Phase, run.Status.Message)
	}
	if got := h.events(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning AnalysisError") {
		t.Errorf("events = %q", got)
	}
}

func TestControllerJobMetric(t *testing.T) {
	members := analysistest.FakeMembers{"eu-1": fake.NewClientset()}
	run := newRun(analysistest.JobMetric())
	run.Spec.Args = analysistest.JobRun().Spec.Args
	run.Spec.Clusters = []string{"eu-1"}
	h := newHarness(t, run, members)

	res, run := h.reconcile()
	r := run.Status.MetricResults[0]
	if run.Status.Phase != rolloutv1alpha1.AnalysisRunning || len(r.Measurements) != 1 || r.Measurements[0].Phase != rolloutv1alpha1.AnalysisRunning || res.RequeueAfter != jobPollInterval {
		t.Fatalf("after creating the jobs: %+v, requeue %s", r, res.RequeueAfter)
	}

	h.now = t0.Add(jobPollInterval)
	rv := run.ResourceVersion
	if _, run = h.reconcile(); run.ResourceVersion != rv {
		t.Error("polling a job still running wrote the status")
	}

	analysistest.Finish(t, members["eu-1"], "shop", "checkout-analysis-smoke-0", batchv1.JobComplete)
	h.now = t0.Add(2 * jobPollInterval)
	_, run = h.reconcile()
	r = run.Status.MetricResults[0]
	if run.Status.Phase != rolloutv1alpha1.AnalysisSuccessful || r.Count != 1 || r.Measurements[0].Phase != rolloutv1alpha1.AnalysisSuccessful || !r.Measurements[0].StartedAt.Time.Equal(t0) {
		t.Errorf("after the job completed: %s, %+v", run.Status.Phase, r)
	}
}

func TestControllerTerminate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `1`) }))
	defer srv.Close()
	// Measured every minute until the run is terminated.
	forever := rolloutv1alpha1.Metric{Name: "forever", Interval: "1m", Provider: rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: srv.URL}}}
	members := analysistest.FakeMembers{"eu-1": fake.NewClientset()}
	run := newRun(forever, analysistest.JobMetric())
	run.Spec.Args = analysistest.JobRun().Spec.Args
	run.Spec.Clusters = []string{"eu-1"}
	h := newHarness(t, run, members)

	_, run = h.reconcile()
	if run.Status.Phase != rolloutv1alpha1.AnalysisRunning {
		t.Fatalf("phase %s", run.Status.Phase)
	}
	run.Spec.Terminate = true
	if err := h.client.Update(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	h.now = t0.Add(10 * time.Second)
	res, run := h.reconcile()
	if run.Status.Phase != rolloutv1alpha1.AnalysisSuccessful || res.RequeueAfter != 0 || !strings.Contains(run.Status.Message, "terminated") {
		t.Fatalf("terminated: %s %q", run.Status.Phase, run.Status.Message)
	}
	for _, r := range run.Status.MetricResults {
		if r.Phase != rolloutv1alpha1.AnalysisSuccessful {
			t.Errorf("metric %s: %s", r.Name, r.Phase)
		}
	}
	if job := run.Status.MetricResults[1]; len(job.Measurements) != 0 {
		t.Errorf("the unfinished job measurement was kept: %+v", job.Measurements)
	}
	if list, _ := members["eu-1"].BatchV1().Jobs("shop").List(context.Background(), metav1.ListOptions{}); len(list.Items) != 0 {
		t.Errorf("%d jobs left running after terminate", len(list.Items))
	}
}

func TestControllerInvalidSpec(t *testing.T) {
	badCondition := analysistest.WebMetric("health")
	badCondition.SuccessCondition = "result =="
	missingArg := analysistest.WebMetric("health")
	missingArg.Provider.Web.URL = "http://{{args.host}}/health"
	tests := []struct {
		name   string
		metric rolloutv1alpha1.Metric
		want   string
	}{
		{name: "condition", metric: badCondition, want: "spec.metrics[0].successCondition"},
		{name: "argument", metric: missingArg, want: `spec.metrics[0].provider.web.url: argument "host" has no value`},
		{name: "job argument", metric: analysistest.JobMetric(), want: `spec.metrics[0].provider.job.spec: argument "host" has no value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newRun(tt.metric), nil)
			res, run := h.reconcile()
			if run.Status.Phase != rolloutv1alpha1.AnalysisError || !strings.Contains(run.Status.Message, tt.want) || res.RequeueAfter != 0 {
				t.Errorf("invalid spec: %s %q, requeue %s", run.Status.Phase, run.Status.Message, res.RequeueAfter)
			}
			if got := h.events(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning AnalysisError") {
				t.Errorf("events = %q", got)
			}
		})
	}
	t.Run("job without clusters", func(t *testing.T) {
		run := newRun(analysistest.JobMetric())
		run.Spec.Args = analysistest.JobRun().Spec.Args
		h := newHarness(t, run, analysistest.FakeMembers{})
		if _, run = h.reconcile(); run.Status.Phase != rolloutv1alpha1.AnalysisError || !strings.Contains(run.Status.Message, "spec.clusters: metrics[0] is a job metric") {
			t.Errorf("job without clusters: %s %q", run.Status.Phase, run.Status.Message)
		}
	})
}

// The controller gives the platform's allowances only to metrics the run's spec.templates says
// came from a ClusterAnalysisTemplate.
func TestControllerEgressFollowsTheTemplatesScope(t *testing.T) {
	srv, calls := analysistest.CountingServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"ok":true}`) })
	run := newRun(analysistest.WebPathMetric(srv.URL+"/platform"), func() rolloutv1alpha1.Metric {
		m := analysistest.WebPathMetric(srv.URL + "/tenant")
		m.Name = "tenant"
		return m
	}())
	run.Spec.Metrics[0].Name = "platform"
	run.Spec.Templates = []rolloutv1alpha1.AnalysisRunTemplate{
		{Name: "fleet-checks", ClusterScope: true, Metrics: []string{"platform"}},
		{Name: "mine", Metrics: []string{"tenant"}},
	}
	h := newHarness(t, run, nil)
	h.ctrl.Egress = nil
	_, got := h.reconcile()
	byName := map[string]rolloutv1alpha1.MetricResult{}
	for _, r := range got.Status.MetricResults {
		byName[r.Name] = r
	}
	if p := byName["platform"]; p.Phase != rolloutv1alpha1.AnalysisSuccessful {
		t.Errorf("platform metric %s: %s", p.Phase, p.Message)
	}
	if m := byName["tenant"].Measurements; len(m) == 0 || !strings.Contains(m[0].Message, "is loopback: an AnalysisTemplate of a namespace may not reach it") {
		t.Errorf("tenant metric measurements %+v, want a loopback refusal", m)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the server got %d requests, want 1", n)
	}
}
