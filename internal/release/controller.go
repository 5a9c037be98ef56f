package release

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/analysis"
	"github.com/flotilla-dev/flotilla/internal/dependency"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/replicas"
	"github.com/flotilla-dev/flotilla/internal/revision"
	"github.com/flotilla-dev/flotilla/internal/statusboard"
)

const defaultProgressDeadline = 10 * time.Minute

// ConditionValid on a Release says whether its strategy can run (analysis templates exist,
// waves select clusters).
const ConditionValid = "Valid"

// Controller drives Releases: it moves the binding's revision pins wave by wave and never
// writes anything else of the binding, nor any member object.
type Controller struct {
	Client client.Client
	// Reader reads the Release itself uncached: a decision from a stale cached Release (one
	// that has not seen its own rollback yet) would pin clusters back to a revision it left.
	Reader   client.Reader
	Recorder events.EventRecorder
	Now      func() time.Time
	// Board has each binding's newest status, written or not yet (a workload's progress is
	// written every few seconds): waves move on as their clusters turn healthy. Nil reads the
	// stored status.
	Board *statusboard.Board

	depsOnce sync.Once
	deps     *dependency.Reader
}

// SetupWithManager registers the controller.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	if c.Now == nil {
		c.Now = time.Now
	}
	phases := newPhaseCollector(mgr.GetClient())
	if err := metrics.Registry.Register(phases); err != nil {
		already := prometheus.AlreadyRegisteredError{}
		if !errors.As(err, &already) {
			return err
		}
		// Another manager of this process (tests start one each): the newest one's cache answers.
		metrics.Registry.Unregister(already.ExistingCollector)
		if err := metrics.Registry.Register(phases); err != nil {
			return err
		}
	}
	toRelease := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		b, ok := o.(workv1alpha1.Binding)
		if !ok {
			return nil
		}
		return releasesOf(b)
	})
	// A window opened, closed early or deleted frees or holds releases now, not at their
	// next requeue.
	inScope := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return releasesInScope(ctx, mgr.GetClient(), o)
	})
	// A cluster failover declares lost (or that comes back) leaves (or rejoins) its waves now:
	// nothing else about the binding changes when the taint comes, after its Ready went.
	lostOrBack := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, oldOK := e.ObjectOld.(*clusterv1alpha1.Cluster)
			cur, curOK := e.ObjectNew.(*clusterv1alpha1.Cluster)
			return oldOK && curOK && kube.Unreachable(old) != kube.Unreachable(cur)
		},
	}
	inProgress := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return releasesInProgress(ctx, mgr.GetClient())
	})
	bld := ctrl.NewControllerManagedBy(mgr).Named("release")
	if c.Board != nil {
		bld = bld.WatchesRawSource(c.Board.Source(releasesOf))
	}
	return bld.
		For(&rolloutv1alpha1.Release{}).
		Owns(&rolloutv1alpha1.AnalysisRun{}).
		Watches(&workv1alpha1.ResourceBinding{}, toRelease).
		Watches(&workv1alpha1.ClusterResourceBinding{}, toRelease).
		Watches(&rolloutv1alpha1.ChangeWindow{}, inScope).
		Watches(&rolloutv1alpha1.ClusterChangeWindow{}, inScope).
		Watches(&clusterv1alpha1.Cluster{}, inProgress, builder.WithPredicates(lostOrBack)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(kube.RequeueConflicts(c))
}

// releasesInProgress are every release not ended yet.
func releasesInProgress(ctx context.Context, c client.Reader) []reconcile.Request {
	list := &rolloutv1alpha1.ReleaseList{}
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if !Final(list.Items[i].Status.Phase) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// releasesOf are the releases a binding's change concerns: its latest revision's, and the one
// before, which a new revision supersedes.
func releasesOf(b workv1alpha1.Binding) []reconcile.Request {
	if b.BindingSpec().Revisions == nil {
		return nil
	}
	latest := b.BindingSpec().Revisions.Latest
	reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: revision.Namespace(b), Name: revision.ReleaseName(b, latest)}}}
	if latest > 1 { // a release just superseded must learn it and stop
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: revision.Namespace(b), Name: revision.ReleaseName(b, latest-1)}})
	}
	return reqs
}

// Final reports a phase a release does not leave (except Aborted and RolledBack, by retry).
func Final(p rolloutv1alpha1.ReleasePhase) bool {
	switch p {
	case rolloutv1alpha1.ReleaseSucceeded, rolloutv1alpha1.ReleaseAborted, rolloutv1alpha1.ReleaseRolledBack, rolloutv1alpha1.ReleaseSuperseded:
		return true
	}
	return false
}

// step is one reconcile's view of a release.
type step struct {
	rel     *rolloutv1alpha1.Release
	status  *rolloutv1alpha1.ReleaseStatus
	binding workv1alpha1.Binding
	revs    *workv1alpha1.Revisions
	now     time.Time
	requeue time.Duration
	// statusFresh: the binding's status was computed for its current spec.
	statusFresh bool
	// active are the clusters the waves count: placed and not lost (see withoutLost).
	active []string
	// held are the clusters change windows (see windowHolds) or the template's dependencies
	// (see dependencyHolds) hold now, with why.
	held map[string]fmt.Stringer
	// overridden are the clusters that pass windows now by the release's override, with them.
	overridden map[string][]string
}

func (s *step) after(d time.Duration) {
	if d > 0 && (s.requeue == 0 || d < s.requeue) {
		s.requeue = d
	}
}

func (s *step) pin(cluster string, rev int64) {
	for i := range s.revs.Pins {
		if s.revs.Pins[i].Cluster == cluster {
			s.revs.Pins[i].Revision = rev
			return
		}
	}
	s.revs.Pins = append(s.revs.Pins, workv1alpha1.RevisionPin{Cluster: cluster, Revision: rev})
}

func (s *step) pinnedTo(cluster string) int64 { return s.revs.RevisionFor(cluster) }

func (s *step) markUpdated(cluster string) {
	for _, u := range s.status.UpdatedClusters {
		if u == cluster {
			return
		}
	}
	s.status.UpdatedClusters = append(s.status.UpdatedClusters, cluster)
	sort.Strings(s.status.UpdatedClusters)
}

// Releases are made, stepped and ended here; their analysis runs are created and deleted.
// +kubebuilder:rbac:groups=rollout.flotilla.dev,resources=releases,verbs=get;list;watch;create;update;patch;delete;deletecollection
// +kubebuilder:rbac:groups=rollout.flotilla.dev,resources=releases/status;releases/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=rollout.flotilla.dev,resources=analysisruns,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rollout.flotilla.dev,resources=analysistemplates;clusteranalysistemplates,verbs=get;list;watch
// A template's revisions are ControllerRevisions beside it, as a StatefulSet's are.
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create;update;patch;delete;deletecollection

