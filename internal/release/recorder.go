package release

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/revision"
)

const defaultHistory = 10

// Recorder records template revisions and starts releases. It reconciles bindings whose policy
// has a rollout: the first revision becomes stable at once; every later change of the workload
// gets revision latest+1 and a Release from the stable revision to it.
type Recorder struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Interpreters answers what a kind means; nil serves the built-in interpreters only.
	Interpreters *interpret.Registry
}

// SetupWithManager registers the recorder.
func (r *Recorder) SetupWithManager(mgr ctrl.Manager) error {
	// Adding or removing a policy's rollout changes no binding: the policies are watched too.
	byPolicy := handler.EnqueueRequestsFromMapFunc(r.bindingsOfPolicy)
	// The recorder acts on the binding's spec (the template's hash, the revisions); status
	// writes do not wake it.
	specChanged := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	return ctrl.NewControllerManagedBy(mgr).Named("release-recorder").
		For(&workv1alpha1.ResourceBinding{}, specChanged).
		Watches(&workv1alpha1.ClusterResourceBinding{}, &handler.EnqueueRequestForObject{}, specChanged).
		Watches(&policyv1alpha1.PropagationPolicy{}, byPolicy).
		Watches(&policyv1alpha1.ClusterPropagationPolicy{}, byPolicy).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(kube.RequeueConflicts(r))
}

func (r *Recorder) bindingsOfPolicy(ctx context.Context, o client.Object) []reconcile.Request {
	return kube.BindingsOfPolicy(ctx, r.Client, o)
}

// boundPolicy is the policy a binding names: its spec, and who wrote its rollout.
type boundPolicy struct {
	spec *policyv1alpha1.PropagationSpec
	// trust is revision.StrategyTrustPlatform only for a ClusterPropagationPolicy whose rollout the
	// platform wrote; a namespace's PropagationPolicy, or a generated ClusterPropagationPolicy
	// carrying a team's rollout (policyv1alpha1.RolloutWrittenByAnnotation), is the namespace's.
	trust string
}

func policyOf(ctx context.Context, c client.Reader, ref workv1alpha1.PolicyReference) (boundPolicy, error) {
	p, spec, err := kube.Policy(ctx, c, ref)
	if err != nil {
		return boundPolicy{}, err
	}
	trust := revision.StrategyTrustNamespace
	if _, tenant := p.GetAnnotations()[policyv1alpha1.RolloutWrittenByAnnotation]; !tenant && ref.Kind == "ClusterPropagationPolicy" {
		trust = revision.StrategyTrustPlatform
	}
	return boundPolicy{spec: spec, trust: trust}, nil
}

// Reconcile records a new revision when the template's workload changed.
func (r *Recorder) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := workv1alpha1.NewBinding(req.Namespace, req.Name)
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}
	bs := b.BindingSpec()
	bound, err := policyOf(ctx, r.Client, bs.PolicyRef)
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	policy := bound.spec
	if policy.Rollout == nil {
		if bs.Revisions != nil { // the rollout was removed: every cluster takes the template as it is
			if err := r.setRevisions(ctx, b, nil); err != nil {
				return ctrl.Result{}, err
			}
			return ctrl.Result{}, revision.DeleteHistory(ctx, r.Client, b)
		}
		return ctrl.Result{}, nil
	}
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(schema.FromAPIVersionAndKind(bs.Resource.APIVersion, bs.Resource.Kind))
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: bs.Resource.Namespace, Name: bs.Resource.Name}, tmpl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	hash := revision.WorkloadHash(r.Interpreters.For(tmpl.GroupVersionKind()), tmpl)
	routing := TrafficTargets(policy.Rollout)
	if bs.Revisions != nil && !apiequality.Semantic.DeepEqual(bs.Revisions.Traffic, routing) {
		// The policy's routing changed: the Services and routes render from the new names.
		revs := bs.Revisions.DeepCopy()
		revs.Traffic = routing
		return ctrl.Result{}, r.setRevisions(ctx, b, revs)
	}
	if bs.Revisions == nil {
		// A history starts here: anything left of an earlier one (a rollout removed and added
		// again, a binding re-created) must not be taken for it.
		if err := revision.DeleteHistory(ctx, r.Client, b); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.record(ctx, b, tmpl, 1, hash); err != nil {
			return ctrl.Result{}, err
		}
		// Staging adopts what runs unmanaged; a workload Flotilla already runs (a rollout added
		// to its policy later) is not staged, or its clusters would be handed back.
		running := false
		for _, cs := range b.BindingStatus().Clusters {
			running = running || cs.Applied
		}
		if !policy.Rollout.StageFirstRevision || running {
			return ctrl.Result{}, r.setRevisions(ctx, b, &workv1alpha1.Revisions{Latest: 1, Stable: 1, Traffic: routing})
		}
		// Staged: no cluster has a stable revision; the first release brings it in wave by
		// wave. The revisions go first so the release never finds a binding without them.
		if err := r.setRevisions(ctx, b, &workv1alpha1.Revisions{Latest: 1, Stable: 0, Traffic: routing}); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.startRelease(ctx, b, bound, 1, 0)
	}
	if bs.Revisions.Stable == 0 && bs.Revisions.Latest == 1 {
		// A staged first release whose creation failed after the revisions were written.
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: revision.Namespace(b), Name: revision.ReleaseName(b, 1)}, &rolloutv1alpha1.Release{}); apierrors.IsNotFound(err) {
			if err := r.startRelease(ctx, b, bound, 1, 0); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	latest := &appsv1.ControllerRevision{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: revision.Namespace(b), Name: revision.Name(b, bs.Revisions.Latest)}, latest); err != nil {
		return ctrl.Result{}, err
	}
	if latest.Annotations[revision.RevisionHashAnnotation] == hash {
		return ctrl.Result{}, nil
	}
	next := bs.Revisions.Latest + 1
	if err := r.record(ctx, b, tmpl, next, hash); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.startRelease(ctx, b, bound, next, bs.Revisions.Stable); err != nil {
		return ctrl.Result{}, err
	}
	revs := bs.Revisions.DeepCopy()
	revs.Latest = next
	if err := r.setRevisions(ctx, b, revs); err != nil {
		return ctrl.Result{}, err
	}
	limit := defaultHistory
	if l := policy.Rollout.RevisionHistoryLimit; l != nil {
		limit = int(*l)
	}
	keep := map[int64]bool{revs.Stable: true, revs.Latest: true}
	for _, p := range revs.Pins {
		keep[p.Revision] = true
	}
	return ctrl.Result{}, pruneRevisions(ctx, r.Client, b, limit, keep)
}

