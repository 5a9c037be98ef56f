package binding

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/eventstest"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// failover reads the wall clock, so times here are relative to time.Now() and requeue
// durations are compared with a little slack (stored times keep whole seconds only).
const slack = 2 * time.Second

// templateGeneration is the template generation the binding was scheduled at.
const templateGeneration = 3

func ago(d time.Duration) metav1.Time { return metav1.NewTime(time.Now().Add(-d)) }

func microAgo(d time.Duration) metav1.MicroTime { return metav1.NewMicroTime(time.Now().Add(-d)) }

func near(got, want time.Duration) bool { return got > want-slack && got <= want+slack }

type harness struct {
	t         *testing.T
	client    client.Client
	ctrl      *Controller
	failovers *Failover
	recorder  *events.FakeRecorder
	patches   int
	patchErr  error
}

func newHarness(t *testing.T, objs ...client.Object) *harness {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1alpha1.AddToScheme, policyv1alpha1.AddToScheme, workv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	h := &harness{t: t, recorder: events.NewFakeRecorder(20)}
	h.client = fake.NewClientBuilder().WithScheme(scheme).WithIndex(&workv1alpha1.ResourceBinding{}, dependenciesIndex, recordedDependencies).WithIndex(&workv1alpha1.ClusterResourceBinding{}, dependenciesIndex, recordedDependencies).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(workv1alpha1.Binding); ok {
				h.patches++
				if h.patchErr != nil {
					return h.patchErr
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	h.ctrl = &Controller{Client: h.client, Recorder: h.recorder}
	h.failovers = &Failover{Client: h.client, Recorder: h.recorder}
	return h
}

func (h *harness) binding() *workv1alpha1.ResourceBinding {
	h.t.Helper()
	b := &workv1alpha1.ResourceBinding{}
	if err := h.client.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "web-deployment"}, b); err != nil {
		h.t.Fatal(err)
	}
	return b
}

// failover runs one failover pass on the stored binding and returns the stored result.
func (h *harness) failover(works map[string]*workv1alpha1.Work) (time.Duration, *workv1alpha1.ResourceBindingSpec) {
	h.t.Helper()
	after, err := h.failovers.failover(context.Background(), h.binding(), works, templateGeneration)
	if err != nil {
		h.t.Fatal(err)
	}
	return after, &h.binding().Spec
}

func (h *harness) events() []string { return eventstest.Drain(h.recorder) }

// reasons are the "TYPE REASON" of the events emitted.
func (h *harness) reasons() []string {
	var out []string
	for _, e := range h.events() {
		f := strings.Fields(e)
		out = append(out, f[0]+" "+f[1])
	}
	return out
}

func placed(names ...string) []workv1alpha1.TargetCluster {
	var out []workv1alpha1.TargetCluster
	for _, n := range names {
		out = append(out, workv1alpha1.TargetCluster{Name: n, Replicas: 2})
	}
	return out
}

// rb is the binding of Deployment shop/web, placed by PropagationPolicy shop/web.
func rb(spec workv1alpha1.ResourceBindingSpec, status ...workv1alpha1.ClusterStatus) *workv1alpha1.ResourceBinding {
	spec.Resource = workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	if spec.PolicyRef.Name == "" {
		spec.PolicyRef = workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "web"}
	}
	spec.TemplateGeneration = templateGeneration
	return &workv1alpha1.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment", Finalizers: []string{Finalizer}},
		Spec:       spec,
		Status:     workv1alpha1.ResourceBindingStatus{Clusters: status},
	}
}

func policy(app *policyv1alpha1.ApplicationFailoverBehavior) *policyv1alpha1.PropagationPolicy {
	p := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	if app != nil {
		p.Spec.Failover = &policyv1alpha1.FailoverBehavior{Application: app}
	}
	return p
}

// appFailover tolerates a minute of Degraded and keeps the old placement two minutes.
func appFailover() *policyv1alpha1.ApplicationFailoverBehavior {
	return &policyv1alpha1.ApplicationFailoverBehavior{TolerationSeconds: 60, GracePeriodSeconds: 120}
}

func healthy(name string) workv1alpha1.ClusterStatus {
	return workv1alpha1.ClusterStatus{Cluster: name, Applied: true, Health: workv1alpha1.HealthHealthy}
}

func degradedFor(name string, d time.Duration) workv1alpha1.ClusterStatus {
	since := microAgo(d)
	return workv1alpha1.ClusterStatus{Cluster: name, Applied: true, Health: workv1alpha1.HealthDegraded, DegradedSince: &since, Message: "CrashLoopBackOff"}
}

