package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/luavm"
	"github.com/flotilla-dev/flotilla/internal/release"
	"github.com/flotilla-dev/flotilla/internal/revision"
)

// releasedBinding is shop/web-deployment placed on east and west with the given revisions.
func releasedBinding(revs *workv1alpha1.Revisions, status ...workv1alpha1.ClusterStatus) *workv1alpha1.ResourceBinding {
	b := webBinding(workv1alpha1.ResourceBindingSpec{
		Resource:           workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
		ConflictResolution: "Overwrite",
		Revisions:          revs,
	})
	b.TypeMeta = metav1.TypeMeta{APIVersion: workv1alpha1.GroupVersion.String(), Kind: "ResourceBinding"}
	b.Status.Clusters = status
	return b
}

// webRelease is the release of revision rev of shop/web from stable, its waves east then west.
func webRelease(rev, stable int64, status rolloutv1alpha1.ReleaseStatus, waves ...policyv1alpha1.Wave) *rolloutv1alpha1.Release {
	if len(waves) == 0 {
		waves = []policyv1alpha1.Wave{{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{ManualApproval: true}}}
	}
	return &rolloutv1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("web-deployment-r%d", rev)},
		Spec: rolloutv1alpha1.ReleaseSpec{
			Binding:  rolloutv1alpha1.BindingReference{Kind: "ResourceBinding", Name: "web-deployment"},
			Resource: rolloutv1alpha1.ResourceReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
			Revision: rev, StableRevision: stable,
			Strategy: policyv1alpha1.RolloutStrategy{Waves: waves},
		},
		Status: status,
	}
}

// webTemplate is the template shop/web running image.
func webTemplate(image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(4)),
			Template: corev1PodTemplate(image),
		},
	}
}

// revisionOf is the ControllerRevision holding the template at revision rev, as the recorder
// writes it.
func revisionOf(t *testing.T, b workv1alpha1.Binding, rev int64, d *appsv1.Deployment) *appsv1.ControllerRevision {
	t.Helper()
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: raw}
	hash := revision.WorkloadHash(interpret.NewRegistry(luavm.Limits{}).For(u.GroupVersionKind()), u)
	data, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: revision.Name(b, rev), Annotations: map[string]string{revision.RevisionHashAnnotation: hash}},
		Data:       runtime.RawExtension{Raw: data}, Revision: rev,
	}
}

func corev1PodTemplate(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
	}
}

func intstrOf(s string) intstr.IntOrString { return intstr.FromString(s) }

func fakeClient(objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(objs...).WithStatusSubresource(&rolloutv1alpha1.Release{}).Build()
}

// A staged first release (an adoption) stays the template's release once it succeeded:
// `release get` finds it although revision 1 is stable; a first revision that went everywhere
// at once has none.
func TestFindReleaseFindsTheAdoption(t *testing.T) {
	ctx := context.Background()
	b := releasedBinding(&workv1alpha1.Revisions{Latest: 1, Stable: 1})
	adopted := webRelease(1, 0, rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseSucceeded})
	tgt, err := findRelease(ctx, fakeClient(b.DeepCopy(), adopted), "deployment/web", "shop")
	if err != nil {
		t.Fatal(err)
	}
	if tgt.release == nil || tgt.release.Name != "web-deployment-r1" {
		t.Fatalf("release = %v, want the adoption web-deployment-r1", tgt.release)
	}
	var out bytes.Buffer
	if err := printRelease(ctx, &out, tgt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Release web-deployment-r1  Deployment shop/web  unmanaged → revision 1  Succeeded") {
		t.Errorf("release get of a finished adoption:\n%s", out.String())
	}
	tgt, err = findRelease(ctx, fakeClient(b.DeepCopy()), "deployment/web", "shop")
	if err != nil || tgt.release != nil {
		t.Errorf("unstaged first revision: release %v, error %v; want none", tgt, err)
	}
}

