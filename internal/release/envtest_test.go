package release

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/detector"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/statusboard"
	"github.com/flotilla-dev/flotilla/internal/testenv"
)

// releaseFixture starts the detector, the recorder and the release controller on a real API
// server with the clusters east and west, the Deployment shop/web (image web:1) placed on both
// by a policy with the given rollout, and a loop playing the members: every 100ms it calls
// report with the binding, whose status it then writes. It returns the client and the binding.
func releaseFixture(t *testing.T, rollout *policyv1alpha1.RolloutStrategy, report func(cur *workv1alpha1.ResourceBinding)) (client.Client, *workv1alpha1.ResourceBinding) {
	t.Helper()
	return releaseFixtureOn(t, rollout, report, nil)
}

// releaseFixtureOn is releaseFixture with the release controller reading board; when it is not
// nil the members' reports go only onto it, as the binding controller's progress does before
// it is written, and never to the binding's stored status.
func releaseFixtureOn(t *testing.T, rollout *policyv1alpha1.RolloutStrategy, report func(cur *workv1alpha1.ResourceBinding), board *statusboard.Board) (client.Client, *workv1alpha1.ResourceBinding) {
	t.Helper()
	ctx := context.Background()
	cfg, c := testenv.Start(t)
	testenv.Manager(t, cfg, func(mgr ctrl.Manager) error {
		// The detector carries the template's change to the binding, as in production.
		if err := (&detector.Detector{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			return err
		}
		if err := (&Recorder{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&Controller{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Board: board}).SetupWithManager(mgr)
	})
	for _, ns := range []string{"shop", kube.SystemNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"east", "west"} {
		cl := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: clusterv1alpha1.ClusterSpec{Endpoint: "https://" + name + ".example:6443", SyncMode: clusterv1alpha1.SyncModePush,
				CredentialsSecretRef: clusterv1alpha1.SecretReference{Namespace: kube.SystemNamespace, Name: name}}}
		if err := c.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	labels := map[string]string{"app": "web"}
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}}}}}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Rollout:           rollout,
		}}
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment"},
		Spec: workv1alpha1.ResourceBindingSpec{Replicas: 2,
			Resource:  workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
			PolicyRef: workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "web"},
			Clusters:  []workv1alpha1.TargetCluster{{Name: "east", Replicas: 1}, {Name: "west", Replicas: 1}}}}
	for _, o := range []client.Object{web, policy} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The detector creates the binding; the scheduler is played here by placing it on both
	// clusters once it exists (creating it by hand would race the detector).
	eventually(t, "the detector created the binding", func() bool {
		cur := &workv1alpha1.ResourceBinding{}
		if c.Get(ctx, client.ObjectKeyFromObject(b), cur) != nil {
			return false
		}
		cur.Spec.Clusters = b.Spec.Clusters
		return c.Update(ctx, cur) == nil
	})

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			cur := &workv1alpha1.ResourceBinding{}
			if c.Get(ctx, client.ObjectKeyFromObject(b), cur) != nil || cur.Spec.Revisions == nil {
				continue
			}
			stored := cur.DeepCopy()
			cur.Status.ObservedGeneration = cur.Generation
			report(cur)
			if board != nil {
				board.Put(stored, &cur.Status) // worked out over the binding as stored
				continue
			}
			_ = c.Status().Update(ctx, cur)
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return c, b
}

// changeImage changes shop/web's image, which makes the next revision and its Release.
func changeImage(t *testing.T, c client.Client, image string) {
	t.Helper()
	cur := &appsv1.Deployment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "web"}, cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Template.Spec.Containers[0].Image = image
	if err := c.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
}

// healthyAsPinned reports every placed cluster running its pinned revision, healthy.
func healthyAsPinned(cur *workv1alpha1.ResourceBinding) {
	cur.Status.Clusters = nil
	for _, tc := range cur.Spec.Clusters {
		cur.Status.Clusters = append(cur.Status.Clusters, workv1alpha1.ClusterStatus{Cluster: tc.Name, Applied: true,
			Revision: cur.Spec.Revisions.RevisionFor(tc.Name), Health: workv1alpha1.HealthHealthy})
	}
}