// work is a cluster's Work at generation 2 that applied observed and reports health.
func work(observed int64, applied metav1.ConditionStatus, health workv1alpha1.Health) *workv1alpha1.Work {
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	w.Status.Health = health
	w.Status.Conditions = []metav1.Condition{{Type: workv1alpha1.ConditionApplied, Status: applied, ObservedGeneration: observed, Reason: "Test"}}
	return w
}

func upToDate() *workv1alpha1.Work {
	return work(2, metav1.ConditionTrue, workv1alpha1.HealthHealthy)
}

func task(cluster, reason, mode string, created time.Duration) workv1alpha1.GracefulEvictionTask {
	return workv1alpha1.GracefulEvictionTask{Cluster: cluster, Replicas: 2, Reason: reason, PurgeMode: mode, GracePeriodSeconds: 600, CreationTimestamp: ago(created)}
}

func clusterObj(name string, ready metav1.ConditionStatus, taints ...clusterv1alpha1.Taint) *clusterv1alpha1.Cluster {
	cl := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	cl.Spec.Taints = taints
	cl.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ConditionReady, Status: ready, Reason: "Probe", LastTransitionTime: ago(time.Hour)}}
	return cl
}

var unreachableTaint = clusterv1alpha1.Taint{Key: "cluster.flotilla.dev/unreachable", Effect: clusterv1alpha1.TaintEffectNoExecute}

func taskClusters(s *workv1alpha1.ResourceBindingSpec) []string {
	var out []string
	for _, t := range s.GracefulEvictionTasks {
		out = append(out, t.Cluster)
	}
	return out
}

func failedClusters(s *workv1alpha1.ResourceBindingSpec) []string {
	var out []string
	for _, f := range s.FailedClusters {
		out = append(out, f.Cluster)
	}
	return out
}

