package failover

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/eventstest"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
)

const grace = time.Minute

// now is whole seconds: taint and condition times go through JSON, which keeps seconds only.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var gpuTaint = clusterv1alpha1.Taint{Key: "dedicated", Value: "gpu", Effect: clusterv1alpha1.TaintEffectNoSchedule}

func unreachableSince(at time.Time) clusterv1alpha1.Taint {
	t := metav1.NewTime(at)
	return clusterv1alpha1.Taint{Key: names.UnreachableTaintKey, Effect: clusterv1alpha1.TaintEffectNoExecute, TimeAdded: &t}
}

// member is a cluster whose Ready condition has had status since the given time; a zero
// since means the cluster was never probed.
func member(status metav1.ConditionStatus, since time.Time, taints ...clusterv1alpha1.Taint) *clusterv1alpha1.Cluster {
	cl := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "east"}}
	cl.Spec.Taints = taints
	if !since.IsZero() {
		cl.Status.Conditions = []metav1.Condition{{
			Type: clusterv1alpha1.ConditionReady, Status: status, Reason: "Probe", Message: "connection refused",
			LastTransitionTime: metav1.NewTime(since),
		}}
	}
	return cl
}

type taintHarness struct {
	t        *testing.T
	client   client.Client
	ctrl     *TaintController
	recorder *events.FakeRecorder
	patches  int
}

func newTaintHarness(t *testing.T, cl *clusterv1alpha1.Cluster, patchErr error) *taintHarness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clusterv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	h := &taintHarness{t: t, recorder: events.NewFakeRecorder(10)}
	h.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(cl).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			h.patches++
			if patchErr != nil {
				return patchErr
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	h.ctrl = &TaintController{Client: h.client, Recorder: h.recorder, GracePeriod: grace, Clock: clocktesting.NewFakePassiveClock(now)}
	return h
}

func (h *taintHarness) reconcile() (ctrl.Result, error) {
	return h.ctrl.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "east"}})
}

func (h *taintHarness) taints() []clusterv1alpha1.Taint {
	h.t.Helper()
	cl := &clusterv1alpha1.Cluster{}
	if err := h.client.Get(context.Background(), client.ObjectKey{Name: "east"}, cl); err != nil {
		h.t.Fatal(err)
	}
	return cl.Spec.Taints
}

func (h *taintHarness) events() []string { return eventstest.Drain(h.recorder) }

// The controller's whole contract, one cluster state at a time: what it requeues, which
// taints the cluster ends with, and which events say so.
func TestTaintControllerReconcile(t *testing.T) {
	deleting := member(metav1.ConditionFalse, now.Add(-time.Hour))
	deleting.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Second)}
	deleting.Finalizers = []string{"flotilla.dev/test"} // the fake client keeps a deleted object only with a finalizer

	tests := []struct {
		name        string
		cluster     *clusterv1alpha1.Cluster
		wantRequeue time.Duration
		wantTaints  []clusterv1alpha1.Taint
		wantEvent   string // prefix "TYPE REASON" of the one event expected, "" for none
	}{
		{
			name:    "a cluster never probed is left alone",
			cluster: member("", time.Time{}, gpuTaint),
			// No Ready condition says nothing about reachability.
			wantTaints: []clusterv1alpha1.Taint{gpuTaint},
		},
		{
			name:        "not Ready for less than the grace period waits out the remainder untainted",
			cluster:     member(metav1.ConditionFalse, now.Add(-20*time.Second)),
			wantRequeue: 41 * time.Second, // the stored second may have ended a second later
		},
		{
			name:        "not Ready for exactly the grace period by the stored whole second waits one second more",
			cluster:     member(metav1.ConditionFalse, now.Add(-grace)),
			wantRequeue: time.Second,
		},
		{
			name:       "not Ready for the grace period after the stored second ended is tainted",
			cluster:    member(metav1.ConditionFalse, now.Add(-grace-time.Second)),
			wantTaints: []clusterv1alpha1.Taint{unreachableSince(now)},
			wantEvent:  "Warning TaintedUnreachable",
		},
		{
			name:       "not Ready past the grace period is tainted unreachable:NoExecute with TimeAdded",
			cluster:    member(metav1.ConditionFalse, now.Add(-5*time.Minute)),
			wantTaints: []clusterv1alpha1.Taint{unreachableSince(now)},
			wantEvent:  "Warning TaintedUnreachable",
		},
		{
			name:       "an Unknown Ready condition counts as not Ready",
			cluster:    member(metav1.ConditionUnknown, now.Add(-5*time.Minute)),
			wantTaints: []clusterv1alpha1.Taint{unreachableSince(now)},
			wantEvent:  "Warning TaintedUnreachable",
		},
		{
			name:       "tainting keeps the cluster's other taints",
			cluster:    member(metav1.ConditionFalse, now.Add(-5*time.Minute), gpuTaint),
			wantTaints: []clusterv1alpha1.Taint{gpuTaint, unreachableSince(now)},
			wantEvent:  "Warning TaintedUnreachable",
		},
		{
			name: "a cluster already tainted and still not Ready keeps its original TimeAdded",
			// Re-tainting would move TimeAdded and restart every toleration counted from it.
			cluster:    member(metav1.ConditionFalse, now.Add(-time.Hour), unreachableSince(now.Add(-50*time.Minute))),
			wantTaints: []clusterv1alpha1.Taint{unreachableSince(now.Add(-50 * time.Minute))},
		},
		{
			name:       "a Ready untainted cluster is left alone",
			cluster:    member(metav1.ConditionTrue, now.Add(-time.Second), gpuTaint),
			wantTaints: []clusterv1alpha1.Taint{gpuTaint},
		},
		{
			name:        "a tainted cluster Ready again for less than the grace period keeps the taint (hold-down)",
			cluster:     member(metav1.ConditionTrue, now.Add(-15*time.Second), unreachableSince(now.Add(-time.Hour))),
			wantRequeue: 46 * time.Second,
			wantTaints:  []clusterv1alpha1.Taint{unreachableSince(now.Add(-time.Hour))},
		},
		{
			name:       "a tainted cluster Ready for the grace period loses only the unreachable taint",
			cluster:    member(metav1.ConditionTrue, now.Add(-grace-time.Second), gpuTaint, unreachableSince(now.Add(-time.Hour))),
			wantTaints: []clusterv1alpha1.Taint{gpuTaint},
			wantEvent:  "Normal Untainted",
		},
		{
			name: "untainting keeps a hand-set taint of the same key with another effect",
			cluster: member(metav1.ConditionTrue, now.Add(-grace-time.Second), clusterv1alpha1.Taint{Key: names.UnreachableTaintKey, Effect: clusterv1alpha1.TaintEffectNoSchedule},
				unreachableSince(now.Add(-time.Hour))),
			wantTaints: []clusterv1alpha1.Taint{{Key: names.UnreachableTaintKey, Effect: clusterv1alpha1.TaintEffectNoSchedule}},
			wantEvent:  "Normal Untainted",
		},
		{
			name:      "a tainted cluster Ready long past the grace period is untainted",
			cluster:   member(metav1.ConditionTrue, now.Add(-time.Hour), unreachableSince(now.Add(-2*time.Hour))),
			wantEvent: "Normal Untainted",
		},
		{
			name:    "a cluster being deleted is left alone",
			cluster: deleting,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newTaintHarness(t, tt.cluster, nil)
			res, err := h.reconcile()
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter != tt.wantRequeue {
				t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, tt.wantRequeue)
			}
			if diff := cmp.Diff(tt.wantTaints, h.taints(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
			evs := h.events()
			switch {
			case tt.wantEvent == "" && len(evs) != 0:
				t.Errorf("events = %q, want none", evs)
			case tt.wantEvent != "" && (len(evs) != 1 || !strings.HasPrefix(evs[0], tt.wantEvent+" ")):
				t.Errorf("events = %q, want one %q", evs, tt.wantEvent)
			}
			// A cluster that needs no change costs no write.
			if wantPatches := map[bool]int{true: 0, false: 1}[tt.wantEvent == ""]; h.patches != wantPatches {
				t.Errorf("%d patches, want %d", h.patches, wantPatches)
			}
		})
	}
}