// Undoing an adoption (a staged first release) hands the objects back to unmanaged once it
// succeeded, through the binding's unmanagedClusters as `unmanage` does; one in progress or
// already handed back is refused naming the command that helps; undo to the workload the
// template holds already is refused instead of claiming a release.
func TestUndoOfAnAdoption(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name          string
		revs          *workv1alpha1.Revisions
		release       *rolloutv1alpha1.Release
		wantOut       string
		wantErr       string
		wantUnmanaged []string
	}{
		{name: "succeeded", revs: &workv1alpha1.Revisions{Latest: 1, Stable: 1},
			release:       webRelease(1, 0, rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseSucceeded}),
			wantOut:       "deployment/web: adoption by release web-deployment-r1 undone: handed back to unmanaged in east, west; the objects and their pods keep running (`flotilla manage deployment/web` adopts them again)\n",
			wantUnmanaged: []string{"east", "west"}},
		{name: "in progress", revs: &workv1alpha1.Revisions{Latest: 1, Stable: 0, Pins: []workv1alpha1.RevisionPin{{Cluster: "east", Revision: 1}}},
			release: webRelease(1, 0, rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing}),
			wantErr: "release web-deployment-r1 is still adopting it wave by wave; `flotilla release abort deployment/web` hands the clusters it adopted back to unmanaged"},
		{name: "aborted", revs: &workv1alpha1.Revisions{Latest: 1, Stable: 0},
			release: webRelease(1, 0, rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseAborted}),
			wantErr: "is Aborted and handed its clusters back to unmanaged already; nothing to undo"},
		{name: "first revision, not staged", revs: &workv1alpha1.Revisions{Latest: 1, Stable: 1},
			wantErr: "deployment/web: the template holds the workload of revision 1 already, so undo would change nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := releasedBinding(tt.revs)
			objs := []client.Object{b.DeepCopy(), webTemplate("registry.example/web:1"), revisionOf(t, b, 1, webTemplate("registry.example/web:1"))}
			if tt.release != nil {
				objs = append(objs, tt.release)
			}
			c := fakeClient(objs...)
			tgt, err := findRelease(ctx, c, "deployment/web", "shop")
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err = undoRelease(ctx, &out, tgt, 0)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.wantOut {
				t.Errorf("output %q, want %q", out.String(), tt.wantOut)
			}
			tmpl := &appsv1.Deployment{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web"}, tmpl); err != nil {
				t.Fatal(err)
			}
			// The switch is the template's annotation; the detector copies it to the binding.
			if _, unmanaged := workv1alpha1.SwitchesFrom(tmpl.Annotations); !cmp.Equal(tt.wantUnmanaged, unmanaged) {
				t.Errorf("unmanaged clusters %v, want %v", unmanaged, tt.wantUnmanaged)
			}
			if tmpl.Spec.Template.Spec.Containers[0].Image != "registry.example/web:1" {
				t.Errorf("undo changed the template's image to %s", tmpl.Spec.Template.Spec.Containers[0].Image)
			}
		})
	}
}