// A Graceful eviction ends when every placed cluster has applied its Work's current
// generation and is healthy; anything less keeps the old placement until the deadline.
func TestGracefulEvictionEndsOnlyWhenEveryPlacedClusterRunsTheCurrentGenerationHealthy(t *testing.T) {
	tests := []struct {
		name       string
		spec       workv1alpha1.ResourceBindingSpec
		works      map[string]*workv1alpha1.Work
		wantEnded  bool
		wantReason string
	}{
		{
			name:      "every placed cluster applied the current generation and is healthy",
			spec:      workv1alpha1.ResourceBindingSpec{Clusters: placed("west", "north")},
			works:     map[string]*workv1alpha1.Work{"west": upToDate(), "north": upToDate()},
			wantEnded: true, wantReason: "Normal EvictionDone",
		},
		{
			// An earlier generation's Healthy says nothing about the replicas just moved there.
			name:  "a placed cluster is healthy at an earlier generation only",
			spec:  workv1alpha1.ResourceBindingSpec{Clusters: placed("west", "north")},
			works: map[string]*workv1alpha1.Work{"west": upToDate(), "north": work(1, metav1.ConditionTrue, workv1alpha1.HealthHealthy)},
		},
		{
			name:  "a placed cluster has not applied",
			spec:  workv1alpha1.ResourceBindingSpec{Clusters: placed("west", "north")},
			works: map[string]*workv1alpha1.Work{"west": upToDate(), "north": work(2, metav1.ConditionFalse, workv1alpha1.HealthHealthy)},
		},
		{
			name:  "a placed cluster is still progressing",
			spec:  workv1alpha1.ResourceBindingSpec{Clusters: placed("west", "north")},
			works: map[string]*workv1alpha1.Work{"west": upToDate(), "north": work(2, metav1.ConditionTrue, workv1alpha1.HealthProgressing)},
		},
		{
			name:  "a placed cluster has no Work yet",
			spec:  workv1alpha1.ResourceBindingSpec{Clusters: placed("west", "north")},
			works: map[string]*workv1alpha1.Work{"west": upToDate()},
		},
		{
			name:  "nothing is placed, so nothing replaces the old placement",
			spec:  workv1alpha1.ResourceBindingSpec{},
			works: map[string]*workv1alpha1.Work{},
		},
		{
			// A handed-back cluster has no Work and needs none.
			name:      "an unmanaged placed cluster is not waited for",
			spec:      workv1alpha1.ResourceBindingSpec{Clusters: placed("west", "north"), UnmanagedClusters: []string{"north"}},
			works:     map[string]*workv1alpha1.Work{"west": upToDate()},
			wantEnded: true, wantReason: "Normal EvictionDone",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.spec.GracefulEvictionTasks = []workv1alpha1.GracefulEvictionTask{task("east", workv1alpha1.EvictionReasonClusterFailover, workv1alpha1.PurgeGraceful, 100*time.Second)}
			h := newHarness(t, rb(tt.spec))
			after, spec := h.failover(tt.works)
			if tt.wantEnded {
				if len(spec.GracefulEvictionTasks) != 0 || after != 0 {
					t.Errorf("tasks = %v, requeue %v; want the task ended and no requeue", taskClusters(spec), after)
				}
			} else {
				if diff := cmp.Diff([]string{"east"}, taskClusters(spec)); diff != "" {
					t.Errorf("tasks (-want +got):\n%s", diff)
				}
				// 600s grace, 100s gone: look again when the grace period ends.
				if !near(after, 500*time.Second) {
					t.Errorf("requeue after %v, want about 500s", after)
				}
			}
			if diff := cmp.Diff(tt.wantReason, strings.Join(h.reasons(), ",")); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// A Graceful eviction whose replacements never come up ends at its grace period anyway,
// with a Warning that says so.
func TestGracefulEvictionEndsAfterItsGracePeriod(t *testing.T) {
	tk := task("east", workv1alpha1.EvictionReasonClusterFailover, workv1alpha1.PurgeGraceful, 601*time.Second)
	h := newHarness(t, rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("west"), GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{tk}}))
	after, spec := h.failover(map[string]*workv1alpha1.Work{"west": work(2, metav1.ConditionTrue, workv1alpha1.HealthProgressing)})
	if len(spec.GracefulEvictionTasks) != 0 || after != 0 {
		t.Errorf("tasks = %v, requeue %v; want the task timed out", taskClusters(spec), after)
	}
	want := []string{"Warning EvictionTimedOut replacements for east are not available after 600s; its old placement goes anyway"}
	if diff := cmp.Diff(want, h.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A Never eviction of a cluster failover keeps the old placement until the cluster is Ready
// and no longer tainted unreachable, whatever the replacements and however long it takes.
func TestNeverEvictionOfAClusterFailoverEndsWhenTheClusterIsBack(t *testing.T) {
	tests := []struct {
		name      string
		cluster   *clusterv1alpha1.Cluster
		wantEnded bool
	}{
		{"the cluster is still not Ready", clusterObj("east", metav1.ConditionFalse, unreachableTaint), false},
		// Within the taint controller's grace period a not Ready cluster carries no taint yet.
		{"the cluster is not Ready and not tainted yet", clusterObj("east", metav1.ConditionFalse), false},
		{"the cluster is Ready but still tainted unreachable (hold-down)", clusterObj("east", metav1.ConditionTrue, unreachableTaint), false},
		{"the cluster is gone", nil, false},
		{"the cluster is Ready and untainted", clusterObj("east", metav1.ConditionTrue), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Replacements up and the task a day old: neither ends a Never task.
			tk := task("east", workv1alpha1.EvictionReasonClusterFailover, workv1alpha1.PurgeNever, 24*time.Hour)
			objs := []client.Object{rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("west"), GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{tk}})}
			if tt.cluster != nil {
				objs = append(objs, tt.cluster)
			}
			h := newHarness(t, objs...)
			after, spec := h.failover(map[string]*workv1alpha1.Work{"west": upToDate()})
			if got := len(spec.GracefulEvictionTasks) == 0; got != tt.wantEnded {
				t.Errorf("task ended = %v, want %v", got, tt.wantEnded)
			}
			if after != 0 {
				t.Errorf("requeue after %v: a Never task waits for the cluster's own events", after)
			}
			wantEvents := 0
			if tt.wantEnded {
				wantEvents = 1
			}
			if evs := h.events(); len(evs) != wantEvents || (wantEvents == 1 && evs[0] != "Normal EvictionDone cluster east is back; its old placement goes") {
				t.Errorf("events = %q", evs)
			}
		})
	}
}

// A Never eviction of an application failover keeps the old placement until the template
// changes, which also lifts the cluster's exclusion.
func TestNeverEvictionOfAnApplicationFailoverEndsWhenTheTemplateChanges(t *testing.T) {
	for _, tt := range []struct {
		name         string
		failedAt     int64
		wantEnded    bool
		wantFailedOn []string
	}{
		{"the template is unchanged", templateGeneration, false, []string{"east"}},
		{"the template changed", templateGeneration - 1, true, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tk := task("east", workv1alpha1.EvictionReasonApplicationFailover, workv1alpha1.PurgeNever, 24*time.Hour)
			h := newHarness(t, rb(workv1alpha1.ResourceBindingSpec{
				Clusters:              placed("west"),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{tk},
				FailedClusters:        []workv1alpha1.FailedCluster{{Cluster: "east", TemplateGeneration: tt.failedAt, Time: ago(time.Hour)}},
			}))
			_, spec := h.failover(map[string]*workv1alpha1.Work{"west": upToDate()})
			if got := len(spec.GracefulEvictionTasks) == 0; got != tt.wantEnded {
				t.Errorf("task ended = %v, want %v", got, tt.wantEnded)
			}
			if diff := cmp.Diff(tt.wantFailedOn, failedClusters(spec)); diff != "" {
				t.Errorf("failed clusters (-want +got):\n%s", diff)
			}
		})
	}
}