// Reconcile moves one release forward as far as its gates allow.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rel := &rolloutv1alpha1.Release{}
	if err := c.Reader.Get(ctx, req.NamespacedName, rel); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	retry := rel.Spec.Retry > rel.Status.ObservedRetry
	if Final(rel.Status.Phase) && !(retry && (rel.Status.Phase == rolloutv1alpha1.ReleaseAborted || rel.Status.Phase == rolloutv1alpha1.ReleaseRolledBack)) {
		if routed(rel) || blueGreen(rel) {
			return c.finishRouted(ctx, rel)
		}
		return ctrl.Result{}, nil
	}
	if msg := foreignTarget(rel, nil); msg != "" {
		return ctrl.Result{}, c.refuseForeign(ctx, rel, msg)
	}
	ns := ""
	if rel.Spec.Binding.Kind == "ResourceBinding" {
		ns = rel.Namespace
	}
	b := workv1alpha1.NewBinding(ns, rel.Spec.Binding.Name)
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: rel.Spec.Binding.Name}, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if msg := foreignTarget(rel, b); msg != "" {
		return ctrl.Result{}, c.refuseForeign(ctx, rel, msg)
	}
	if b.BindingSpec().Revisions == nil {
		if Final(rel.Status.Phase) {
			return ctrl.Result{}, nil
		}
		// The policy's rollout was removed: the template goes everywhere as it is.
		patch := client.MergeFromWithOptions(rel.DeepCopy(), client.MergeFromWithOptimisticLock{})
		rel.Status.Phase, rel.Status.Message = rolloutv1alpha1.ReleaseSuperseded, "the policy no longer has a rollout; every cluster takes the template as it is"
		rel.Status.CompletedAt = &metav1.Time{Time: c.Now()}
		rel.Status.Wave = WaveSummary(rel, &rel.Status)
		Summarize(&rel.Status, rel.Generation)
		return ctrl.Result{}, c.Client.Status().Patch(ctx, rel, patch)
	}
	if b.BindingSpec().Revisions.Latest < rel.Spec.Revision {
		// The cached binding has not seen the revision this release was made for yet.
		return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	s := &step{rel: rel, status: rel.Status.DeepCopy(), binding: b, revs: b.BindingSpec().Revisions.DeepCopy(), now: c.Now()}
	if s.status.StartedAt == nil {
		s.status.StartedAt = &metav1.Time{Time: s.now}
		s.status.Phase = rolloutv1alpha1.ReleaseProgressing
		// Clusters a superseded release left on its revision are this release's to move, and to
		// return to stable if this one is aborted.
		for _, p := range s.revs.Pins {
			if p.Revision != s.revs.Stable {
				s.markUpdated(p.Cluster)
			}
		}
	}
	if err := c.step(ctx, s, retry); err != nil {
		return ctrl.Result{}, err
	}
	if err := SetRevisions(ctx, c.Client, b, s.revs); err != nil {
		return ctrl.Result{}, err
	}
	if routed(rel) || blueGreen(rel) {
		if err := c.recordTraffic(ctx, s.status, b, s.revs); err != nil {
			return ctrl.Result{}, err
		}
	}
	s.status.ObservedGeneration = rel.Generation
	s.status.Wave = WaveSummary(rel, s.status)
	Summarize(s.status, rel.Generation)
	if !apiequality.Semantic.DeepEqual(s.status, &rel.Status) {
		before := rel.Status.Phase
		// Optimistic lock: a reconcile from a stale cached Release must not undo a newer status.
		patch := client.MergeFromWithOptions(rel.DeepCopy(), client.MergeFromWithOptimisticLock{})
		rel.Status = *s.status
		if err := c.Client.Status().Patch(ctx, rel, patch); err != nil {
			return ctrl.Result{}, err
		}
		if before != rel.Status.Phase {
			recordPhase(rel)
			c.event(rel, rel.Status.Phase, rel.Status.Message)
		}
	}
	return ctrl.Result{RequeueAfter: s.requeue}, nil
}

func (c *Controller) event(rel *rolloutv1alpha1.Release, phase rolloutv1alpha1.ReleasePhase, msg string) {
	if c.Recorder == nil || phase == "" {
		return
	}
	kind := corev1.EventTypeNormal
	if phase == rolloutv1alpha1.ReleaseRolledBack || phase == rolloutv1alpha1.ReleaseAborted {
		kind = corev1.EventTypeWarning
	}
	if msg == "" {
		// A phase set without a status message (Progressing as the release starts) still says
		// what happened: every event carries a message.
		msg = fmt.Sprintf("release of revision %d is %s, wave %s", rel.Spec.Revision, phase, orText(rel.Status.Wave, "not started"))
	}
	c.Recorder.Eventf(rel, nil, kind, "Release"+string(phase), "Release", "%s", msg)
}