// The tree's words about a cluster come from the same live reading as the figures beside them
// (a release's own messages date from its last reconcile), and a cluster in a canary step shows
// its canary replicas and the images of both revisions; the wave says its step as N/M.
func TestReleaseTreeSaysWhatTheLiveStatusShows(t *testing.T) {
	ctx := context.Background()
	waves := []policyv1alpha1.Wave{
		{Name: "canary", ClusterNames: []string{"east"}, Steps: []policyv1alpha1.CanaryStep{{SetWeight: ptr.To(int32(20))}, {Pause: &policyv1alpha1.PauseStep{}}, {SetWeight: ptr.To(int32(40))}, {Pause: &policyv1alpha1.PauseStep{}}}},
		{Name: "rest", ClusterNames: []string{"west"}},
	}
	status := func(raw string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(raw)} }
	tests := []struct {
		name     string
		revs     *workv1alpha1.Revisions
		clusters []workv1alpha1.ClusterStatus
		status   rolloutv1alpha1.ReleaseStatus
		want     []string
		notWant  []string
	}{
		{
			name: "a stale message under a healthy cluster",
			revs: &workv1alpha1.Revisions{Latest: 2, Stable: 1, Pins: []workv1alpha1.RevisionPin{{Cluster: "east", Revision: 2}}},
			clusters: []workv1alpha1.ClusterStatus{
				{Cluster: "east", Applied: true, Revision: 2, Health: workv1alpha1.HealthHealthy, Status: status(`{"replicas":3,"availableReplicas":3}`)},
				{Cluster: "west", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy},
			},
			status: rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Waves: []rolloutv1alpha1.WaveStatus{
				{Name: "canary", Phase: rolloutv1alpha1.WaveUpdating, CurrentStep: 4, Message: "0 of 1 clusters run revision 2 healthy",
					Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "east", Phase: rolloutv1alpha1.ClusterUpdating, Message: "waiting for revision 2 to run healthy (now: revision 0, Healthy)"}}},
				{Name: "rest", Phase: rolloutv1alpha1.WavePending, Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "west", Phase: rolloutv1alpha1.ClusterPending}}},
			}},
			want: []string{
				"└─ ✔ east  Healthy  [deployment rev 2 registry.example/web:2 Healthy 3/3 available]",
				"├─ ◐ wave canary  Updating  canary steps 4/4 done; 1 of 1 clusters run revision 2 healthy",
				"└─ ○ west  Pending  [deployment rev 1 registry.example/web:1 Healthy]  waits for its wave; keeps revision 1 until then",
			},
			notWant: []string{"now: revision 0", "0 of 1"},
		},
		{
			name: "a cluster that waits for its dependencies",
			revs: &workv1alpha1.Revisions{Latest: 2, Stable: 1, Pins: []workv1alpha1.RevisionPin{{Cluster: "east", Revision: 2}}},
			clusters: []workv1alpha1.ClusterStatus{
				{Cluster: "east", Applied: true, Revision: 2, Health: workv1alpha1.HealthHealthy},
				{Cluster: "west", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy},
			},
			status: rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Waves: []rolloutv1alpha1.WaveStatus{
				{Name: "fleet", Phase: rolloutv1alpha1.WaveUpdating, Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "east", Phase: rolloutv1alpha1.ClusterHealthy},
					{Name: "west", Phase: rolloutv1alpha1.ClusterPending, Message: "waits for dependencies: Application shop/db is Progressing in cluster west"}}},
			}},
			want:    []string{"west  Pending  [deployment rev 1 registry.example/web:1 Healthy]  waits for dependencies: Application shop/db is Progressing in cluster west"},
			notWant: []string{"free slot"},
		},
		{
			name: "a cluster a change window holds",
			revs: &workv1alpha1.Revisions{Latest: 2, Stable: 1, Pins: []workv1alpha1.RevisionPin{{Cluster: "east", Revision: 2}}},
			clusters: []workv1alpha1.ClusterStatus{
				{Cluster: "east", Applied: true, Revision: 2, Health: workv1alpha1.HealthHealthy},
				{Cluster: "west", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy},
			},
			status: rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, CurrentWave: 1, Waves: []rolloutv1alpha1.WaveStatus{
				{Name: "canary", Phase: rolloutv1alpha1.WaveSucceeded, CurrentStep: 4, Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "east", Phase: rolloutv1alpha1.ClusterHealthy}}},
				{Name: "rest", Phase: rolloutv1alpha1.WavePending, Message: "not started: west held by change window freeze until 2026-11-28 06:00:00 UTC",
					Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "west", Phase: rolloutv1alpha1.ClusterPending, Message: "held by change window freeze until 2026-11-28 06:00:00 UTC"}}},
			}},
			want:    []string{"west  Pending  [deployment rev 1 registry.example/web:1 Healthy]  held by change window freeze until 2026-11-28 06:00:00 UTC"},
			notWant: []string{"free slot"},
		},
		{
			name: "a canary at its second step",
			revs: &workv1alpha1.Revisions{Latest: 2, Stable: 1, Canaries: []workv1alpha1.CanaryPin{{Cluster: "east", Revision: 2, Replicas: 1}}},
			clusters: []workv1alpha1.ClusterStatus{
				{Cluster: "east", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy, CanaryHealth: workv1alpha1.HealthHealthy, Status: status(`{"replicas":4,"availableReplicas":4}`)},
				{Cluster: "west", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy},
			},
			status: rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Waves: []rolloutv1alpha1.WaveStatus{
				{Name: "canary", Phase: rolloutv1alpha1.WaveWaitingForApproval, CurrentStep: 1, Message: "step 1 pause: waiting for `flotilla release promote`",
					Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "east", Phase: rolloutv1alpha1.ClusterPending, Message: "waits for a free slot (maxUnavailable)"}}},
				{Name: "rest", Phase: rolloutv1alpha1.WavePending, Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "west", Phase: rolloutv1alpha1.ClusterPending}}},
			}},
			want: []string{
				"├─ ॥ wave canary  WaitingForApproval  step 2/4 pause until promote (canary 20%): waiting for `flotilla release promote`",
				"└─ ◐ east  Updating  [deployment rev 1 registry.example/web:1 Healthy 4/4 available; canary 1× rev 2 registry.example/web:2 Healthy]  a canary of revision 2 runs beside the primary, which keeps revision 1 until the steps pass",
			},
			notWant: []string{"free slot", "step 1 pause"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := releasedBinding(tt.revs, tt.clusters...)
			rel := webRelease(2, 1, tt.status, waves...)
			c := fakeClient(b.DeepCopy(), rel.DeepCopy(), revisionOf(t, b, 1, webTemplate("registry.example/web:1")), revisionOf(t, b, 2, webTemplate("registry.example/web:2")))
			tgt, err := findRelease(ctx, c, "deployment/web", "shop")
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := printRelease(ctx, &out, tgt); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("tree lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("tree says %q, which the live status contradicts:\n%s", w, out.String())
				}
			}
		})
	}
}