// An Immediately task keeps nothing: it is dropped on the first pass.
func TestImmediateEvictionTaskIsDropped(t *testing.T) {
	tk := task("east", workv1alpha1.EvictionReasonClusterFailover, workv1alpha1.PurgeImmediately, time.Second)
	h := newHarness(t, rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("west"), GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{tk}}))
	_, spec := h.failover(map[string]*workv1alpha1.Work{})
	if len(spec.GracefulEvictionTasks) != 0 {
		t.Errorf("tasks = %v, want none", taskClusters(spec))
	}
}

// A Degraded workload moves off a cluster once its toleration passed: the cluster is
// excluded at the current template generation, and the old placement is kept for the
// policy's grace period with the cluster's replicas.
func TestApplicationFailoverMovesOffAClusterDegradedPastItsToleration(t *testing.T) {
	h := newHarness(t, policy(appFailover()), rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("east", "west")},
		degradedFor("east", 61*time.Second), healthy("west")))
	after, spec := h.failover(map[string]*workv1alpha1.Work{})
	if after != 0 {
		t.Errorf("requeue after %v, want none", after)
	}
	ignore := cmpopts.IgnoreFields(workv1alpha1.FailedCluster{}, "Message", "Time")
	if diff := cmp.Diff([]workv1alpha1.FailedCluster{{Cluster: "east", TemplateGeneration: templateGeneration}}, spec.FailedClusters, ignore); diff != "" {
		t.Errorf("failed clusters (-want +got):\n%s", diff)
	}
	wantTask := workv1alpha1.GracefulEvictionTask{Cluster: "east", Replicas: 2, Reason: workv1alpha1.EvictionReasonApplicationFailover, PurgeMode: workv1alpha1.PurgeGraceful, GracePeriodSeconds: 120}
	if diff := cmp.Diff([]workv1alpha1.GracefulEvictionTask{wantTask}, spec.GracefulEvictionTasks, cmpopts.IgnoreFields(workv1alpha1.GracefulEvictionTask{}, "Message", "CreationTimestamp")); diff != "" {
		t.Errorf("eviction tasks (-want +got):\n%s", diff)
	}
	if len(spec.GracefulEvictionTasks) == 1 {
		if created := spec.GracefulEvictionTasks[0].CreationTimestamp.Time; time.Since(created) > slack {
			t.Errorf("task created %v, want now", created)
		}
		if msg := spec.GracefulEvictionTasks[0].Message; !strings.Contains(msg, "over the toleration of 60s: CrashLoopBackOff") {
			t.Errorf("task message %q does not say why", msg)
		}
	}
	if evs := h.events(); len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning ApplicationFailover moving off east: Degraded in east since ") {
		t.Errorf("events = %q", evs)
	}
}

// Within its toleration a Degraded cluster keeps the workload, and the binding is looked at
// again when the toleration ends.
func TestApplicationFailoverWaitsOutTheToleration(t *testing.T) {
	h := newHarness(t, policy(appFailover()), rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("east", "west")},
		degradedFor("east", 20*time.Second), healthy("west")))
	after, spec := h.failover(map[string]*workv1alpha1.Work{})
	if len(spec.FailedClusters) != 0 || len(spec.GracefulEvictionTasks) != 0 || h.patches != 0 {
		t.Errorf("failed %v, tasks %v, %d writes: want nothing within the toleration", failedClusters(spec), taskClusters(spec), h.patches)
	}
	if !near(after, 40*time.Second) {
		t.Errorf("requeue after %v, want about 40s", after)
	}
}

// With several deadlines the binding comes back at the earliest one.
func TestFailoverRequeuesAtTheEarliestDeadline(t *testing.T) {
	tk := task("north", workv1alpha1.EvictionReasonClusterFailover, workv1alpha1.PurgeGraceful, 100*time.Second) // due in 500s
	h := newHarness(t, policy(appFailover()), rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("east", "west"), GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{tk}},
		degradedFor("east", 20*time.Second), healthy("west"))) // due in 40s
	after, _ := h.failover(map[string]*workv1alpha1.Work{})
	if !near(after, 40*time.Second) {
		t.Errorf("requeue after %v, want about 40s", after)
	}
}