func (c *Controller) step(ctx context.Context, s *step, retry bool) error {
	rel, status := s.rel, s.status
	if s.revs.Latest > rel.Spec.Revision {
		status.Phase = rolloutv1alpha1.ReleaseSuperseded
		status.Message = fmt.Sprintf("revision %d took over; clusters this release updated stay on revision %d until its waves reach them", s.revs.Latest, rel.Spec.Revision)
		status.CompletedAt = &metav1.Time{Time: s.now}
		return c.terminateAnalysis(ctx, s)
	}
	if retry {
		if err := c.restart(ctx, s); err != nil {
			return err
		}
	}
	placed, err := c.placedClusters(ctx, s.binding)
	if err != nil {
		return err
	}
	waves := withoutLost(ResolveWaves(&rel.Spec.Strategy, placed), placed)
	s.active = inRelease(waves)
	syncWaveStatus(status, waves)
	if rel.Spec.Abort {
		return c.rollback(ctx, s, rolloutv1alpha1.ReleaseAborted, "aborted by request")
	}
	if err := c.windowHolds(ctx, s, placed); err != nil {
		return err
	}
	if err := c.dependencyHolds(ctx, s, placed); err != nil {
		return err
	}
	if strings.HasPrefix(status.Message, heldMark+"wave ") {
		status.Message = "" // the hold is said again below if it still holds
	}
	if held := c.checkStrategy(ctx, s, waves); held {
		return nil
	}
	if stop, err := c.backgroundAnalysis(ctx, s, waves); stop || err != nil {
		return err
	}
	// A status from before the latest pins (or placement) were rendered says nothing about them:
	// the wave waits for a fresh one rather than judging, or resetting its clock, on it.
	bst, _ := c.Board.Of(s.binding)
	s.statusFresh = bst.ObservedGeneration == s.binding.GetGeneration()
	clusterStatus := map[string]workv1alpha1.ClusterStatus{}
	for _, cs := range bst.Clusters {
		clusterStatus[cs.Cluster] = cs
	}
	c.catchUpFinishedWaves(ctx, s, waves, clusterStatus)
	if rel.Spec.Paused {
		if status.Phase != rolloutv1alpha1.ReleasePaused {
			status.Phase, status.Message = rolloutv1alpha1.ReleasePaused, "paused; `flotilla release resume` goes on"
		}
		return nil
	}
	if status.Phase == rolloutv1alpha1.ReleasePaused {
		// Resumed: the time paused does not count against the progress deadline, of the wave
		// or of the step it is in.
		if i := int(status.CurrentWave); i < len(status.Waves) && status.Waves[i].StartedAt != nil {
			status.Waves[i].ProgressSince = &metav1.MicroTime{Time: s.now}
		}
	}
	status.Phase = rolloutv1alpha1.ReleaseProgressing
	if rel.Spec.PromoteFull {
		// Every remaining cluster at once; the waves below then pass as they turn healthy.
		for i := int(status.CurrentWave); i < len(waves); i++ {
			s.pinAll(waves[i].Clusters)
		}
	}
	for int(status.CurrentWave) < len(waves) {
		i := int(status.CurrentWave)
		done, err := c.advanceWave(ctx, s, i, waves[i], clusterStatus)
		if err != nil || !done {
			return err
		}
		waveDuration.WithLabelValues().Observe(status.Waves[i].CompletedAt.Sub(status.Waves[i].StartedAt.Time).Seconds())
		status.CurrentWave++
	}
	return c.succeed(ctx, s)
}

// restart takes an aborted or rolled-back release back to Progressing from the wave that
// failed, when a retry was asked for.
func (c *Controller) restart(ctx context.Context, s *step) error {
	rel, status := s.rel, s.status
	status.ObservedRetry = rel.Spec.Retry
	if status.Phase != rolloutv1alpha1.ReleaseAborted && status.Phase != rolloutv1alpha1.ReleaseRolledBack {
		return nil
	}
	if err := c.pruneAttempts(ctx, rel); err != nil {
		return err
	}
	status.Phase, status.CompletedAt = rolloutv1alpha1.ReleaseProgressing, nil
	status.Message = fmt.Sprintf("retrying from wave %d", status.CurrentWave)
	for i := int(status.CurrentWave); i < len(status.Waves); i++ {
		status.Waves[i] = rolloutv1alpha1.WaveStatus{Name: status.Waves[i].Name, Phase: rolloutv1alpha1.WavePending}
	}
	return nil
}

// checkStrategy records in the Valid condition whether the strategy can run; held: a problem
// only a fix ends holds the release.
func (c *Controller) checkStrategy(ctx context.Context, s *step, waves []Wave) (held bool) {
	rel, status := s.rel, s.status
	problems := c.validate(ctx, rel, waves, c.platformStrategy(ctx, rel, s.binding))
	if len(problems) == 0 {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: ConditionValid, Status: metav1.ConditionTrue, Reason: "Valid", Message: "the strategy can run", ObservedGeneration: rel.Generation})
		return false
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: ConditionValid, Status: metav1.ConditionFalse, Reason: "InvalidStrategy",
		Message: strings.Join(problems, "; "), ObservedGeneration: rel.Generation})
	if !blocking(problems) {
		return false
	}
	status.Message = "held: " + strings.Join(problems, "; ")
	s.after(15 * time.Second)
	return true
}

// backgroundAnalysis runs the strategy's background analysis across every cluster; stop: it
// failed (the release rolls back) or came out inconclusive and waits for a person.
func (c *Controller) backgroundAnalysis(ctx context.Context, s *step, waves []Wave) (stop bool, err error) {
	rel, status := s.rel, s.status
	bg := rel.Spec.Strategy.BackgroundAnalysis
	if bg == nil {
		return false, nil
	}
	phase, err := c.analysisPhase(ctx, s, bg, "background", allClusters(waves))
	if err != nil {
		return true, hold(s, err)
	}
	status.BackgroundAnalysisRun = analysisRunName(rel, s.status.ObservedRetry, "background")
	if phase == rolloutv1alpha1.AnalysisFailed || phase == rolloutv1alpha1.AnalysisError || phase == rolloutv1alpha1.AnalysisInconclusive {
		return true, c.failed(ctx, s, fmt.Sprintf("background analysis %s", phase))
	}
	if phase == analysisPaused && !rel.Spec.PromoteFull {
		status.Message = "background analysis " + status.BackgroundAnalysisRun + " Inconclusive; `flotilla release promote --full` takes the release through, `flotilla release abort` rolls back"
		return true, nil
	}
	return false, nil
}

// catchUpFinishedWaves gives clusters that joined a finished wave, or returned to it, the new
// revision at once (unless a change window holds them); those that left stay listed, as Left
// with the reason, and those that returned show Healthy once they run the revision so.
func (c *Controller) catchUpFinishedWaves(ctx context.Context, s *step, waves []Wave, reported map[string]workv1alpha1.ClusterStatus) {
	rel, status := s.rel, s.status
	for i := 0; i < int(status.CurrentWave) && i < len(waves); i++ {
		ws := &status.Waves[i]
		previous := slices.Clone(ws.Clusters)
		ws.Clusters = slices.DeleteFunc(ws.Clusters, func(cr rolloutv1alpha1.ClusterRelease) bool { return !slices.Contains(waves[i].Clusters, cr.Name) })
		markLeft(ctx, c.Client, s.binding, ws, previous, waves[i].Lost, s.active)
		for j := range ws.Clusters {
			cr := &ws.Clusters[j]
			if cr.Phase == rolloutv1alpha1.ClusterLeft && slices.Contains(waves[i].Clusters, cr.Name) {
				cr.Phase, cr.Message = rolloutv1alpha1.ClusterUpdating, fmt.Sprintf("returned to the release; takes revision %d", rel.Spec.Revision)
			}
			if h, held := s.held[cr.Name]; held && cr.Phase == rolloutv1alpha1.ClusterUpdating && s.pinnedTo(cr.Name) != rel.Spec.Revision {
				cr.Message = h.String()
			}
			if cs := reported[cr.Name]; cr.Phase == rolloutv1alpha1.ClusterUpdating && s.statusFresh &&
				cs.Applied && cs.Revision == rel.Spec.Revision && cs.Health == workv1alpha1.HealthHealthy {
				cr.Phase, cr.Message = rolloutv1alpha1.ClusterHealthy, ""
			}
		}
		s.pinAll(slices.DeleteFunc(slices.Clone(waves[i].Clusters), func(cl string) bool { _, held := s.held[cl]; return held }))
	}
}