// An aborted adoption's tree says its clusters were handed back to unmanaged, not that they
// wait for anything.
func TestReleaseTreeOfAnAbortedAdoption(t *testing.T) {
	ctx := context.Background()
	b := releasedBinding(&workv1alpha1.Revisions{Latest: 1, Stable: 0},
		workv1alpha1.ClusterStatus{Cluster: "east", Health: workv1alpha1.HealthUnknown},
		workv1alpha1.ClusterStatus{Cluster: "west", Health: workv1alpha1.HealthUnknown})
	rel := webRelease(1, 0, rolloutv1alpha1.ReleaseStatus{
		Phase: rolloutv1alpha1.ReleaseAborted, UpdatedClusters: []string{"east"},
		Message: "aborted by request; east handed back to unmanaged (objects and pods left running)",
		Waves: []rolloutv1alpha1.WaveStatus{
			{Name: "first", Phase: rolloutv1alpha1.WaveRolledBack, Message: "handed back to unmanaged (objects and pods left running)",
				Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "east", Phase: rolloutv1alpha1.ClusterRolledBack, Message: "waiting for revision 1 to run healthy"}}},
			{Name: "rest", Phase: rolloutv1alpha1.WavePending, Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "west", Phase: rolloutv1alpha1.ClusterPending}}},
		},
	})
	tgt, err := findRelease(ctx, fakeClient(b, rel), "deployment/web", "shop")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printRelease(ctx, &out, tgt); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"↺ Release web-deployment-r1  Deployment shop/web  unmanaged → revision 1  Aborted",
		"└─ ↺ east  RolledBack  [unmanaged]  handed back to unmanaged: Flotilla no longer writes there, the object and its pods keep running",
		"└─ ○ west  Pending  [unmanaged]  not adopted: unmanaged",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("tree lacks %q:\n%s", w, out.String())
		}
	}
	if strings.Contains(out.String(), "waiting") {
		t.Errorf("an aborted adoption waits for nothing:\n%s", out.String())
	}
}

