// Package analysisrun is the AnalysisRun controller: it measures each run on its schedule
// through package analysis and writes the run's status. It owns nothing else.
package analysisrun

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	psapi "k8s.io/pod-security-admission/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// jobPollInterval is how often Jobs in progress are read again; nothing watches them.
const jobPollInterval = 5 * time.Second

// minRequeue keeps a run that is due again at once from spinning.
const minRequeue = time.Second

// maxMeasurementsPerReconcile bounds the measurements one metric takes in one reconcile
// (metrics without an interval take theirs back to back).
const maxMeasurementsPerReconcile = 10

// Controller measures AnalysisRuns: it takes the measurements that are due, writes the run's
// status when it changed, and comes back when the next one is due. A completed run is never
// measured again. Metrics of one run are measured side by side, the measurements of one
// metric one after the other; every provider call has a timeout, so a slow server holds up
// only its own run.
type Controller struct {
	Client client.Client
	// Members reaches the clusters where job metrics run; PullJobs runs them in Pull members.
	Members  analysis.Members
	PullJobs analysis.PullJobs
	// Recorder gets an event when a run completes; nil records none.
	Recorder events.EventRecorder
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Egress decides where web and Prometheus metrics may connect; nil allows public
	// addresses only (and private and loopback ones to ClusterAnalysisTemplates' metrics).
	Egress *analysis.Egress
	// PodSecurity is the level the Job pods of a namespace's templates must meet; empty means
	// restricted.
	PodSecurity psapi.Level
}

// SetupWithManager registers the controller.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("analysis").
		// Its own status writes need no reconcile: the next due time is requeued.
		For(&rolloutv1alpha1.AnalysisRun{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(kube.RequeueConflicts(c))
}

func (c *Controller) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Analysis runs measure; their templates say how.
// +kubebuilder:rbac:groups=rollout.flotilla.dev,resources=analysisruns,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=rollout.flotilla.dev,resources=analysisruns/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=rollout.flotilla.dev,resources=analysistemplates;clusteranalysistemplates,verbs=get;list;watch
// A provider's credentials are Secrets the analysis template names.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// Reconcile takes one run's due measurements.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	run := &rolloutv1alpha1.AnalysisRun{}
	if err := c.Client.Get(ctx, req.NamespacedName, run); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if run.Status.Phase.Completed() || !run.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	now := c.now()
	status := run.Status.DeepCopy()
	if status.StartedAt == nil {
		status.StartedAt = &metav1.Time{Time: now}
	}
	var next time.Time
	if err := analysis.ValidateRun(run.Spec); err != nil {
		status.Phase = rolloutv1alpha1.AnalysisError
		status.Message = analysis.Shorten("spec."+strings.ReplaceAll(err.Error(), "\n", "; spec."), analysis.MaxRunMessageLength)
	} else {
		status.MetricResults, next = c.measure(ctx, run, status)
		if ctx.Err() != nil {
			// Shutting down: measurements cut short are not the servers' fault.
			return ctrl.Result{}, ctx.Err()
		}
		status.Phase, status.Message = analysis.RunPhase(run.Spec, status.MetricResults)
	}

	status.ObservedGeneration = run.Generation
	analysis.Summarize(status, run.Generation)
	if !apiequality.Semantic.DeepEqual(status, &run.Status) {
		// The lock turns a write from a stale read into a conflict instead of dropping the
		// measurements another reconcile recorded.
		patch := client.MergeFromWithOptions(run.DeepCopy(), client.MergeFromWithOptimisticLock{})
		run.Status = *status
		if err := c.Client.Status().Patch(ctx, run, patch); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{RequeueAfter: minRequeue}, nil
			}
			return ctrl.Result{}, err
		}
	}
	if status.Phase.Completed() {
		c.recordCompletion(run)
		return ctrl.Result{}, nil
	}
	if next.IsZero() {
		return ctrl.Result{}, nil
	}
	wait := next.Sub(c.now())
	if wait < minRequeue {
		wait = minRequeue
	}
	return ctrl.Result{RequeueAfter: wait}, nil
}

func (c *Controller) recordCompletion(run *rolloutv1alpha1.AnalysisRun) {
	analysis.RunOutcomes.WithLabelValues(string(run.Status.Phase)).Inc()
	if c.Recorder == nil {
		return
	}
	eventType := corev1.EventTypeWarning
	if run.Status.Phase == rolloutv1alpha1.AnalysisSuccessful {
		eventType = corev1.EventTypeNormal
	}
	c.Recorder.Eventf(run, nil, eventType, "Analysis"+string(run.Status.Phase), "Analyze", "%s", run.Status.Message)
}

// measure brings every metric's result up to date and returns the results in spec order with
// the earliest time a metric is due again (zero when none is).
func (c *Controller) measure(ctx context.Context, run *rolloutv1alpha1.AnalysisRun, status *rolloutv1alpha1.AnalysisRunStatus) ([]rolloutv1alpha1.MetricResult, time.Time) {
	existing := make(map[string]rolloutv1alpha1.MetricResult, len(status.MetricResults))
	for _, r := range status.MetricResults {
		existing[r.Name] = r
	}
	runStart := status.StartedAt.Time
	results := make([]rolloutv1alpha1.MetricResult, len(run.Spec.Metrics))
	due := make([]time.Time, len(run.Spec.Metrics))
	var wg sync.WaitGroup
	for i, metric := range run.Spec.Metrics {
		result, ok := existing[metric.Name]
		if !ok {
			result = rolloutv1alpha1.MetricResult{Name: metric.Name, Phase: rolloutv1alpha1.AnalysisPending}
		}
		result.DryRun = analysis.IsDryRun(run.Spec, metric.Name)
		if run.Spec.Terminate {
			results[i] = c.terminate(ctx, run, metric, result)
			continue
		}
		wg.Go(func() {
			results[i], due[i] = c.measureMetric(ctx, run, metric, result, runStart)
		})
	}
	wg.Wait()
	var next time.Time
	for _, d := range due {
		if !d.IsZero() && (next.IsZero() || d.Before(next)) {
			next = d
		}
	}
	return results, next
}