// The policy's purge mode decides what is kept of the old placement; unset means Graceful
// and an unset grace period means 600s.
func TestApplicationFailoverPurgeModes(t *testing.T) {
	tests := []struct {
		name      string
		mode      policyv1alpha1.PurgeMode
		grace     int32
		wantTasks []workv1alpha1.GracefulEvictionTask
	}{
		{"unset is Graceful", "", 120, []workv1alpha1.GracefulEvictionTask{{Cluster: "east", PurgeMode: workv1alpha1.PurgeGraceful, GracePeriodSeconds: 120}}},
		{"Graceful", policyv1alpha1.PurgeGraceful, 120, []workv1alpha1.GracefulEvictionTask{{Cluster: "east", PurgeMode: workv1alpha1.PurgeGraceful, GracePeriodSeconds: 120}}},
		{"Graceful without a grace period waits 600s", policyv1alpha1.PurgeGraceful, 0, []workv1alpha1.GracefulEvictionTask{{Cluster: "east", PurgeMode: workv1alpha1.PurgeGraceful, GracePeriodSeconds: 600}}},
		{"Never", policyv1alpha1.PurgeNever, 120, []workv1alpha1.GracefulEvictionTask{{Cluster: "east", PurgeMode: workv1alpha1.PurgeNever, GracePeriodSeconds: 120}}},
		{"Immediately keeps nothing", policyv1alpha1.PurgeImmediately, 120, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, policy(&policyv1alpha1.ApplicationFailoverBehavior{TolerationSeconds: 60, PurgeMode: tt.mode, GracePeriodSeconds: tt.grace}),
				rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("east", "west")}, degradedFor("east", 2*time.Minute), healthy("west")))
			_, spec := h.failover(map[string]*workv1alpha1.Work{})
			if diff := cmp.Diff([]string{"east"}, failedClusters(spec)); diff != "" {
				t.Errorf("failed clusters (-want +got):\n%s", diff)
			}
			only := cmpopts.IgnoreFields(workv1alpha1.GracefulEvictionTask{}, "Replicas", "Reason", "Message", "CreationTimestamp")
			if diff := cmp.Diff(tt.wantTasks, spec.GracefulEvictionTasks, only); diff != "" {
				t.Errorf("eviction tasks (-want +got):\n%s", diff)
			}
		})
	}
}

// Degraded in more than half of several clusters is the workload's own fault: it stays
// where it is. One bad cluster out of one, or half of them, still moves.
func TestApplicationFailoverLeavesAWorkloadDegradedInMostOfSeveralClustersAlone(t *testing.T) {
	tests := []struct {
		name       string
		degraded   []string
		healthy    []string
		wantFailed []string
	}{
		{"one of one moves", []string{"a"}, nil, []string{"a"}},
		{"one of two moves", []string{"a"}, []string{"b"}, []string{"a"}},
		{"two of four (half) move", []string{"a", "b"}, []string{"c", "d"}, []string{"a", "b"}},
		{"two of two stay", []string{"a", "b"}, nil, nil},
		{"two of three stay", []string{"a", "b"}, []string{"c"}, nil},
		{"three of four stay", []string{"a", "b", "c"}, []string{"d"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var status []workv1alpha1.ClusterStatus
			for _, n := range tt.degraded {
				status = append(status, degradedFor(n, time.Hour))
			}
			for _, n := range tt.healthy {
				status = append(status, healthy(n))
			}
			h := newHarness(t, policy(appFailover()), rb(workv1alpha1.ResourceBindingSpec{Clusters: placed(append(tt.degraded, tt.healthy...)...)}, status...))
			_, spec := h.failover(map[string]*workv1alpha1.Work{})
			if diff := cmp.Diff(tt.wantFailed, failedClusters(spec)); diff != "" {
				t.Errorf("failed clusters (-want +got):\n%s", diff)
			}
		})
	}
}

// Until the template changes a workload fails over from at most as many clusters as it is
// placed on, so a broken version does not walk the whole fleet.
func TestApplicationFailoverStopsAfterAsManyClustersAsItIsPlacedOn(t *testing.T) {
	tests := []struct {
		name        string
		failedAt    int64
		failed      []string
		wantFailed  []string
		wantWritten bool
	}{
		{"one failover of two placed: it may move again", templateGeneration, []string{"a"}, []string{"a", "c"}, true},
		{"two failovers of two placed: it stays", templateGeneration, []string{"a", "b"}, []string{"a", "b"}, false},
		// A spec change starts the count again.
		{"two failovers at an earlier template: it moves", templateGeneration - 1, []string{"a", "b"}, []string{"c"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var failed []workv1alpha1.FailedCluster
			for _, n := range tt.failed {
				failed = append(failed, workv1alpha1.FailedCluster{Cluster: n, TemplateGeneration: tt.failedAt, Time: ago(time.Hour)})
			}
			h := newHarness(t, policy(appFailover()), rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("c", "d"), FailedClusters: failed},
				degradedFor("c", time.Hour), healthy("d")))
			_, spec := h.failover(map[string]*workv1alpha1.Work{})
			if diff := cmp.Diff(tt.wantFailed, failedClusters(spec)); diff != "" {
				t.Errorf("failed clusters (-want +got):\n%s", diff)
			}
			if got := h.patches > 0; got != tt.wantWritten {
				t.Errorf("binding written = %v, want %v", got, tt.wantWritten)
			}
		})
	}
}