// pinAll pins the release's revision to every cluster not on it yet.
func (s *step) pinAll(clusters []string) {
	for _, cl := range clusters {
		if s.pinnedTo(cl) != s.rel.Spec.Revision {
			s.pin(cl, s.rel.Spec.Revision)
			s.markUpdated(cl)
		}
	}
}

// succeed: every wave passed, the revision is the new stable one.
func (c *Controller) succeed(ctx context.Context, s *step) error {
	rel, status := s.rel, s.status
	s.revs.Stable, s.revs.Pins, s.revs.Canaries = rel.Spec.Revision, nil, nil
	status.Phase = rolloutv1alpha1.ReleaseSucceeded
	status.Message = fmt.Sprintf("revision %d runs in every cluster", rel.Spec.Revision)
	if left := leftClusters(status); len(left) > 0 {
		runs := "runs"
		if len(left) > 1 {
			runs = "run"
		}
		status.Message = fmt.Sprintf("revision %d runs in every cluster still in the release; %s left it (see the waves for why) and %s revision %d once back",
			rel.Spec.Revision, strings.Join(left, ", "), runs, rel.Spec.Revision)
	}
	status.CompletedAt = &metav1.Time{Time: s.now}
	return c.terminateAnalysis(ctx, s)
}

// advanceWave updates the wave's clusters (maxUnavailable at a time), waits for them to run the
// revision healthy and for the gates, and says whether the wave is done.
func (c *Controller) advanceWave(ctx context.Context, s *step, i int, wave Wave, clusterStatus map[string]workv1alpha1.ClusterStatus) (bool, error) {
	rel, ws := s.rel, &s.status.Waves[i]
	if holds := s.heldIn(wave.Clusters); len(holds) > 0 && ws.StartedAt == nil && !rel.Spec.PromoteFull {
		// Steps and blue-green move the whole wave together: none starts while a window holds
		// one of its clusters. Otherwise the wave starts once one cluster is free to.
		stepped := blueGreen(rel) || (wave.Spec != nil && len(wave.Spec.Steps) > 0)
		if stepped || len(holds) == len(wave.Clusters) {
			ws.Phase = rolloutv1alpha1.WavePending
			s.holdWave(i, ws, "not started", holds)
			return false, nil
		}
	}
	if ws.StartedAt == nil {
		ws.StartedAt = &metav1.MicroTime{Time: s.now}
	}
	previous := slices.Clone(ws.Clusters)
	defer func() { markLeft(ctx, c.Client, s.binding, ws, previous, wave.Lost, s.active) }()
	if len(wave.Clusters) == 0 {
		ws.Phase, ws.Message, ws.CompletedAt = rolloutv1alpha1.WaveSucceeded, "selects no cluster", &metav1.MicroTime{Time: s.now}
		if len(wave.Lost) > 0 {
			ws.Message = "every cluster of the wave left it"
		}
		return true, nil
	}
	if blueGreen(rel) && ws.CurrentStep < 2 && !rel.Spec.PromoteFull {
		if done, err := c.blueGreenWave(ctx, s, ws, i, wave, clusterStatus); err != nil || !done {
			return false, err
		}
	}
	if wave.Spec != nil && len(wave.Spec.Steps) > 0 && int(ws.CurrentStep) < len(wave.Spec.Steps) && !rel.Spec.PromoteFull {
		if done, err := c.canarySteps(ctx, s, ws, wave, clusterStatus); err != nil || !done {
			return false, err
		}
	}
	batch := len(wave.Clusters)
	if wave.Spec != nil && wave.Spec.MaxUnavailable != nil && !rel.Spec.PromoteFull {
		batch = int(*wave.Spec.MaxUnavailable)
	}
	st := waveState{Name: wave.Name, Revision: rel.Spec.Revision, Clusters: wave.Clusters, Pinned: map[string]int64{},
		Reported: clusterStatus, Batch: batch, Fresh: s.statusFresh, Now: s.now, StartedAt: ws.StartedAt.Time,
		ProgressSince: microTime(ws.ProgressSince), HealthyAt: microTime(ws.HealthyAt), Deadline: progressDeadline(rel),
		Held: s.heldReasons()}
	for _, cl := range wave.Clusters {
		st.Pinned[cl] = s.pinnedTo(cl)
	}
	if i+1 < len(s.status.Waves) {
		st.Next = s.status.Waves[i+1].Name
	}
	promoted := rel.Spec.PromoteFull || (rel.Spec.PromotedWave != nil && int(*rel.Spec.PromotedWave) >= i)
	if wave.Spec != nil && !promoted && !blueGreen(rel) { // blue-green gates ran against the preview
		g := wave.Spec.Gates
		st.Gated, st.Analysis, st.Approval = true, g.Analysis != nil, g.ManualApproval
		st.Bake, _, _ = policyv1alpha1.ParseDuration("", g.BakeTime)
	}
	v := judgeWave(st)
	for _, cl := range v.Pin {
		s.pin(cl, rel.Spec.Revision)
		s.markUpdated(cl)
	}
	if v.ProgressSince != nil {
		ws.ProgressSince = &metav1.MicroTime{Time: *v.ProgressSince}
	}
	s.keepOverrides(ws.Clusters, v.Clusters)
	ws.Clusters = v.Clusters
	switch {
	case !v.Judged:
		return false, nil // the binding's next status brings this wave back
	case v.Fail != "" && !v.Healthy && v.Phase != "":
		ws.Phase, ws.HealthyAt, ws.Message = v.Phase, nil, v.Message
		return false, c.failed(ctx, s, v.Fail)
	case v.Fail != "":
		return false, c.failed(ctx, s, v.Fail)
	case !v.Healthy:
		ws.Phase, ws.HealthyAt, ws.Message = v.Phase, nil, v.Message
		if holds := s.heldIn(wave.Clusters); len(holds) > 0 {
			s.holdWave(i, ws, v.Message, holds)
		}
		s.after(v.After)
		return false, nil
	}
	if (routed(rel) || blueGreen(rel)) && trafficToStable(s.revs, wave.Clusters) {
		// Every request goes to the primaries, which run the revision now, before the
		// canaries (or the blue-green stack) go.
		if ws.TrafficWeight != nil {
			ws.TrafficWeight = new(int32)
		}
		if settled, msg, err := c.trafficSettled(ctx, s.binding, s.revs, wave.Clusters); err != nil || !settled {
			ws.Message = "primaries healthy; sending all traffic to them before the canaries go: " + msg
			s.after(trafficPoll)
			return false, err
		}
	}
	if s.dropCanaries(wave.Clusters) {
		// The primaries run the revision healthy at their full share: the canaries go now.
		ws.Message = "primaries healthy; removing the canaries"
	}
	ws.HealthyAt = &metav1.MicroTime{Time: *v.HealthyAt}
	if v.NeedAnalysis {
		if passed, err := c.waveAnalysis(ctx, s, ws, wave.Spec.Gates.Analysis, wave, wave.Name, "wave "+wave.Name, "healthy; "); !passed || err != nil {
			return false, err
		}
		st.AnalysisPassed = true
		v = judgeWave(st)
	}
	if v.Phase != "" {
		ws.Phase, ws.Message = v.Phase, v.Message
	}
	s.after(v.After)
	if !v.Done {
		return false, nil
	}
	ws.CompletedAt = &metav1.MicroTime{Time: s.now}
	return true, nil
}