// The detector, the recorder and the release controller against a real API server, with the members
// played by a loop that reports every cluster running, healthy, the revision it is pinned
// to (what the binding controller reports once the executor applied it): a template change
// becomes revision 2 and its Release, which pins east first and west only after east ran it
// healthy, then makes 2 the stable revision, Ready under kstatus.
func TestReleaseMovesWaveByWaveOnARealAPIServer(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var seen [][2]int64 // (east, west) revisions as pinned, in order
	c, b := releaseFixture(t, &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
		{Name: "first", ClusterNames: []string{"east"}}, {Name: "second", ClusterNames: []string{"west"}}}},
		func(cur *workv1alpha1.ResourceBinding) {
			revs := cur.Spec.Revisions
			mu.Lock()
			if p := [2]int64{revs.RevisionFor("east"), revs.RevisionFor("west")}; len(seen) == 0 || seen[len(seen)-1] != p {
				seen = append(seen, p)
			}
			mu.Unlock()
			healthyAsPinned(cur)
		})

	revisions := func() *workv1alpha1.Revisions {
		cur := &workv1alpha1.ResourceBinding{}
		if c.Get(ctx, client.ObjectKeyFromObject(b), cur) != nil {
			return nil
		}
		return cur.Spec.Revisions
	}
	stableRevision1(t, c, b)

	changeImage(t, c, "registry.example/web:2")
	rel := &rolloutv1alpha1.Release{}
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("release status %+v\nrevisions %+v\npins seen %v", rel.Status, revisions(), seen)
			mu.Unlock()
		}
	})
	eventually(t, "release r2 succeeded", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web-deployment-r2"}, rel) == nil && rel.Status.Phase == rolloutv1alpha1.ReleaseSucceeded
	})
	if r := revisions(); r.Stable != 2 || r.Latest != 2 || len(r.Pins) != 0 {
		t.Errorf("revisions after the release: %+v, want stable 2, no pins", r)
	}
	if !meta.IsStatusConditionTrue(rel.Status.Conditions, rolloutv1alpha1.ConditionReady) {
		t.Errorf("release conditions %+v: want Ready", rel.Status.Conditions)
	}
	mu.Lock()
	defer mu.Unlock()
	eastFirst := false
	for _, p := range seen {
		if p == [2]int64{1, 2} {
			t.Fatalf("west ran revision 2 before east: %v", seen)
		}
		eastFirst = eastFirst || p == [2]int64{2, 1}
	}
	if !eastFirst {
		t.Errorf("pins seen %v: east never ran revision 2 alone first", seen)
	}
}

// Progress is written to the binding only every few seconds; the release controller reads
// each step from the status board and is woken by it, so waves move on as their clusters turn
// healthy even when none of it is written yet.
func TestReleaseMovesOnStepsNotWrittenYet(t *testing.T) {
	ctx := context.Background()
	board := &statusboard.Board{}
	c, b := releaseFixtureOn(t, &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
		{Name: "first", ClusterNames: []string{"east"}}, {Name: "second", ClusterNames: []string{"west"}}}},
		healthyAsPinned, board)
	stableRevision1(t, c, b)
	changeImage(t, c, "registry.example/web:2")
	rel := &rolloutv1alpha1.Release{}
	eventually(t, "release r2 succeeded", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web-deployment-r2"}, rel) == nil && rel.Status.Phase == rolloutv1alpha1.ReleaseSucceeded
	})
	cur := &workv1alpha1.ResourceBinding{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(b), cur); err != nil {
		t.Fatal(err)
	}
	if n := len(cur.Status.Clusters); n != 0 {
		t.Fatalf("the binding's stored status has %d clusters: the test meant none written", n)
	}
}

// stableRevision1 waits for the template as created to be recorded as revision 1, stable: a
// change made before would be revision 1 itself, with no release.
func stableRevision1(t *testing.T, c client.Client, b *workv1alpha1.ResourceBinding) {
	t.Helper()
	eventually(t, "revision 1 recorded as stable", func() bool {
		cur := &workv1alpha1.ResourceBinding{}
		if c.Get(context.Background(), client.ObjectKeyFromObject(b), cur) != nil {
			return false
		}
		r := cur.Spec.Revisions
		return r != nil && r.Latest == 1 && r.Stable == 1
	})
}

// eastThenLostWest is the fixture of a release in two waves, east then west, with the given
// progress deadline; once lost is set, the binding reports west Lost (it runs revision 1 and
// stopped answering).
func eastThenLostWest(t *testing.T, progressDeadline string) (client.Client, *workv1alpha1.ResourceBinding, *atomic.Bool) {
	t.Helper()
	deadline := intstr.FromString(progressDeadline)
	lost := &atomic.Bool{}
	c, b := releaseFixture(t, &policyv1alpha1.RolloutStrategy{ProgressDeadline: &deadline, Waves: []policyv1alpha1.Wave{
		{Name: "first", ClusterNames: []string{"east"}}, {Name: "second", ClusterNames: []string{"west"}}}},
		func(cur *workv1alpha1.ResourceBinding) {
			healthyAsPinned(cur)
			if lost.Load() {
				cur.Status.Clusters[1] = workv1alpha1.ClusterStatus{Cluster: "west", Lost: true, Health: workv1alpha1.HealthUnknown, Revision: 1}
			}
		})
	return c, b, lost
}