// The limit holds within one pass too: placed on four clusters with three failovers behind
// it, two clusters Degraded together (half, so not the workload's own fault) may add only one
// more failover.
func TestApplicationFailoverNeverExceedsThePlacedClustersInOnePass(t *testing.T) {
	var failed []workv1alpha1.FailedCluster
	for _, n := range []string{"x", "y", "z"} {
		failed = append(failed, workv1alpha1.FailedCluster{Cluster: n, TemplateGeneration: templateGeneration, Time: ago(time.Hour)})
	}
	h := newHarness(t, policy(appFailover()), rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("a", "b", "c", "d"), FailedClusters: failed},
		degradedFor("a", time.Hour), degradedFor("b", time.Hour), healthy("c"), healthy("d")))
	_, spec := h.failover(map[string]*workv1alpha1.Work{})
	if n := len(spec.FailedClusters); n > 4 {
		t.Errorf("failed over from %d clusters (%v) while placed on 4", n, failedClusters(spec))
	}
}

// Some clusters are never failed over from: a suspended one (Flotilla does not write there)
// and one the workload already failed over from at this template.
func TestApplicationFailoverSkipsSuspendedAndAlreadyFailedClusters(t *testing.T) {
	t.Run("suspended", func(t *testing.T) {
		east := degradedFor("east", time.Hour)
		east.Suspended = true
		h := newHarness(t, policy(appFailover()), rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("east", "west")}, east, healthy("west")))
		_, spec := h.failover(map[string]*workv1alpha1.Work{})
		if len(spec.FailedClusters) != 0 || len(spec.GracefulEvictionTasks) != 0 || h.patches != 0 {
			t.Errorf("failed %v, tasks %v, %d writes: want the suspended cluster left alone", failedClusters(spec), taskClusters(spec), h.patches)
		}
	})
	t.Run("already failed", func(t *testing.T) {
		// The scheduler has not moved it yet: the status still shows it Degraded.
		failed := []workv1alpha1.FailedCluster{{Cluster: "east", TemplateGeneration: templateGeneration, Time: ago(time.Minute)}}
		h := newHarness(t, policy(appFailover()), rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("east", "west", "north"), FailedClusters: failed},
			degradedFor("east", time.Hour), healthy("west"), healthy("north")))
		_, spec := h.failover(map[string]*workv1alpha1.Work{})
		if diff := cmp.Diff([]string{"east"}, failedClusters(spec)); diff != "" || len(spec.GracefulEvictionTasks) != 0 || h.patches != 0 {
			t.Errorf("failed %v, tasks %v, %d writes: want no second failover from east", failedClusters(spec), taskClusters(spec), h.patches)
		}
	})
}

// Without a policy that asks for application failover a Degraded workload stays put.
func TestApplicationFailoverNeedsAPolicyThatAsksForIt(t *testing.T) {
	tests := []struct {
		name   string
		policy client.Object
	}{
		{"the policy is gone", nil},
		{"the policy has no failover", policy(nil)},
		{"the policy has cluster failover only", &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
			Spec: policyv1alpha1.PropagationSpec{Failover: &policyv1alpha1.FailoverBehavior{Cluster: &policyv1alpha1.ClusterFailoverBehavior{}}}}},
		// The binding names a PropagationPolicy: a ClusterPropagationPolicy of that name is not it.
		{"only a ClusterPropagationPolicy of that name asks", &policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: policyv1alpha1.PropagationSpec{Failover: &policyv1alpha1.FailoverBehavior{Application: appFailover()}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []client.Object{rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("east", "west")}, degradedFor("east", time.Hour), healthy("west"))}
			if tt.policy != nil {
				objs = append(objs, tt.policy)
			}
			h := newHarness(t, objs...)
			_, spec := h.failover(map[string]*workv1alpha1.Work{})
			if len(spec.FailedClusters) != 0 || h.patches != 0 {
				t.Errorf("failed over from %v with %d writes", failedClusters(spec), h.patches)
			}
		})
	}
}