// measureMetric takes the metric's due measurements, one after the other, and returns the
// result with when the metric is due again.
func (c *Controller) measureMetric(ctx context.Context, run *rolloutv1alpha1.AnalysisRun, metric rolloutv1alpha1.Metric, result rolloutv1alpha1.MetricResult, runStart time.Time) (rolloutv1alpha1.MetricResult, time.Time) {
	if result.Phase.Completed() {
		return result, time.Time{}
	}
	provider := c.provider(run, metric)
	for range maxMeasurementsPerReconcile {
		started := c.now()
		if due := analysis.NextMeasurementAt(metric, result, runStart); due.After(started) {
			return result, due
		}
		outcome := analysis.TakeMeasurement(ctx, provider, runView(run, result), metric, started)
		if ctx.Err() != nil {
			return result, time.Time{}
		}
		var due time.Time
		result, due = analysis.Record(metric, result, outcome, c.now(), runStart, analysis.Retention(run.Spec, metric.Name))
		if result.Phase.Completed() {
			return result, time.Time{}
		}
		if outcome.Phase == rolloutv1alpha1.AnalysisRunning {
			return result, c.now().Add(jobPollInterval)
		}
		if due.After(c.now()) {
			return result, due
		}
	}
	return result, analysis.NextMeasurementAt(metric, result, runStart)
}

// terminate ends a metric of a terminated run: without a verdict yet it counts as
// Successful, and Jobs of a measurement in progress are deleted.
func (c *Controller) terminate(ctx context.Context, run *rolloutv1alpha1.AnalysisRun, metric rolloutv1alpha1.Metric, result rolloutv1alpha1.MetricResult) rolloutv1alpha1.MetricResult {
	if result.Phase.Completed() {
		return result
	}
	result = *result.DeepCopy()
	if n := len(result.Measurements); n > 0 && result.Measurements[n-1].Phase == rolloutv1alpha1.AnalysisRunning {
		if stopper, ok := c.provider(run, metric).(interface {
			Stop(context.Context, *rolloutv1alpha1.AnalysisRun, rolloutv1alpha1.Metric) error
		}); ok {
			if err := stopper.Stop(ctx, runView(run, result), metric); err != nil {
				ctrl.LoggerFrom(ctx).Info("Could not stop the measurement in progress of a terminated run", "metric", metric.Name, "error", err.Error())
			}
		}
		// It never finished: it is no measurement.
		result.Measurements = result.Measurements[:n-1]
	}
	result.Phase = rolloutv1alpha1.AnalysisSuccessful
	result.Message = "terminated before a verdict; counts as successful"
	return result
}

// provider picks the metric's provider, with the platform's allowances when the metric came
// from a ClusterAnalysisTemplate.
func (c *Controller) provider(run *rolloutv1alpha1.AnalysisRun, metric rolloutv1alpha1.Metric) analysis.Provider {
	platform := analysis.PlatformMetric(run, metric.Name)
	if metric.Compare != nil && metric.Baseline != nil {
		canary, baseline := metric, metric
		canary.Compare, canary.Baseline = nil, nil
		baseline.Provider, baseline.Compare, baseline.Baseline = *metric.Baseline, nil, nil
		return analysis.CompareProvider{Canary: c.provider(run, canary), Baseline: c.provider(run, baseline)}
	}
	switch {
	case metric.Provider.Prometheus != nil:
		return &analysis.PrometheusProvider{Now: c.Now, Egress: c.Egress, Platform: platform, ClusterLabels: c.clusterLabels}
	case metric.Provider.Web != nil:
		return &analysis.WebProvider{Egress: c.Egress, Platform: platform}
	case metric.Provider.Job != nil && c.Members != nil:
		return &analysis.JobProvider{Members: c.Members, PodSecurity: c.PodSecurity, Platform: platform, Pull: c.PullJobs}
	case metric.Provider.Job != nil:
		return failingProvider{errors.New("job metrics are not available: the controller has no access to member clusters")}
	}
	return failingProvider{errors.New("provider: set exactly one of prometheus, web or job")}
}

// clusterLabels reads a member's labels from its Cluster.
func (c *Controller) clusterLabels(ctx context.Context, name string) (map[string]string, error) {
	cl := &clusterv1alpha1.Cluster{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, cl); err != nil {
		return nil, err
	}
	return cl.Labels, nil
}

type failingProvider struct{ err error }

func (f failingProvider) Measure(context.Context, *rolloutv1alpha1.AnalysisRun, rolloutv1alpha1.Metric) (any, string, error) {
	return nil, "", f.err
}

// runView is the run as one metric's provider sees it: its status holds only that metric's
// result, so metrics measured side by side share nothing they write.
func runView(run *rolloutv1alpha1.AnalysisRun, result rolloutv1alpha1.MetricResult) *rolloutv1alpha1.AnalysisRun {
	return &rolloutv1alpha1.AnalysisRun{
		TypeMeta:   run.TypeMeta,
		ObjectMeta: run.ObjectMeta,
		Spec:       run.Spec,
		Status:     rolloutv1alpha1.AnalysisRunStatus{StartedAt: run.Status.StartedAt, MetricResults: []rolloutv1alpha1.MetricResult{result}},
	}
}