// microTime is t as a time, nil for nil.
func microTime(t *metav1.MicroTime) *time.Time {
	if t == nil {
		return nil
	}
	return &t.Time
}

// failed rolls back when the strategy says so; otherwise the release holds, Failed wave shown.
func (c *Controller) failed(ctx context.Context, s *step, reason string) error {
	auto := s.rel.Spec.Strategy.AutoRollback == nil || *s.rel.Spec.Strategy.AutoRollback
	if auto {
		return c.rollback(ctx, s, rolloutv1alpha1.ReleaseRolledBack, reason)
	}
	if i := int(s.status.CurrentWave); i < len(s.status.Waves) {
		s.status.Waves[i].Phase = rolloutv1alpha1.WaveFailed
	}
	s.status.Message = reason + "; automatic rollback is off: `flotilla release abort` or fix and `retry`"
	return nil
}

// backOnReturn says what a cluster that left a rolled-back release runs once it returns.
func backOnReturn(stable int64) string {
	if stable == 0 {
		return "the release rolled back: handed back to unmanaged once it returns"
	}
	return fmt.Sprintf("the release rolled back: runs revision %d once it returns", stable)
}

// rollback returns exactly the clusters this release updated to the stable revision.
func (c *Controller) rollback(ctx context.Context, s *step, phase rolloutv1alpha1.ReleasePhase, reason string) error {
	// Every pin off the stable revision is this release's doing (or a superseded one's it took
	// over), even one whose status write was lost to a conflict.
	for _, p := range s.revs.Pins {
		if p.Revision != s.revs.Stable {
			s.markUpdated(p.Cluster)
		}
	}
	updated := map[string]bool{}
	for _, cl := range s.status.UpdatedClusters {
		updated[cl] = true
	}
	kept := s.revs.Pins[:0]
	for _, p := range s.revs.Pins {
		if !updated[p.Cluster] {
			kept = append(kept, p)
		}
	}
	s.revs.Pins = kept
	if routed(s.rel) || blueGreen(s.rel) {
		// Routes and Services return every request to the stable pods first; the canaries go
		// once they did (finishTraffic, after this release ended).
		trafficToStable(s.revs, nil)
		for i := range s.status.Waves {
			if s.status.Waves[i].TrafficWeight != nil {
				s.status.Waves[i].TrafficWeight = new(int32)
			}
		}
	} else {
		s.revs.Canaries = nil // every canary is of a revision being released
	}
	for i := range s.status.Waves {
		w := &s.status.Waves[i]
		touched := false
		for j := range w.Clusters {
			cr := &w.Clusters[j]
			switch {
			case updated[cr.Name] && cr.Phase == rolloutv1alpha1.ClusterLeft:
				// Gone, it stays Left with why; what it gets back is the stable revision.
				if back := backOnReturn(s.revs.Stable); !strings.HasSuffix(cr.Message, back) {
					cr.Message = orText(cr.Message, "left the release") + "; " + back
				}
				touched = true
			case updated[cr.Name]:
				cr.Phase, touched = rolloutv1alpha1.ClusterRolledBack, true
			}
		}
		if touched {
			w.Phase, w.Message = rolloutv1alpha1.WaveRolledBack, rolledBackTo(s.revs.Stable)
		}
	}
	s.status.Phase = phase
	s.status.Message = fmt.Sprintf("%s; %s %s", reason, strings.Join(s.status.UpdatedClusters, ", "), rolledBackTo(s.revs.Stable))
	if len(s.status.UpdatedClusters) == 0 {
		s.status.Message = reason + "; no cluster had been updated"
	}
	s.status.CompletedAt = &metav1.Time{Time: s.now}
	rollbacks.WithLabelValues(string(phase)).Inc()
	return c.terminateAnalysis(ctx, s)
}

func (c *Controller) placedClusters(ctx context.Context, b workv1alpha1.Binding) ([]clusterv1alpha1.Cluster, error) {
	var out []clusterv1alpha1.Cluster
	for _, t := range b.BindingSpec().Clusters {
		cl := &clusterv1alpha1.Cluster{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: t.Name}, cl); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		out = append(out, *cl)
	}
	return out, nil
}

// syncWaveStatus keeps one status entry per resolved wave, in order, keeping what is known.
func syncWaveStatus(status *rolloutv1alpha1.ReleaseStatus, waves []Wave) {
	old := map[string]rolloutv1alpha1.WaveStatus{}
	for _, w := range status.Waves {
		old[w.Name] = w
	}
	status.Waves = status.Waves[:0]
	for _, w := range waves {
		ws, ok := old[w.Name]
		if !ok {
			ws = rolloutv1alpha1.WaveStatus{Name: w.Name, Phase: rolloutv1alpha1.WavePending}
			for _, cl := range w.Clusters {
				ws.Clusters = append(ws.Clusters, rolloutv1alpha1.ClusterRelease{Name: cl, Phase: rolloutv1alpha1.ClusterPending})
			}
		}
		status.Waves = append(status.Waves, ws)
	}
}

func allClusters(waves []Wave) []string {
	var out []string
	for _, w := range waves {
		out = append(out, w.Clusters...)
	}
	sort.Strings(out)
	return out
}

// platformStrategy is PlatformStrategy, lowered when the binding's policy now says a team wrote
// its rollout: a release recorded before the trust label (or before the targeting controller
// marked its generated policy) must not keep the platform's trust for a team's strategy.
func (c *Controller) platformStrategy(ctx context.Context, rel *rolloutv1alpha1.Release, b workv1alpha1.Binding) bool {
	if !PlatformStrategy(rel) {
		return false
	}
	p, err := policyOf(ctx, c.Client, b.BindingSpec().PolicyRef)
	return err != nil || p.trust == revision.StrategyTrustPlatform // a policy gone keeps what was recorded
}