// taintUnreachable marks a cluster as failover does once it stayed not Ready past the grace
// period.
func taintUnreachable(t *testing.T, c client.Client, name string) {
	t.Helper()
	cl := &clusterv1alpha1.Cluster{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, cl); err != nil {
		t.Fatal(err)
	}
	cl.Spec.Taints = []clusterv1alpha1.Taint{{Key: names.UnreachableTaintKey, Effect: clusterv1alpha1.TaintEffectNoExecute}}
	if err := c.Update(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A canary that never turns healthy holds its step only until the progress deadline: then the
// wave fails, naming the step and the cluster, and the release rolls back. Before, a canary
// stuck Progressing held the release for ever.
func TestACanaryThatNeverTurnsHealthyFailsAtTheProgressDeadline(t *testing.T) {
	ctx := context.Background()
	deadline := intstr.FromString("3s")
	c, b := releaseFixture(t, &policyv1alpha1.RolloutStrategy{ProgressDeadline: &deadline, Waves: []policyv1alpha1.Wave{
		{Name: "canary", ClusterNames: []string{"east"}, Steps: []policyv1alpha1.CanaryStep{{SetWeight: ptr.To[int32](50)}}},
		{Name: "rest", ClusterNames: []string{"west"}}}},
		func(cur *workv1alpha1.ResourceBinding) {
			healthyAsPinned(cur)
			for i, cs := range cur.Status.Clusters {
				if _, ok := cur.Spec.Revisions.CanaryFor(cs.Cluster); ok {
					cur.Status.Clusters[i].CanaryHealth = workv1alpha1.HealthProgressing // never ready
				}
			}
		})
	stableRevision1(t, c, b)
	changeImage(t, c, "registry.example/web:2")
	rel := &rolloutv1alpha1.Release{}
	eventually(t, "release r2 rolled back", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web-deployment-r2"}, rel) == nil && rel.Status.Phase == rolloutv1alpha1.ReleaseRolledBack
	})
	const want = "wave canary step 1: canary not healthy within the progress deadline 3s in east"
	if !strings.Contains(rel.Status.Message, want) {
		t.Errorf("release message %q: want it to say %q", rel.Status.Message, want)
	}
	if started := rel.Status.Waves[0].StartedAt; started == nil || time.Since(started.Time) < 3*time.Second {
		t.Errorf("wave started at %v: rolled back before the deadline", started)
	}
}

// A Duplicated placement stays on a cluster failover declared lost, and the binding reports it
// Lost. The release does not wait for it (nor roll back at its progress deadline): it finishes
// on east, lists west as Left, lost, and west renders the released revision when it returns.
func TestReleaseFinishesWithoutALostCluster(t *testing.T) {
	ctx := context.Background()
	c, b, lost := eastThenLostWest(t, "3s")
	stableRevision1(t, c, b)
	taintUnreachable(t, c, "west")
	lost.Store(true)

	changeImage(t, c, "registry.example/web:2")
	rel := &rolloutv1alpha1.Release{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("release status %+v", rel.Status)
		}
	})
	eventually(t, "release r2 finished", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web-deployment-r2"}, rel) == nil && Final(rel.Status.Phase)
	})
	if rel.Status.Phase != rolloutv1alpha1.ReleaseSucceeded || !strings.Contains(rel.Status.Message, "west left it") {
		t.Fatalf("release %s: %s; want Succeeded naming west", rel.Status.Phase, rel.Status.Message)
	}
	second := rel.Status.Waves[1]
	if len(second.Clusters) != 1 || second.Clusters[0].Phase != rolloutv1alpha1.ClusterLeft || !strings.HasPrefix(second.Clusters[0].Message, "lost/unreachable") {
		t.Errorf("wave second %+v: want west Left, lost/unreachable", second)
	}
	if cond := meta.FindStatusCondition(rel.Status.Conditions, ConditionValid); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("Valid condition %+v: a wave whose cluster is lost is no mistake in the strategy", cond)
	}
	cur := &workv1alpha1.ResourceBinding{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(b), cur); err != nil {
		t.Fatal(err)
	}
	if r := cur.Spec.Revisions; r.Stable != 2 || r.RevisionFor("west") != 2 {
		t.Errorf("revisions %+v: west must render the released revision 2 when it returns", r)
	}
}