// TrafficTargets are the Services and routes a rollout sends its traffic split through.
func TrafficTargets(r *policyv1alpha1.RolloutStrategy) *workv1alpha1.TrafficTargets {
	switch {
	case r == nil:
		return nil
	case r.TrafficRouting != nil:
		tr := r.TrafficRouting
		t := &workv1alpha1.TrafficTargets{StableService: tr.StableService, CanaryService: tr.CanaryService}
		if tr.HTTPRoute != nil {
			t.HTTPRoute = tr.HTTPRoute.Name
		}
		if tr.VirtualService != nil {
			t.VirtualService, t.VirtualServiceRoutes = tr.VirtualService.Name, tr.VirtualService.Routes
		}
		return t
	case r.BlueGreen != nil:
		return &workv1alpha1.TrafficTargets{ActiveService: r.BlueGreen.ActiveService, PreviewService: r.BlueGreen.PreviewService}
	}
	return nil
}

// startRelease creates the Release that moves revision next in from stable.
func (r *Recorder) startRelease(ctx context.Context, b workv1alpha1.Binding, policy boundPolicy, next, stable int64) error {
	bs := b.BindingSpec()
	// Who wrote the strategy is decided here, once, with the strategy it is copied with: a
	// later change of the binding's policy must not lend a running release more trust.
	labels := map[string]string{revision.BindingLabel: revision.BindingHash(b), revision.PolicyKindLabel: bs.PolicyRef.Kind, revision.StrategyTrustLabel: policy.trust}
	rel := &rolloutv1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: revision.ReleaseName(b, next), Namespace: revision.Namespace(b), Labels: labels},
		Spec: rolloutv1alpha1.ReleaseSpec{
			Binding:        rolloutv1alpha1.BindingReference{Kind: bindingKind(b), Name: b.GetName()},
			Resource:       rolloutv1alpha1.ResourceReference{APIVersion: bs.Resource.APIVersion, Kind: bs.Resource.Kind, Namespace: bs.Resource.Namespace, Name: bs.Resource.Name},
			Revision:       next,
			StableRevision: stable,
			Strategy:       *policy.spec.Rollout.DeepCopy(),
		},
	}
	if b.GetNamespace() != "" {
		gvk := b.GetObjectKind().GroupVersionKind()
		rel.OwnerReferences = []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: b.GetName(), UID: b.GetUID()}}
	}
	if err := r.Client.Create(ctx, rel); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating release %s: %w", rel.Name, err)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(b, rel, corev1.EventTypeNormal, "ReleaseStarted", "Release", "revision %d recorded; release %s moves it from revision %d wave by wave", next, rel.Name, stable)
	}
	return nil
}

// record writes revision rev, or accepts the one there if it holds this workload; one that
// holds another (left over from an attempt whose binding write failed) is replaced.
func (r *Recorder) record(ctx context.Context, b workv1alpha1.Binding, tmpl *unstructured.Unstructured, rev int64, hash string) error {
	err := recordRevision(ctx, r.Client, b, tmpl, rev, hash)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	cur := &appsv1.ControllerRevision{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: revision.Namespace(b), Name: revision.Name(b, rev)}, cur); err != nil {
		return err
	}
	if cur.Annotations[revision.RevisionHashAnnotation] == hash {
		return nil
	}
	if err := r.Client.Delete(ctx, cur); client.IgnoreNotFound(err) != nil {
		return err
	}
	return recordRevision(ctx, r.Client, b, tmpl, rev, hash)
}

func bindingKind(b workv1alpha1.Binding) string {
	if b.GetNamespace() == "" {
		return "ClusterResourceBinding"
	}
	return "ResourceBinding"
}

func (r *Recorder) setRevisions(ctx context.Context, b workv1alpha1.Binding, revs *workv1alpha1.Revisions) error {
	return SetRevisions(ctx, r.Client, b, revs)
}

// SetRevisions writes a binding's revisions when they changed, pins sorted by cluster.
func SetRevisions(ctx context.Context, c client.Client, b workv1alpha1.Binding, revs *workv1alpha1.Revisions) error {
	if revs != nil {
		sort.Slice(revs.Pins, func(i, j int) bool { return revs.Pins[i].Cluster < revs.Pins[j].Cluster })
	}
	if apiequality.Semantic.DeepEqual(revs, b.BindingSpec().Revisions) {
		return nil
	}
	// Optimistic lock: pins written from a stale cached binding would undo newer ones.
	patch := client.MergeFromWithOptions(b.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	b.BindingSpec().Revisions = revs
	return c.Patch(ctx, b, patch)
}