// validate lists what keeps the release from running: unknown analysis templates block, a
// wave selecting no cluster is reported and passed over. platform: the platform wrote the
// strategy (PlatformStrategy), so its gates must not depend on what a namespace's users write.
func (c *Controller) validate(ctx context.Context, rel *rolloutv1alpha1.Release, waves []Wave, platform bool) []string {
	var problems []string
	// Named as the user wrote it: the strategy is the policy's rollout, copied.
	if err := rel.Spec.Strategy.Validate("the policy's spec.rollout"); err != nil {
		problems = append(problems, "blocking: "+err.Error()+"; fix the policy and change the template again (or `flotilla release abort`)")
	}
	check := func(field string, gate *policyv1alpha1.AnalysisGate) {
		if gate == nil {
			return
		}
		for j, t := range gate.Templates {
			if platform && !t.ClusterScope {
				problems = append(problems, fmt.Sprintf("blocking: %s.templates[%d]: a ClusterPropagationPolicy's analysis runs ClusterAnalysisTemplates only (set clusterScope: true); AnalysisTemplate %s of namespace %s is written by that namespace's users, who could make the platform's gate pass",
					field, j, t.TemplateName, rel.Namespace))
				continue
			}
			spec, err := c.template(ctx, rel.Namespace, t)
			if err != nil {
				problems = append(problems, fmt.Sprintf("blocking: %s.templates[%d].templateName: %v", field, j, err))
				continue
			}
			if err := analysis.TemplateProblems(*spec); err != nil {
				problems = append(problems, fmt.Sprintf("blocking: %s.templates[%d]: %s %s: spec.%s", field, j, templateKind(t), t.TemplateName,
					strings.ReplaceAll(err.Error(), "\n", "; spec.")))
			}
		}
	}
	for i := range rel.Spec.Strategy.Waves {
		check(fmt.Sprintf("spec.strategy.waves[%d].gates.analysis", i), rel.Spec.Strategy.Waves[i].Gates.Analysis)
		if platform {
			for k, st := range rel.Spec.Strategy.Waves[i].Steps {
				check(fmt.Sprintf("spec.strategy.waves[%d].steps[%d].analysis", i, k), st.Analysis)
			}
		}
	}
	check("spec.strategy.backgroundAnalysis", rel.Spec.Strategy.BackgroundAnalysis)
	for i, w := range waves {
		if len(w.Clusters) == 0 && len(w.Lost) == 0 { // a wave whose clusters are all lost is not a mistake
			problems = append(problems, fmt.Sprintf("spec.strategy.waves[%d] (%s) selects no cluster the template is placed on", i, w.Name))
		}
	}
	return problems
}

func blocking(problems []string) bool {
	for _, p := range problems {
		if strings.HasPrefix(p, "blocking: ") {
			return true
		}
	}
	return false
}

func (c *Controller) template(ctx context.Context, namespace string, ref policyv1alpha1.AnalysisTemplateRef) (*rolloutv1alpha1.AnalysisTemplateSpec, error) {
	if ref.ClusterScope {
		t := &rolloutv1alpha1.ClusterAnalysisTemplate{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: ref.TemplateName}, t); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("ClusterAnalysisTemplate %q not found; create it or fix the name", ref.TemplateName)
			}
			return nil, err
		}
		return &t.Spec, nil
	}
	t := &rolloutv1alpha1.AnalysisTemplate{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.TemplateName}, t); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("AnalysisTemplate %q not found in namespace %s; create it or set clusterScope for a ClusterAnalysisTemplate", ref.TemplateName, namespace)
		}
		return nil, err
	}
	return &t.Spec, nil
}

// waveAnalysis runs a wave's analysis (a gate or a canary step) and says whether it passed; a
// failure fails the wave, a mistake in the templates holds the release.
func (c *Controller) waveAnalysis(ctx context.Context, s *step, ws *rolloutv1alpha1.WaveStatus, gate *policyv1alpha1.AnalysisGate, wave Wave, suffix, where, prefix string) (bool, error) {
	phase, err := c.analysisPhase(ctx, s, gate, suffix, wave.Clusters)
	if err != nil {
		ws.Phase, ws.Message = rolloutv1alpha1.WaveAnalyzing, "held: "+err.Error()
		return false, hold(s, err)
	}
	ws.AnalysisRun = analysisRunName(s.rel, s.status.ObservedRetry, suffix)
	switch phase {
	case rolloutv1alpha1.AnalysisSuccessful:
		return true, nil
	case rolloutv1alpha1.AnalysisFailed, rolloutv1alpha1.AnalysisError, rolloutv1alpha1.AnalysisInconclusive:
		return false, c.failed(ctx, s, fmt.Sprintf("%s: analysis %s %s", where, ws.AnalysisRun, phase))
	case analysisPaused:
		// A gate passes by promote (promotedWave skips the wave's gates); a canary step by
		// promote standing at it.
		if suffix != wave.Name && s.rel.Spec.PromotedStep == fmt.Sprintf("%s/%d", wave.Name, ws.CurrentStep) {
			return true, nil
		}
		ws.Phase = rolloutv1alpha1.WaveWaitingForApproval
		ws.Message = prefix + "analysis " + ws.AnalysisRun + " Inconclusive; `flotilla release promote` passes it, `flotilla release abort` rolls back"
		s.status.Message = where + ": " + ws.Message
		return false, nil
	}
	ws.Phase, ws.Message = rolloutv1alpha1.WaveAnalyzing, prefix+"analysis "+ws.AnalysisRun+" running"
	return false, nil
}

// analysisPaused is what analysisPhase reports for an Inconclusive run whose templates say
// Pause: the release waits for a person. It is never written anywhere.
const analysisPaused rolloutv1alpha1.AnalysisPhase = "InconclusivePaused"

func templateKind(ref policyv1alpha1.AnalysisTemplateRef) string {
	if ref.ClusterScope {
		return "ClusterAnalysisTemplate"
	}
	return "AnalysisTemplate"
}

// keptAttempts is how many attempts of a release keep their AnalysisRuns: the one starting and
// the ones before it, to tell why they failed. A tenant looping abort and retry would
// otherwise pile up runs (and their measurements) without end.
const keptAttempts = 3