// The cluster-failover path the e2e test drives, on an API server: west stops while its wave
// runs (pinned, never healthy), then failover taints it and moves the Divided placement off it
// with an eviction task. The release succeeds on east with west Left, evicted; once west is
// placed again it renders the released revision.
func TestReleaseFinishesWithoutAClusterFailoverEvicted(t *testing.T) {
	ctx := context.Background()
	var down atomic.Bool
	down.Store(true)
	c, b := releaseFixture(t, &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
		{Name: "first", ClusterNames: []string{"east"}}, {Name: "second", ClusterNames: []string{"west"}}}},
		func(cur *workv1alpha1.ResourceBinding) {
			healthyAsPinned(cur)
			for i := range cur.Status.Clusters {
				if cur.Status.Clusters[i].Cluster == "west" && down.Load() {
					cur.Status.Clusters[i] = workv1alpha1.ClusterStatus{Cluster: "west", Lost: true, Health: workv1alpha1.HealthUnknown, Revision: 1}
				}
			}
		})
	stableRevision1(t, c, b)
	changeImage(t, c, "registry.example/web:2")
	binding := func() *workv1alpha1.ResourceBinding {
		cur := &workv1alpha1.ResourceBinding{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), cur); err != nil {
			t.Fatal(err)
		}
		return cur
	}
	eventually(t, "wave second pinned west", func() bool {
		r := binding().Spec.Revisions
		return r != nil && r.Latest == 2 && r.RevisionFor("west") == 2 && r.Stable == 1
	})

	// Failover: west tainted, its placement moved off with an eviction task.
	taintUnreachable(t, c, "west")
	eventually(t, "the placement moved off west", func() bool {
		cur := binding()
		cur.Spec.Clusters = []workv1alpha1.TargetCluster{{Name: "east", Replicas: 2}}
		cur.Spec.GracefulEvictionTasks = []workv1alpha1.GracefulEvictionTask{{Cluster: "west", Replicas: 1, Reason: workv1alpha1.EvictionReasonClusterFailover,
			Message: "cluster west is unreachable; its 1 replicas moved to the other clusters", PurgeMode: workv1alpha1.PurgeGraceful, GracePeriodSeconds: 600,
			CreationTimestamp: metav1.Now()}}
		return c.Update(ctx, cur) == nil
	})
	rel := &rolloutv1alpha1.Release{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("release status %+v", rel.Status)
		}
	})
	eventually(t, "release r2 finished", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web-deployment-r2"}, rel) == nil && Final(rel.Status.Phase)
	})
	if rel.Status.Phase != rolloutv1alpha1.ReleaseSucceeded {
		t.Fatalf("release %s: %s; want Succeeded", rel.Status.Phase, rel.Status.Message)
	}
	// Which reason is seen first (the taint, or the eviction a moment later) depends on timing;
	// the first one seen is kept, and both say the cluster is lost.
	const why = "lost/unreachable: "
	if cs := rel.Status.Waves[1].Clusters; len(cs) != 1 || cs[0].Phase != rolloutv1alpha1.ClusterLeft || !strings.HasPrefix(cs[0].Message, why) ||
		!strings.Contains(cs[0].Message, "unreachable") {
		t.Errorf("wave second clusters %+v: want west Left, %q", cs, why)
	}

	// West returns and is placed again: it renders the released, now stable, revision.
	west := &clusterv1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: "west"}, west); err != nil {
		t.Fatal(err)
	}
	west.Spec.Taints = nil
	if err := c.Update(ctx, west); err != nil {
		t.Fatal(err)
	}
	down.Store(false)
	eventually(t, "west placed again", func() bool {
		cur := binding()
		cur.Spec.Clusters = []workv1alpha1.TargetCluster{{Name: "east", Replicas: 1}, {Name: "west", Replicas: 1}}
		cur.Spec.GracefulEvictionTasks = nil
		return c.Update(ctx, cur) == nil
	})
	if r := binding().Spec.Revisions; r.Stable != 2 || r.RevisionFor("west") != 2 {
		t.Errorf("revisions %+v: returning west must render revision 2", r)
	}
}

// A cluster that stops while its wave waits for it is reported Lost by the binding when it
// goes not Ready; failover's taint comes later and changes nothing on the binding. The
// release must take the taint at once, not when its progress deadline (10 minutes here)
// wakes it.
func TestAClusterTaintedMidWaveLeavesTheReleaseAtOnce(t *testing.T) {
	ctx := context.Background()
	c, b, stopped := eastThenLostWest(t, "10m")
	stableRevision1(t, c, b)
	stopped.Store(true)
	changeImage(t, c, "registry.example/web:2")
	rel := &rolloutv1alpha1.Release{}
	eventually(t, "wave second waiting for west", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web-deployment-r2"}, rel) == nil && rel.Status.CurrentWave == 1
	})
	time.Sleep(time.Second) // the binding's status settles: nothing more changes on it
	taintUnreachable(t, c, "west")
	eventually(t, "release r2 finished without west, long before its progress deadline", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web-deployment-r2"}, rel) == nil && Final(rel.Status.Phase)
	})
	if rel.Status.Phase != rolloutv1alpha1.ReleaseSucceeded || !strings.Contains(rel.Status.Message, "west left it") {
		t.Fatalf("release %s: %s; want Succeeded naming west", rel.Status.Phase, rel.Status.Message)
	}
}