// A template changed a moment ago, before the recorder wrote its revision, is pending: `get`
// says so instead of passing the previous release off as the change's, and `watch` waits.
func TestFindReleaseSeesAChangeNotRecordedYet(t *testing.T) {
	ctx := context.Background()
	b := releasedBinding(&workv1alpha1.Revisions{Latest: 2, Stable: 2})
	done := webRelease(2, 1, rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseSucceeded})
	r2 := revisionOf(t, b, 2, webTemplate("registry.example/web:2"))
	for _, tt := range []struct {
		image   string
		pending bool
	}{{"registry.example/web:2", false}, {"registry.example/web:3", true}} {
		c := fakeClient(b.DeepCopy(), done.DeepCopy(), r2.DeepCopy(), webTemplate(tt.image))
		tgt, err := findRelease(ctx, c, "deployment/web", "shop")
		if err != nil {
			t.Fatal(err)
		}
		if tgt.pending != tt.pending {
			t.Errorf("template at %s: pending %v, want %v", tt.image, tgt.pending, tt.pending)
		}
		if !tt.pending {
			continue
		}
		// watch waits for the change's release rather than ending on the previous one.
		wctx, cancel := context.WithTimeout(ctx, 1200*time.Millisecond)
		var out bytes.Buffer
		_, err = awaitRelease(wctx, &out, c, "deployment/web", "shop")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(out.String(), "is not recorded as a revision yet; waiting for its release") {
			t.Errorf("awaitRelease of a pending change: err %v, out %q", err, out.String())
		}
	}
}

// watch and status end with a code a CI gate can read.
func TestReleaseOutcomeExitCodes(t *testing.T) {
	for _, tt := range []struct {
		status rolloutv1alpha1.ReleaseStatus
		code   int
	}{
		{rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseSucceeded}, 0},
		{rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseRolledBack, Message: "wave canary: Degraded in east"}, ExitReleaseFailed},
		{rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseAborted}, ExitReleaseFailed},
		{rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseSuperseded}, ExitReleaseFailed},
		{rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Waves: []rolloutv1alpha1.WaveStatus{{Name: "canary", Phase: rolloutv1alpha1.WaveFailed}}}, ExitReleaseFailed},
		// Held by a problem only a fix ends: a CI gate hears it at once, not at its timeout.
		{rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Conditions: []metav1.Condition{{Type: release.ConditionValid, Status: metav1.ConditionFalse,
			Reason: "InvalidStrategy", Message: "blocking: the policy's spec.rollout.waves[0].steps[0].setHeaderRoute.match[0].regex: not an RE2 regular expression"}}}, ExitReleaseFailed},
		{rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseProgressing, Conditions: []metav1.Condition{{Type: release.ConditionValid, Status: metav1.ConditionFalse,
			Reason: "InvalidStrategy", Message: "spec.strategy.waves[1] (rest) selects no cluster the template is placed on"}}}, 0},
	} {
		err := outcome(webRelease(2, 1, tt.status))
		var exit *ExitError
		switch {
		case tt.code == 0 && err != nil:
			t.Errorf("%s: %v, want success", tt.status.Phase, err)
		case tt.code != 0 && (!errors.As(err, &exit) || exit.Code != tt.code):
			t.Errorf("%s: %v, want exit code %d", tt.status.Phase, err, tt.code)
		}
	}
	err := withTimeout(context.Background(), 10*time.Millisecond, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != ExitTimeout {
		t.Errorf("timeout: %v, want exit code %d", err, ExitTimeout)
	}
}

// A cluster that left the release (here: failover moved the placement off it) stays in the
// tree with the reason.
func TestReleaseTreeKeepsAClusterThatLeft(t *testing.T) {
	ctx := context.Background()
	b := releasedBinding(&workv1alpha1.Revisions{Latest: 2, Stable: 2},
		workv1alpha1.ClusterStatus{Cluster: "east", Applied: true, Revision: 2, Health: workv1alpha1.HealthHealthy})
	b.Spec.Clusters = []workv1alpha1.TargetCluster{{Name: "east", Replicas: 4}}
	rel := webRelease(2, 1, rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseSucceeded,
		Message: "revision 2 runs in every cluster still in the release; west left it (see the waves for why) and runs revision 2 once back",
		Waves: []rolloutv1alpha1.WaveStatus{{Name: "first", Phase: rolloutv1alpha1.WaveSucceeded, Clusters: []rolloutv1alpha1.ClusterRelease{
			{Name: "east", Phase: rolloutv1alpha1.ClusterHealthy},
			{Name: "west", Phase: rolloutv1alpha1.ClusterLeft, Message: "lost/unreachable: the cluster is tainted cluster.flotilla.dev/unreachable:NoExecute, which moves placements off it (cluster failover); the release goes on without it, and it rejoins when it returns"},
		}}}})
	c := fakeClient(b.DeepCopy(), rel.DeepCopy(), revisionOf(t, b, 2, webTemplate("registry.example/web:2")), webTemplate("registry.example/web:2"))
	tgt, err := findRelease(ctx, c, "deployment/web", "shop")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printRelease(ctx, &out, tgt); err != nil {
		t.Fatal(err)
	}
	want := "⇥ west  Left  [not placed]  left the release: lost/unreachable: the cluster is tainted cluster.flotilla.dev/unreachable:NoExecute"
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "west left it (see the waves for why)") {
		t.Errorf("tree lacks %q:\n%s", want, out.String())
	}
}