// pruneAttempts deletes the AnalysisRuns of a release's older attempts as a retry starts (they
// ended with the attempt: a retry follows an abort or a rollback only).
func (c *Controller) pruneAttempts(ctx context.Context, rel *rolloutv1alpha1.Release) error {
	var runs rolloutv1alpha1.AnalysisRunList
	if err := c.Client.List(ctx, &runs, client.InNamespace(rel.Namespace)); err != nil {
		return err
	}
	byAttempt := map[int32][]*rolloutv1alpha1.AnalysisRun{}
	for i := range runs.Items {
		run := &runs.Items[i]
		if owner := metav1.GetControllerOf(run); owner == nil || owner.UID != rel.UID {
			continue
		}
		a := attemptOf(run.Name)
		byAttempt[a] = append(byAttempt[a], run)
	}
	attempts := slices.Sorted(maps.Keys(byAttempt))
	for _, a := range attempts[:max(0, len(attempts)-(keptAttempts-1))] {
		for _, run := range byAttempt[a] {
			if err := c.Client.Delete(ctx, run); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting AnalysisRun %s of an earlier attempt: %w", run.Name, err)
			}
		}
	}
	return nil
}

// attemptOf reads the retry a run was made for from its name (analysisRunName); 0 for the first.
func attemptOf(name string) int32 {
	i := strings.LastIndex(name, "-retry")
	if i < 0 {
		return 0
	}
	n, err := strconv.ParseInt(name[i+len("-retry"):], 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

// analysisRunName names a gate's run; a retry gets fresh runs.
func analysisRunName(rel *rolloutv1alpha1.Release, retry int32, suffix string) string {
	n := rel.Name + "-" + suffix
	if retry > 0 {
		n += fmt.Sprintf("-retry%d", retry)
	}
	if len(n) > 253 {
		n = n[:253]
	}
	return n
}

// analysisPhase creates the gate's AnalysisRun when missing and returns its phase.
func (c *Controller) analysisPhase(ctx context.Context, s *step, gate *policyv1alpha1.AnalysisGate, suffix string, clusters []string) (rolloutv1alpha1.AnalysisPhase, error) {
	rel := s.rel
	name := analysisRunName(rel, s.status.ObservedRetry, suffix)
	run := &rolloutv1alpha1.AnalysisRun{}
	err := c.Client.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: name}, run)
	if err == nil {
		if run.Status.Phase == rolloutv1alpha1.AnalysisInconclusive && run.Spec.Inconclusive != rolloutv1alpha1.InconclusiveFail {
			return analysisPaused, nil
		}
		return run.Status.Phase, nil
	}
	if !apierrors.IsNotFound(err) {
		return "", err
	}
	var specs []rolloutv1alpha1.AnalysisTemplateSpec
	for _, t := range gate.Templates {
		spec, err := c.template(ctx, rel.Namespace, t)
		if err != nil {
			return "", err
		}
		specs = append(specs, *spec)
	}
	value := func(v string) *string { return &v }
	args := []rolloutv1alpha1.Argument{
		{Name: "namespace", Value: value(rel.Spec.Resource.Namespace)}, {Name: "name", Value: value(rel.Spec.Resource.Name)},
		{Name: "revision", Value: value(fmt.Sprint(rel.Spec.Revision))}, {Name: "stable-revision", Value: value(fmt.Sprint(s.revs.Stable))},
		{Name: "wave", Value: value(suffix)}, {Name: "clusters", Value: value(strings.Join(clusters, ","))},
		{Name: "cluster-regex", Value: value(strings.Join(clusters, "|"))}, // for PromQL: cluster=~"{{args.cluster-regex}}"
	}
	args = append(args, canaryBaselineArgs(placedNames(s.binding), s.status.UpdatedClusters)...)
	if rel.Spec.Resource.Kind == "Deployment" {
		labels, err := c.podSelector(ctx, rel)
		if err != nil {
			return "", err
		}
		args = append(args, workloadArgs(rel.Spec.Resource.Name, labels, &rel.Spec.Strategy)...)
	}
	args, specs, err = c.resolveArgs(ctx, s, gate, args, specs)
	if err != nil {
		return "", err
	}
	// The run records where each metric came from: a namespace's templates get the tenant's
	// egress and Pod Security rules, ClusterAnalysisTemplates the platform's, but only when the
	// platform wrote the gate (PlatformStrategy): a tenant's gate sets the args, and a tenant's
	// args must not steer a platform template's URL or Job past the tenant's rules.
	platformGate := c.platformStrategy(ctx, rel, s.binding)
	from := make([]analysis.Template, len(specs))
	for i := range specs {
		from[i] = analysis.Template{Name: gate.Templates[i].TemplateName, ClusterScope: gate.Templates[i].ClusterScope && platformGate, Spec: specs[i]}
	}
	run, err = analysis.NewRunFrom(rel.Namespace, name, from, args, clusters)
	if err != nil {
		return "", &configError{fmt.Errorf("analysis for %s: %w", suffix, err)}
	}
	if err := ctrl.SetControllerReference(rel, run, c.Client.Scheme()); err != nil {
		return "", err
	}
	if err := c.Client.Create(ctx, run); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	return rolloutv1alpha1.AnalysisRunning, nil
}

// podSelector is the released Deployment's spec.selector.matchLabels, as the template says now.
// It is read as unstructured, as every controller reads templates: a typed read would start a
// second cache holding every Deployment template again.
func (c *Controller) podSelector(ctx context.Context, rel *rolloutv1alpha1.Release) (map[string]string, error) {
	d := &unstructured.Unstructured{}
	d.SetAPIVersion(rel.Spec.Resource.APIVersion)
	d.SetKind(rel.Spec.Resource.Kind)
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: rel.Spec.Resource.Namespace, Name: rel.Spec.Resource.Name}, d); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	labels, _, err := unstructured.NestedStringMap(d.Object, "spec", "selector", "matchLabels")
	if err != nil {
		return nil, fmt.Errorf("Deployment %s/%s: spec.selector.matchLabels: %w", d.GetNamespace(), d.GetName(), err)
	}
	return labels, nil
}

