package analysis

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis/analysistest"
)

func TestJobProvider(t *testing.T) {
	ctx := context.Background()
	members := analysistest.FakeMembers{"eu-1": fake.NewClientset(), "us-1": fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}})}
	provider := &JobProvider{Members: members}
	run := analysistest.JobRun("eu-1", "us-1")
	metric := analysistest.JobMetric()

	// The first call creates the Jobs.
	if _, _, err := provider.Measure(ctx, run, metric); !errors.Is(err, ErrInProgress) {
		t.Fatalf("first call: %v, want ErrInProgress", err)
	}
	name := "checkout-analysis-smoke-0"
	for cluster, cs := range members {
		job, err := cs.BatchV1().Jobs("shop").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", cluster, err)
		}
		if job.Labels[AnalysisRunLabel] != "checkout-analysis" || job.Labels[AnalysisMetricLabel] != "smoke" || job.Labels["team"] != "shop" {
			t.Errorf("%s: labels %v", cluster, job.Labels)
		}
		if job.Annotations[MeasurementAnnotation] != "0" {
			t.Errorf("%s: annotations %v", cluster, job.Annotations)
		}
		if got := job.Spec.Template.Spec.Containers[0].Args[0]; got != "https://checkout.shop/health" {
			t.Errorf("%s: args %q", cluster, got)
		}
		if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever || job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 {
			t.Errorf("%s: restartPolicy %q, backoffLimit %v", cluster, job.Spec.Template.Spec.RestartPolicy, job.Spec.BackoffLimit)
		}
	}
	ns, err := members["eu-1"].CoreV1().Namespaces().Get(ctx, "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the namespace was not created in eu-1: %v", err)
	}
	if ns.Labels["work.flotilla.dev/managed-by"] != "flotilla" {
		t.Errorf("namespace labels %v", ns.Labels)
	}

	// Reading again creates nothing new and waits for every cluster.
	if _, _, err := provider.Measure(ctx, run, metric); !errors.Is(err, ErrInProgress) {
		t.Fatalf("second call: %v", err)
	}
	analysistest.Finish(t, members["eu-1"], "shop", name, batchv1.JobComplete)
	if _, _, err := provider.Measure(ctx, run, metric); !errors.Is(err, ErrInProgress) {
		t.Fatalf("one of two complete: %v", err)
	}
	analysistest.Finish(t, members["us-1"], "shop", name, batchv1.JobComplete)
	value, raw, err := provider.Measure(ctx, run, metric)
	if err != nil || value != true {
		t.Fatalf("all complete: %v, %v", value, err)
	}
	if raw != `{"complete":2,"result":true}` {
		t.Errorf("raw = %s", raw)
	}
	for cluster, cs := range members {
		list, _ := cs.BatchV1().Jobs("shop").List(ctx, metav1.ListOptions{})
		if len(list.Items) != 1 {
			t.Errorf("%s: %d jobs, want 1", cluster, len(list.Items))
		}
	}

	// The next measurement gets new Jobs; one failure decides at once.
	run.Status.MetricResults = []rolloutv1alpha1.MetricResult{{Name: "smoke", Count: 1}}
	if _, _, err := provider.Measure(ctx, run, metric); !errors.Is(err, ErrInProgress) {
		t.Fatalf("second measurement: %v", err)
	}
	analysistest.Finish(t, members["us-1"], "shop", "checkout-analysis-smoke-1", batchv1.JobFailed)
	value, raw, err = provider.Measure(ctx, run, metric)
	if err != nil || value != false || !strings.Contains(raw, "us-1: BackoffLimitExceeded") {
		t.Fatalf("one failed: %v %s %v", value, raw, err)
	}
	if phase, _ := Judge(metric, value); phase != F {
		t.Errorf("judged %s, want Failed", phase)
	}

	// A third measurement removes the Jobs of the first; the two latest stay for their logs.
	run.Status.MetricResults[0].Count = 2
	if _, _, err := provider.Measure(ctx, run, metric); !errors.Is(err, ErrInProgress) {
		t.Fatalf("third measurement: %v", err)
	}
	list, _ := members["eu-1"].BatchV1().Jobs("shop").List(ctx, metav1.ListOptions{})
	var names []string
	for _, j := range list.Items {
		names = append(names, j.Name)
	}
	if strings.Join(names, ",") != "checkout-analysis-smoke-1,checkout-analysis-smoke-2" {
		t.Errorf("jobs left: %v", names)
	}

	// Terminating deletes the Jobs in progress.
	if err := provider.Stop(ctx, run, metric); err != nil {
		t.Fatal(err)
	}
	if _, err := members["eu-1"].BatchV1().Jobs("shop").Get(ctx, "checkout-analysis-smoke-2", metav1.GetOptions{}); err == nil {
		t.Error("the job in progress is still there after Stop")
	}
}

func TestJobProviderErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		run       *rolloutv1alpha1.AnalysisRun
		metric    func() rolloutv1alpha1.Metric
		wantError string
	}{
		{name: "no clusters", run: analysistest.JobRun(), metric: analysistest.JobMetric, wantError: "spec.clusters is empty"},
		{name: "unreachable cluster", run: analysistest.JobRun("eu-1", "gone"), metric: analysistest.JobMetric, wantError: "cluster gone: cluster gone is not connected"},
		{name: "missing argument", run: func() *rolloutv1alpha1.AnalysisRun { r := analysistest.JobRun("eu-1"); r.Spec.Args = nil; return r }(), metric: analysistest.JobMetric, wantError: `provider.job.spec: argument "host" has no value`},
		{name: "not a JobSpec", run: analysistest.JobRun("eu-1"), metric: func() rolloutv1alpha1.Metric {
			m := analysistest.JobMetric()
			m.Provider.Job.Spec.Raw = []byte(`{"parallelism":"two"}`)
			return m
		}, wantError: "provider.job.spec is not a batch/v1 JobSpec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			provider := &JobProvider{Members: analysistest.FakeMembers{"eu-1": fake.NewClientset()}}
			_, _, err := provider.Measure(ctx, tt.run, tt.metric())
			if err == nil || errors.Is(err, ErrInProgress) || !strings.Contains(err.Error(), tt.wantError) {
				t.Errorf("error = %v, want one containing %q", err, tt.wantError)
			}
		})
	}
}

func TestJobName(t *testing.T) {
	long := strings.Repeat("checkout-", 8)
	tests := []struct {
		run, metric string
		index       int32
		want        string
	}{
		{run: "r", metric: "smoke", index: 3, want: "r-smoke-3"},
		{run: "checkout.r2", metric: "Smoke_Test", index: 0},
		{run: long, metric: "smoke", index: 12},
		{run: long, metric: "smoke", index: 13},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		got := JobName(tt.run, tt.metric, tt.index)
		if tt.want != "" && got != tt.want {
			t.Errorf("JobName(%s, %s, %d) = %s, want %s", tt.run, tt.metric, tt.index, got, tt.want)
		}
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("JobName(%s, %s, %d) = %s: %v", tt.run, tt.metric, tt.index, got, errs)
		}
		if seen[got] {
			t.Errorf("JobName %s given twice", got)
		}
		seen[got] = true
	}
	if got := labelValue(long + long); len(validation.IsValidLabelValue(got)) > 0 {
		t.Errorf("labelValue = %s is not a label value", got)
	}
}