// The tree says how each compare metric judged the canary against its baseline.
func TestReleaseTreeShowsCompareVerdicts(t *testing.T) {
	ctx := context.Background()
	waves := []policyv1alpha1.Wave{{Name: "canary", ClusterNames: []string{"east"}}, {Name: "rest", ClusterNames: []string{"west"}}}
	b := releasedBinding(&workv1alpha1.Revisions{Latest: 2, Stable: 1, Pins: []workv1alpha1.RevisionPin{{Cluster: "east", Revision: 2}}},
		workv1alpha1.ClusterStatus{Cluster: "east", Applied: true, Revision: 2, Health: workv1alpha1.HealthHealthy},
		workv1alpha1.ClusterStatus{Cluster: "west", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy})
	rel := webRelease(2, 1, rolloutv1alpha1.ReleaseStatus{Phase: rolloutv1alpha1.ReleaseRolledBack, Waves: []rolloutv1alpha1.WaveStatus{
		{Name: "canary", Phase: rolloutv1alpha1.WaveFailed, AnalysisRun: "web-deployment-r2-canary", Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "east", Phase: rolloutv1alpha1.ClusterRolledBack}}},
		{Name: "rest", Phase: rolloutv1alpha1.WavePending, Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "west", Phase: rolloutv1alpha1.ClusterPending}}},
	}}, waves...)
	run := &rolloutv1alpha1.AnalysisRun{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment-r2-canary"},
		Spec: rolloutv1alpha1.AnalysisRunSpec{Metrics: []rolloutv1alpha1.Metric{
			{Name: "threshold", SuccessCondition: "result < 0.05"},
			{Name: "errors-vs-stable", Compare: &rolloutv1alpha1.Comparison{MaxRatio: "1.5"}},
		}},
		Status: rolloutv1alpha1.AnalysisRunStatus{Phase: rolloutv1alpha1.AnalysisFailed, MetricResults: []rolloutv1alpha1.MetricResult{
			{Name: "threshold", Phase: rolloutv1alpha1.AnalysisSuccessful, Measurements: []rolloutv1alpha1.Measurement{{Phase: rolloutv1alpha1.AnalysisSuccessful, Value: "[0.03]"}}},
			{Name: "errors-vs-stable", Phase: rolloutv1alpha1.AnalysisFailed, Measurements: []rolloutv1alpha1.Measurement{{Phase: rolloutv1alpha1.AnalysisFailed,
				Value: `{"canary":0.03,"baseline":0.01,"ratio":3,"difference":0.02}`, Message: "canary 0.03 vs baseline 0.01: ratio 3 (at most 1.5), worse than allowed"}}},
		}}}
	c := fakeClient(b.DeepCopy(), rel.DeepCopy(), run, revisionOf(t, b, 1, webTemplate("registry.example/web:1")), revisionOf(t, b, 2, webTemplate("registry.example/web:2")))
	tgt, err := findRelease(ctx, c, "deployment/web", "shop")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printRelease(ctx, &out, tgt); err != nil {
		t.Fatal(err)
	}
	want := "compare errors-vs-stable  Failed  canary 0.03 vs baseline 0.01: ratio 3 (at most 1.5), worse than allowed"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("tree lacks %q:\n%s", want, out.String())
	}
	if strings.Contains(out.String(), "compare threshold") {
		t.Fatalf("only compare metrics get a verdict line:\n%s", out.String())
	}
}