// A ClusterResourceBinding's policy is a ClusterPropagationPolicy, read without a namespace.
func TestApplicationFailoverReadsAClusterPropagationPolicy(t *testing.T) {
	b := rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("east", "west"), PolicyRef: workv1alpha1.PolicyReference{Kind: "ClusterPropagationPolicy", Name: "web"}},
		degradedFor("east", time.Hour), healthy("west"))
	cpp := &policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1alpha1.PropagationSpec{Failover: &policyv1alpha1.FailoverBehavior{Application: appFailover()}}}
	h := newHarness(t, cpp, b)
	_, spec := h.failover(map[string]*workv1alpha1.Work{})
	if diff := cmp.Diff([]string{"east"}, failedClusters(spec)); diff != "" {
		t.Errorf("failed clusters (-want +got):\n%s", diff)
	}
}

// Exclusions recorded at an earlier template generation are dropped: the spec change lifts
// them.
func TestFailedClustersOfAnEarlierTemplateAreDropped(t *testing.T) {
	h := newHarness(t, rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("west"), FailedClusters: []workv1alpha1.FailedCluster{
		{Cluster: "east", TemplateGeneration: templateGeneration - 1, Time: ago(time.Hour)},
		{Cluster: "north", TemplateGeneration: templateGeneration, Time: ago(time.Hour)},
	}}, healthy("west")))
	_, spec := h.failover(map[string]*workv1alpha1.Work{})
	if diff := cmp.Diff([]string{"north"}, failedClusters(spec)); diff != "" {
		t.Errorf("failed clusters (-want +got):\n%s", diff)
	}
}

// Events report what was written: a write that fails (a conflict retries the whole
// decision) emits none, and returns the error.
func TestFailoverEmitsNoEventsWhenTheWriteFails(t *testing.T) {
	tk := task("east", workv1alpha1.EvictionReasonClusterFailover, workv1alpha1.PurgeGraceful, time.Hour)
	h := newHarness(t, policy(appFailover()), rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("west", "north"), GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{tk}},
		healthy("west"), degradedFor("north", time.Hour)))
	h.patchErr = apierrors.NewConflict(schema.GroupResource{Group: workv1alpha1.GroupVersion.Group, Resource: "resourcebindings"}, "web-deployment", nil)
	if _, err := h.failovers.failover(context.Background(), h.binding(), map[string]*workv1alpha1.Work{}, templateGeneration); !apierrors.IsConflict(err) {
		t.Fatalf("error = %v, want the conflict", err)
	}
	if evs := h.events(); len(evs) != 0 {
		t.Errorf("events = %q after a failed write", evs)
	}
	// Then the retry writes once and reports each change once.
	h.patchErr = nil
	h.failover(map[string]*workv1alpha1.Work{})
	if diff := cmp.Diff([]string{"Warning EvictionTimedOut", "Warning ApplicationFailover"}, h.reasons()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// clusterState says what the cluster itself adds to a cluster's status: lost while it is not
// Ready, suspended, and since when the workload is Degraded there (the toleration's start).
func TestClusterState(t *testing.T) {
	earlier := microAgo(10 * time.Minute)
	tests := []struct {
		name          string
		cluster       *clusterv1alpha1.Cluster
		suspend       *workv1alpha1.Suspension
		old           *metav1.MicroTime // DegradedSince of the previous status
		health        workv1alpha1.Health
		wantLost      bool
		wantHealth    workv1alpha1.Health
		wantSuspended bool
		wantSince     string // "", "earlier" or "now"
	}{
		{name: "a Ready cluster keeps the Work's health", cluster: clusterObj("east", metav1.ConditionTrue), health: workv1alpha1.HealthHealthy, wantHealth: workv1alpha1.HealthHealthy},
		{name: "a not Ready cluster is lost and its health Unknown", cluster: clusterObj("east", metav1.ConditionFalse), health: workv1alpha1.HealthHealthy, wantLost: true, wantHealth: workv1alpha1.HealthUnknown},
		// A lost cluster's Degraded is stale, and must not run a toleration down.
		{name: "a lost cluster does not count as Degraded", cluster: clusterObj("east", metav1.ConditionFalse), old: &earlier, health: workv1alpha1.HealthDegraded, wantLost: true, wantHealth: workv1alpha1.HealthUnknown},
		{name: "a cluster not found is not reported lost", health: workv1alpha1.HealthProgressing, wantHealth: workv1alpha1.HealthProgressing},
		{name: "newly Degraded starts counting now", cluster: clusterObj("east", metav1.ConditionTrue), health: workv1alpha1.HealthDegraded, wantHealth: workv1alpha1.HealthDegraded, wantSince: "now"},
		{name: "still Degraded keeps counting from when it turned Degraded", cluster: clusterObj("east", metav1.ConditionTrue), old: &earlier, health: workv1alpha1.HealthDegraded, wantHealth: workv1alpha1.HealthDegraded, wantSince: "earlier"},
		{name: "no longer Degraded stops counting", cluster: clusterObj("east", metav1.ConditionTrue), old: &earlier, health: workv1alpha1.HealthHealthy, wantHealth: workv1alpha1.HealthHealthy},
		{name: "a suspended cluster says so", cluster: clusterObj("east", metav1.ConditionTrue), suspend: &workv1alpha1.Suspension{Clusters: []string{"east"}}, health: workv1alpha1.HealthHealthy, wantHealth: workv1alpha1.HealthHealthy, wantSuspended: true},
		{name: "suspended dispatching covers every cluster", cluster: clusterObj("east", metav1.ConditionTrue), suspend: &workv1alpha1.Suspension{Dispatching: true}, health: workv1alpha1.HealthHealthy, wantHealth: workv1alpha1.HealthHealthy, wantSuspended: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []client.Object
			if tt.cluster != nil {
				objs = append(objs, tt.cluster)
			}
			h := newHarness(t, objs...)
			b := rb(workv1alpha1.ResourceBindingSpec{Clusters: placed("east"), Suspend: tt.suspend}, workv1alpha1.ClusterStatus{Cluster: "east", DegradedSince: tt.old})
			cs := workv1alpha1.ClusterStatus{Cluster: "east", Health: tt.health}
			h.ctrl.clusterState(context.Background(), b, &cs)
			if cs.Lost != tt.wantLost || cs.Health != tt.wantHealth || cs.Suspended != tt.wantSuspended {
				t.Errorf("lost %v health %s suspended %v, want %v %s %v", cs.Lost, cs.Health, cs.Suspended, tt.wantLost, tt.wantHealth, tt.wantSuspended)
			}
			if tt.wantLost && !strings.Contains(cs.Message, "cluster east is not Ready") {
				t.Errorf("message %q does not say the cluster is not Ready", cs.Message)
			}
			switch tt.wantSince {
			case "":
				if cs.DegradedSince != nil {
					t.Errorf("DegradedSince = %v, want unset", cs.DegradedSince)
				}
			case "earlier":
				if cs.DegradedSince == nil || !cs.DegradedSince.Equal(&earlier) {
					t.Errorf("DegradedSince = %v, want %v", cs.DegradedSince, earlier)
				}
			case "now":
				if cs.DegradedSince == nil || time.Since(cs.DegradedSince.Time) > slack {
					t.Errorf("DegradedSince = %v, want now", cs.DegradedSince)
				}
			}
		})
	}
}