// terminateAnalysis stops the release's runs still measuring.
func (c *Controller) terminateAnalysis(ctx context.Context, s *step) error {
	runs := &rolloutv1alpha1.AnalysisRunList{}
	if err := c.Client.List(ctx, runs, client.InNamespace(s.rel.Namespace)); err != nil {
		return err
	}
	for i := range runs.Items {
		run := &runs.Items[i]
		if !metav1.IsControlledBy(run, s.rel) || run.Spec.Terminate || run.Status.Phase.Completed() {
			continue
		}
		patch := client.MergeFrom(run.DeepCopy())
		run.Spec.Terminate = true
		if err := c.Client.Patch(ctx, run, patch); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// configError is a mistake in what the user wrote: the release holds and says so, nothing is
// rolled back for it.
type configError struct{ err error }

func (c *configError) Error() string { return c.err.Error() }

// hold shows a configuration problem on the release and retries later.
func hold(s *step, err error) error {
	var ce *configError
	if !errors.As(err, &ce) {
		return err
	}
	meta.SetStatusCondition(&s.status.Conditions, metav1.Condition{Type: ConditionValid, Status: metav1.ConditionFalse, Reason: "InvalidAnalysis",
		Message: ce.Error(), ObservedGeneration: s.rel.Generation})
	s.status.Message = "held: " + ce.Error()
	s.after(15 * time.Second)
	return nil
}

// canarySteps runs the wave's canary steps from the current one and says whether all are done.
func (c *Controller) canarySteps(ctx context.Context, s *step, ws *rolloutv1alpha1.WaveStatus, wave Wave, clusterStatus map[string]workv1alpha1.ClusterStatus) (bool, error) {
	rel, steps := s.rel, wave.Spec.Steps
	for int(ws.CurrentStep) < len(steps) {
		k := int(ws.CurrentStep)
		if ws.StepStartedAt == nil {
			ws.StepStartedAt = &metav1.MicroTime{Time: s.now}
		}
		st := steps[k]
		switch {
		case routed(rel) && (st.SetWeight != nil || st.SetCanaryScale != nil || st.SetHeaderRoute != nil):
			if done, err := c.trafficStep(ctx, s, ws, wave, k, clusterStatus); err != nil || !done {
				return false, err
			}
		case st.SetWeight != nil:
			counts, err := s.setCanaries(wave.Clusters, *st.SetWeight)
			if err != nil {
				return false, err
			}
			waiting, degraded := canaryWait(wave.Clusters, counts, clusterStatus, s.statusFresh)
			if len(degraded) > 0 {
				return false, c.failed(ctx, s, fmt.Sprintf("wave %s: canary Degraded in %s", wave.Name, strings.Join(degraded, ", ")))
			}
			if len(waiting) > 0 {
				if s.overdue(ws) {
					return false, c.failed(ctx, s, canaryOverdue(wave, k, waiting, progressDeadline(rel)))
				}
				ws.Phase = rolloutv1alpha1.WaveUpdating
				ws.Message = fmt.Sprintf("%s: canaries %s starting in %s", revision.StepLabel(steps, k), formatCounts(counts), strings.Join(waiting, ", "))
				return false, nil
			}
		case st.Pause != nil && st.Pause.Duration != nil:
			pause, _, _ := policyv1alpha1.ParseDuration("", st.Pause.Duration) // validated in step
			if left := pause - s.now.Sub(ws.StepStartedAt.Time); left > 0 {
				ws.Phase, ws.Message = rolloutv1alpha1.WaveBaking, fmt.Sprintf("%s: %s left", revision.StepLabel(steps, k), left.Round(time.Second))
				s.after(left)
				return false, nil
			}
		case st.Analysis != nil:
			name := fmt.Sprintf("%s-step%d", wave.Name, k)
			if passed, err := c.waveAnalysis(ctx, s, ws, st.Analysis, wave, name, fmt.Sprintf("wave %s step %d", wave.Name, k+1), revision.StepLabel(steps, k)+": "); !passed || err != nil {
				return false, err
			}
		case st.Pause != nil:
			if rel.Spec.PromotedStep != fmt.Sprintf("%s/%d", wave.Name, k) {
				ws.Phase, ws.Message = rolloutv1alpha1.WaveWaitingForApproval, revision.StepLabel(steps, k)+": waiting for `flotilla release promote`"
				return false, nil
			}
		}
		if k+1 < len(steps) && changesCanary(steps[k+1]) {
			// The next step changes what runs: it waits for the windows (the one done is
			// looked at again meanwhile, and passes again).
			if holds := s.heldIn(wave.Clusters); len(holds) > 0 {
				s.holdWave(int(s.status.CurrentWave), ws, revision.StepLabel(steps, k+1)+" not started", holds)
				return false, nil
			}
		}
		ws.CurrentStep++
		ws.StepStartedAt = &metav1.MicroTime{Time: s.now}
	}
	return true, nil
}

// changesCanary says whether a step changes what runs or where requests go.
func changesCanary(st policyv1alpha1.CanaryStep) bool {
	return st.SetWeight != nil || st.SetCanaryScale != nil || st.SetHeaderRoute != nil
}

// setCanaries runs round(weight% of the wave's replicas) canary replicas of the release's
// revision, divided over the wave's clusters with the same weights as their replicas.
func (s *step) setCanaries(clusters []string, weight int32) (map[string]int32, error) {
	share := map[string]int32{}
	for _, t := range s.binding.BindingSpec().Clusters {
		share[t.Name] = t.Replicas
	}
	var total int32
	targets := make([]replicas.Target, 0, len(clusters))
	current := replicas.Assignment{}
	for _, cl := range clusters {
		total += share[cl]
		targets = append(targets, replicas.Target{Name: cl, Weight: int64(share[cl]), Available: -1})
		if pin, ok := s.revs.CanaryFor(cl); ok {
			current[cl] = pin.Replicas
		}
	}
	canaries := int32(math.Round(float64(weight) * float64(total) / 100))
	counts := map[string]int32{}
	if canaries > 0 && total > 0 {
		a, err := replicas.DivideByWeight(canaries, targets, current)
		if err != nil {
			return nil, err
		}
		counts = a
	}
	kept := s.revs.Canaries[:0]
	for _, c := range s.revs.Canaries {
		if !slices.Contains(clusters, c.Cluster) {
			kept = append(kept, c)
		}
	}
	for _, cl := range clusters {
		if counts[cl] > 0 {
			kept = append(kept, workv1alpha1.CanaryPin{Cluster: cl, Revision: s.rel.Spec.Revision, Replicas: counts[cl]})
			s.markUpdated(cl)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].Cluster < kept[j].Cluster })
	s.revs.Canaries = kept
	return counts, nil
}

// dropCanaries removes the clusters' canaries and says whether there were any.
func (s *step) dropCanaries(clusters []string) bool {
	kept := s.revs.Canaries[:0]
	dropped := false
	for _, c := range s.revs.Canaries {
		if slices.Contains(clusters, c.Cluster) {
			dropped = true
			continue
		}
		kept = append(kept, c)
	}
	s.revs.Canaries = kept
	return dropped
}

func formatCounts(counts map[string]int32) string {
	var parts []string
	for cl, n := range counts {
		parts = append(parts, fmt.Sprintf("%s=%d", cl, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// placedNames are the clusters the binding places its template on now, lost ones included.
func placedNames(b workv1alpha1.Binding) []string {
	var out []string
	for _, t := range b.BindingSpec().Clusters {
		out = append(out, t.Name)
	}
	return out
}