// A namespace's Job pods are held to the Pod Security level before any Job exists; the
// platform's (a ClusterAnalysisTemplate's) are not.
func TestJobProviderPodSecurity(t *testing.T) {
	ctx := context.Background()
	privileged := `{"template":{"spec":{"hostNetwork":true,"hostPID":true,` +
		`"volumes":[{"name":"root","hostPath":{"path":"/"}}],` +
		`"containers":[{"name":"smoke","image":"curl","volumeMounts":[{"name":"root","mountPath":"/host"}],` +
		`"securityContext":{"privileged":true,"capabilities":{"add":["SYS_ADMIN"]}}}]}}}`
	plain := `{"template":{"spec":{"containers":[{"name":"smoke","image":"curl"}]}}}`
	restricted := `{"template":{"spec":{` + analysistest.RestrictedPod + `,"containers":[{"name":"smoke","image":"curl",` + analysistest.RestrictedContainer + `}]}}}`
	tests := []struct {
		name        string
		provider    JobProvider
		spec        string
		wantError   []string // nil: the Job is created
		wantNSLabel string   // enforce label of the namespace it creates
	}{
		{name: "privileged pod refused", spec: privileged, wantError: []string{
			`provider.job.spec.template violates Pod Security "restricted"`, "host namespaces", "privileged", "restricted volume types",
			"no Job was created", "set securityContext.runAsNonRoot: true",
		}},
		{name: "plain pod refused by restricted", spec: plain, wantError: []string{
			"allowPrivilegeEscalation != false", "runAsNonRoot != true", "seccompProfile", `container "smoke" must set securityContext.allowPrivilegeEscalation=false`,
		}},
		{name: "restricted pod runs", spec: restricted, wantNSLabel: "restricted"},
		{name: "baseline allows a plain pod", provider: JobProvider{PodSecurity: "baseline"}, spec: plain, wantNSLabel: "baseline"},
		{name: "baseline refuses host namespaces", provider: JobProvider{PodSecurity: "baseline"}, spec: privileged, wantError: []string{`violates Pod Security "baseline"`, "host namespaces", "hostPath volumes"}},
		{name: "privileged level checks nothing", provider: JobProvider{PodSecurity: "privileged"}, spec: privileged},
		{name: "a ClusterAnalysisTemplate's Job is the platform's", provider: JobProvider{Platform: true}, spec: privileged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset()
			p := tt.provider
			p.Members = analysistest.FakeMembers{"eu-1": cs}
			metric := rolloutv1alpha1.Metric{Name: "smoke", Provider: rolloutv1alpha1.MetricProvider{Job: &rolloutv1alpha1.JobMetric{Spec: runtime.RawExtension{Raw: []byte(tt.spec)}}}}
			_, _, err := p.Measure(ctx, analysistest.JobRun("eu-1"), metric)
			jobs, _ := cs.BatchV1().Jobs("shop").List(ctx, metav1.ListOptions{})
			if tt.wantError != nil {
				if err == nil || errors.Is(err, ErrInProgress) {
					t.Fatalf("error = %v, want a Pod Security refusal", err)
				}
				for _, want := range tt.wantError {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				if len(jobs.Items) != 0 {
					t.Errorf("%d Jobs created, want none", len(jobs.Items))
				}
				if _, err := cs.CoreV1().Namespaces().Get(ctx, "shop", metav1.GetOptions{}); err == nil {
					t.Error("the namespace was created for a refused Job")
				}
				return
			}
			if !errors.Is(err, ErrInProgress) || len(jobs.Items) != 1 {
				t.Fatalf("error = %v with %d Jobs, want the Job created", err, len(jobs.Items))
			}
			ns, err := cs.CoreV1().Namespaces().Get(ctx, "shop", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != tt.wantNSLabel {
				t.Errorf("namespace enforce label %q, want %q", got, tt.wantNSLabel)
			}
			if tt.wantNSLabel != "" && ns.Labels["pod-security.kubernetes.io/enforce-version"] != "latest" {
				t.Errorf("namespace labels %v, want enforce-version latest", ns.Labels)
			}
		})
	}

	t.Run("an existing namespace is not relabelled", func(t *testing.T) {
		existing := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}}
		cs := fake.NewClientset(existing)
		p := JobProvider{Members: analysistest.FakeMembers{"eu-1": cs}}
		if _, _, err := p.Measure(ctx, analysistest.JobRun("eu-1"), analysistest.JobMetric()); !errors.Is(err, ErrInProgress) {
			t.Fatal(err)
		}
		ns, err := cs.CoreV1().Namespaces().Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(existing.Labels, ns.Labels); diff != "" {
			t.Errorf("labels changed (-want +got):\n%s", diff)
		}
	})
}