// The old placement's Work (a cluster no longer placed) is kept while a Graceful or Never
// eviction task holds it, and deleted at once without a task or with an Immediately one.
func TestReconcileKeepsAnEvictedClustersWorkWhileItsTaskHoldsIt(t *testing.T) {
	tests := []struct {
		name     string
		mode     string // "" for no task
		wantKept bool
	}{
		{"Graceful task", workv1alpha1.PurgeGraceful, true},
		{"Never task", workv1alpha1.PurgeNever, true},
		{"Immediately task", workv1alpha1.PurgeImmediately, false},
		{"no task", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := workv1alpha1.ResourceBindingSpec{Clusters: placed("west")}
			if tt.mode != "" {
				spec.GracefulEvictionTasks = []workv1alpha1.GracefulEvictionTask{task("east", workv1alpha1.EvictionReasonClusterFailover, tt.mode, time.Minute)}
			}
			b := rb(spec)
			old := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: kube.ExecutionNamespacePrefix + "east", Name: WorkName(b), Labels: map[string]string{
				workv1alpha1.BindingNamespaceLabel: "shop", workv1alpha1.BindingNameLabel: "web-deployment", workv1alpha1.ClusterLabel: "east",
			}}}
			deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Generation: templateGeneration},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}}}
			h := newHarness(t, b, old, deploy, clusterObj("west", metav1.ConditionTrue), clusterObj("east", metav1.ConditionFalse))
			if _, err := h.ctrl.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)}); err != nil {
				t.Fatal(err)
			}
			err := h.client.Get(context.Background(), client.ObjectKeyFromObject(old), &workv1alpha1.Work{})
			if kept := err == nil; kept != tt.wantKept || (err != nil && !apierrors.IsNotFound(err)) {
				t.Errorf("east's Work kept = %v (%v), want %v", kept, err, tt.wantKept)
			}
		})
	}
}