// The event says how long the cluster was unreachable and why, so that an operator reading
// it needs no other object.
func TestTaintEventSaysForHowLongAndWhy(t *testing.T) {
	h := newTaintHarness(t, member(metav1.ConditionFalse, now.Add(-90*time.Second)), nil)
	if _, err := h.reconcile(); err != nil {
		t.Fatal(err)
	}
	want := []string{"Warning TaintedUnreachable not Ready for 1m30s (grace period 1m0s): connection refused"}
	if diff := cmp.Diff(want, h.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A failed write is returned for a retry and reports nothing: the event would claim a taint
// the cluster does not carry.
func TestTaintWriteFailureEmitsNoEvent(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: clusterv1alpha1.GroupVersion.Group, Resource: "clusters"}, "east", nil)
	for _, cl := range []*clusterv1alpha1.Cluster{
		member(metav1.ConditionFalse, now.Add(-time.Hour)),
		member(metav1.ConditionTrue, now.Add(-time.Hour), unreachableSince(now.Add(-2*time.Hour))),
	} {
		h := newTaintHarness(t, cl, conflict)
		if _, err := h.reconcile(); !apierrors.IsConflict(err) {
			t.Errorf("Ready=%s: error = %v, want the conflict", cl.Status.Conditions[0].Status, err)
		}
		if evs := h.events(); len(evs) != 0 {
			t.Errorf("Ready=%s: events = %q after a failed write", cl.Status.Conditions[0].Status, evs)
		}
	}
}

// A cluster deleted before its reconcile is not an error.
func TestTaintGoneClusterIsNotAnError(t *testing.T) {
	h := newTaintHarness(t, member(metav1.ConditionFalse, now.Add(-time.Hour)), nil)
	res, err := h.ctrl.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "west"}})
	if err != nil || res != (ctrl.Result{}) {
		t.Errorf("Reconcile of a missing cluster = %+v, %v", res, err)
	}
}

func TestUnreachable(t *testing.T) {
	tests := []struct {
		name   string
		taints []clusterv1alpha1.Taint
		want   bool
	}{
		{"untainted", nil, false},
		{"other taints only", []clusterv1alpha1.Taint{gpuTaint}, false},
		{"the unreachable key with another effect does not count", []clusterv1alpha1.Taint{{Key: names.UnreachableTaintKey, Effect: clusterv1alpha1.TaintEffectNoSchedule}}, false},
		{"unreachable NoExecute among others", []clusterv1alpha1.Taint{gpuTaint, unreachableSince(now)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kube.Unreachable(member("", time.Time{}, tt.taints...)); got != tt.want {
				t.Errorf("Unreachable = %v, want %v", got, tt.want)
			}
		})
	}
}
