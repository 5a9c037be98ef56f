// Package application turns Applications into templates: it fetches the source (git, through
// internal/appsource, or inline), renders it, and applies the objects as templates in the
// Application's namespace of the control plane, labelled with the application, pruning those
// that left the source. Placement, releases and members are left to the machinery below: a
// new commit changes templates, and a changed template travels as a Release when its placement
// has a rollout.
//
// It writes templates acting as the namespace's Team (impersonating its contributor groups), so
// an Application can create only what the team's contributors could create by hand; and it
// writes the Application's status except the Placed condition, clusters and targetPolicies,
// which the targeting controller owns. A failed fetch never prunes: the last good render stays.
package application

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1ac "github.com/flotilla-dev/flotilla/api/applyconfiguration/apps/v1alpha1"
	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/appsource"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// FieldManager applies the templates; StatusManager owns the status fields this package writes.
const (
	FieldManager  = "flotilla-application"
	StatusManager = "flotilla-application"
)

// DefaultInterval is how often a git source is polled when the Application does not say.
const DefaultInterval = time.Minute

// resync re-applies an unchanged render now and then, so a template changed by hand in the
// control plane is put back without a fetch per poll costing writes.
const resync = 10 * time.Minute

var gvk = appsv1alpha1.GroupVersion.WithKind("Application")

// Controller reconciles Applications.
type Controller struct {
	Client   client.Client
	Config   *rest.Config // Flotilla's own; copied with impersonation to write templates
	Mapper   meta.RESTMapper
	Fetcher  *appsource.Fetcher
	Limits   appsource.Limits
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// Hooks receives the repository URLs a push webhook named; their Applications fetch at once.
	Hooks *kube.QueueSource[reconcile.Request]

	mu      sync.Mutex
	clients map[string]client.Client // by impersonated identity
	applied map[string]appliedRender // app -> the render last applied
	synced  map[string]string        // app -> the flotilla app sync request last handled
}

// SetupWithManager registers the controller.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Hooks == nil {
		c.Hooks = kube.NewQueueSource[reconcile.Request]()
	}
	b := ctrl.NewControllerManagedBy(mgr).Named("application").
		// Fetches wait on the network: several at once, so one slow repository holds no other.
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		// Status writes (this controller's and the targeting controller's) need no fetch; a
		// spec change or flotilla app sync (an annotation) does.
		For(&appsv1alpha1.Application{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// A Team's repositories or groups decide what its Applications may do.
		Watches(&tenancyv1alpha1.Team{}, handler.EnqueueRequestsFromMapFunc(c.appsOfNamespace)).
		// A window closed early or deleted lets held renders apply now.
		Watches(&rolloutv1alpha1.ChangeWindow{}, handler.EnqueueRequestsFromMapFunc(c.appsInScope)).
		Watches(&rolloutv1alpha1.ClusterChangeWindow{}, handler.EnqueueRequestsFromMapFunc(c.appsInScope)).
		WatchesRawSource(c.Hooks)
	return b.Complete(kube.RequeueConflicts(c))
}

func (c *Controller) appsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var apps appsv1alpha1.ApplicationList
	if err := c.Client.List(ctx, &apps, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(apps.Items))
	for _, a := range apps.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&a)})
	}
	return out
}

// Applications are fetched from git and written as their Team's contributors.
// +kubebuilder:rbac:groups=apps.flotilla.dev,resources=applications,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=apps.flotilla.dev,resources=applications/status;applications/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=tenancy.flotilla.dev,resources=teams,verbs=get;list;watch
// Repository credentials are Secrets in the Application's namespace.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// An Application writes its templates as flotilla:application:NS:NAME in its Team's contributor
// groups, so it can do no more than they may; that needs impersonation of users and groups and
// is the one rule that could lift the manager's rights (docs/security.md).
// +kubebuilder:rbac:groups="",resources=users;groups,verbs=impersonate

// Reconcile fetches, renders, applies and prunes one Application.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := &appsv1alpha1.Application{}
	if err := c.Client.Get(ctx, req.NamespacedName, app); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // its templates go with it (owner references)
	}
	if !app.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	st := statusOf(app)
	before := st.s.DeepCopy()
	if app.Spec.Suspend {
		st.set(app, appsv1alpha1.ConditionReconciling, metav1.ConditionFalse, appsv1alpha1.ReasonSuspended, "suspended: nothing is fetched, applied or pruned")
		return ctrl.Result{}, c.writeStatus(ctx, app, st)
	}
	res, err := c.sync(ctx, app, st)
	if !equality.Semantic.DeepEqual(before, &st.s) {
		if werr := c.writeStatus(ctx, app, st); werr != nil {
			return ctrl.Result{}, werr
		}
	}
	return res, err
}

// outcome is what one pass decided: requeue time and, for a transient failure, the error that
// makes the queue back off.
func (c *Controller) sync(ctx context.Context, app *appsv1alpha1.Application, st *status) (ctrl.Result, error) {
	team := &tenancyv1alpha1.Team{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: tenancyv1alpha1.TeamName}, team); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		st.stalled(app, appsv1alpha1.ReasonNoTeam, fmt.Sprintf("namespace %s has no Team: an Application acts as its Team's contributors, so the platform must create tenancy.flotilla.dev Team %q there first", app.Namespace, tenancyv1alpha1.TeamName))
		return ctrl.Result{}, nil
	}
	src := app.Spec.Source
	commit, objs, stalled, err := c.render(ctx, app, team, st)
	if stalled {
		return ctrl.Result{}, nil
	}
	interval := interval(app)
	if err != nil {
		if appsource.IsTransient(err) {
			// The last good render stays in force: nothing is pruned while the source is away.
			st.set(app, appsv1alpha1.ConditionReady, metav1.ConditionFalse, appsv1alpha1.ReasonFetchFailed,
				fmt.Sprintf("%v; the render of commit %s stays in force and nothing is pruned; retrying with backoff", err, shortOr(st.s.Commit, "(none yet)")))
			st.set(app, appsv1alpha1.ConditionReconciling, metav1.ConditionTrue, appsv1alpha1.ReasonFetchFailed, "retrying the fetch")
			st.set(app, appsv1alpha1.ConditionStalled, metav1.ConditionFalse, appsv1alpha1.ReasonFetchFailed, "a retry may succeed")
			return ctrl.Result{}, err
		}
		st.stalled(app, reasonOf(err), err.Error())
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	now := c.Clock.Now()
	key := client.ObjectKeyFromObject(app).String()
	templates, err := c.templates(app, objs)
	if err != nil {
		st.stalled(app, appsv1alpha1.ReasonObjectNotAllowed, err.Error())
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	hash, err := renderHash(templates)
	if err != nil {
		return ctrl.Result{}, err
	}
	// A commit that changes nothing of this application (another directory of the repository
	// changed) costs no write but the commit in status.
	if app.Generation == st.s.ObservedGeneration && st.ready() && c.sameRender(key, hash, now) {
		if commit != st.s.Commit {
			st.s.Commit, st.s.LastFetchTime = commit, &metav1.Time{Time: now}
			msg := fmt.Sprintf("%d objects applied from commit %s of %s", len(templates), short(commit), appsource.RedactURL(src.Git.RepoURL))
			st.set(app, appsv1alpha1.ConditionReady, metav1.ConditionTrue, appsv1alpha1.ReasonApplied, msg)
		}
		return requeue(src, interval), nil
	}
	if held, res, err := c.heldByWindow(ctx, app, st, commit, now); held || err != nil {
		return res, err
	}
	cl, err := c.teamClient(team, app)
	if err != nil {
		return ctrl.Result{}, err
	}
	if res, err := c.applyAll(ctx, cl, app, st, templates, interval); res != nil {
		return *res, err
	}
	pruned, err := c.prune(ctx, cl, app, st.s.Objects, templates)
	if err != nil {
		st.set(app, appsv1alpha1.ConditionReady, metav1.ConditionFalse, appsv1alpha1.ReasonApplyFailed, fmt.Sprintf("pruning: %v", err))
		return ctrl.Result{}, err
	}
	c.recordApplied(app, st, templates, commit, pruned, now)
	c.mu.Lock()
	if c.applied == nil {
		c.applied = map[string]appliedRender{}
	}
	c.applied[key] = appliedRender{at: now, hash: hash}
	c.mu.Unlock()
	return requeue(src, interval), nil
}

// render reads the Application's objects from its source: inline manifests, or the commit of
// a git repository the Team allows. stalled: the source is refused, and status says why.
func (c *Controller) render(ctx context.Context, app *appsv1alpha1.Application, team *tenancyv1alpha1.Team, st *status) (commit string, objs []appsource.Object, stalled bool, err error) {
	src := app.Spec.Source
	switch {
	case src.Inline != nil:
		raw := make([][]byte, len(src.Inline.Manifests))
		for i, m := range src.Inline.Manifests {
			raw[i] = m.Raw
		}
		objs, err = appsource.RenderInline(raw, c.Limits)
		return "", objs, false, err
	case src.Git != nil:
		// The URL is matched and fetched in one spelling: a spelling a server could resolve to
		// another repository than the glob matched (%2f, .., credentials) is refused here.
		repoURL, nerr := appsource.NormalizeRepoURL(src.Git.RepoURL)
		if nerr != nil {
			st.stalled(app, appsv1alpha1.ReasonRepositoryNotAllowed, nerr.Error())
			return "", nil, true, nil
		}
		if !repositoryAllowed(team, repoURL) {
			st.stalled(app, appsv1alpha1.ReasonRepositoryNotAllowed, fmt.Sprintf("spec.source.git.repoURL: %s is not among the repositories Team %s/%s allows (%s); the platform adds it to the Team's spec.repositories",
				repoURL, team.Namespace, team.Name, listOrNone(team.Spec.Repositories)))
			return "", nil, true, nil
		}
		commit, objs, err = c.fetch(ctx, app, team, repoURL)
		return commit, objs, false, err
	}
	st.stalled(app, appsv1alpha1.ReasonRenderFailed, "spec.source: set git or inline")
	return "", nil, true, nil
}

// applyAll applies every template as the Team, or none: each must be this Application's to
// write and pass a server-side dry run before any is applied. A non-nil result ends the pass.
func (c *Controller) applyAll(ctx context.Context, cl client.Client, app *appsv1alpha1.Application, st *status, templates []template, interval time.Duration) (*ctrl.Result, error) {
	for _, t := range templates {
		if err := c.claimed(ctx, app, t); err != nil {
			st.stalled(app, appsv1alpha1.ReasonObjectNotAllowed, err.Error()+"; nothing of this render was applied")
			return &ctrl.Result{RequeueAfter: interval}, nil
		}
	}
	for _, dryRun := range []bool{true, false} {
		for _, t := range templates {
			if err := apply(ctx, cl, t.u, dryRun); err != nil {
				res, err := c.applyFailed(app, st, t, err, interval)
				return &res, err
			}
		}
	}
	return nil, nil
}

// recordApplied writes what an applied render leaves in status: its objects, its commit, and
// Ready with how many objects came from where.
func (c *Controller) recordApplied(app *appsv1alpha1.Application, st *status, templates []template, commit string, pruned int, now time.Time) {
	src := app.Spec.Source
	st.s.Objects = st.s.Objects[:0]
	for _, t := range templates {
		st.s.Objects = append(st.s.Objects, appsv1alpha1.ApplicationObject{APIVersion: t.u.GetAPIVersion(), Kind: t.u.GetKind(), Name: t.u.GetName()})
	}
	if commit != st.s.Commit && commit != "" {
		c.Recorder.Eventf(app, nil, corev1.EventTypeNormal, appsv1alpha1.ReasonApplied, "Apply", "commit %s: %d objects applied, %d pruned", short(commit), len(templates), pruned)
	}
	if src.Git != nil && (commit != st.s.Commit || st.s.LastFetchTime == nil) {
		st.s.LastFetchTime = &metav1.Time{Time: now}
	}
	st.s.Commit = commit
	msg := fmt.Sprintf("%d objects applied", len(templates))
	if commit != "" {
		msg = fmt.Sprintf("%d objects applied from commit %s of %s", len(templates), short(commit), appsource.RedactURL(src.Git.RepoURL))
	}
	st.s.ObservedGeneration = app.Generation
	st.set(app, appsv1alpha1.ConditionReady, metav1.ConditionTrue, appsv1alpha1.ReasonApplied, msg)
	st.set(app, appsv1alpha1.ConditionReconciling, metav1.ConditionFalse, appsv1alpha1.ReasonApplied, msg)
	st.set(app, appsv1alpha1.ConditionStalled, metav1.ConditionFalse, appsv1alpha1.ReasonApplied, msg)
}

func requeue(src appsv1alpha1.ApplicationSource, interval time.Duration) ctrl.Result {
	if src.Git == nil {
		return ctrl.Result{} // inline: only a change of the Application changes anything
	}
	return ctrl.Result{RequeueAfter: interval}
}

// appliedRender is what this process last applied for an Application, and when.
type appliedRender struct {
	at   time.Time
	hash string
}

// sameRender reports whether the render was applied already and recently enough; after
// resync it is applied again, so a template changed by hand in the control plane comes back.
func (c *Controller) sameRender(key, hash string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.applied[key]
	return ok && last.hash == hash && now.Sub(last.at) < resync
}

func renderHash(templates []template) (string, error) {
	h := sha256.New()
	for _, t := range templates {
		b, err := json.Marshal(t.u.Object)
		if err != nil {
			return "", err
		}
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (c *Controller) applyFailed(app *appsv1alpha1.Application, st *status, t template, err error, interval time.Duration) (ctrl.Result, error) {
	msg := fmt.Sprintf("%s: %s %s: %v", t.where(), t.u.GetKind(), t.u.GetName(), err)
	// A field of the wrong type reaches server-side apply as an internal error ("failed to
	// create typed patch object"), but it is the manifest's fault as much as an Invalid one.
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || strings.Contains(err.Error(), "failed to create typed patch object") {
		// Only a change of the source or the Team helps.
		st.stalled(app, appsv1alpha1.ReasonObjectNotAllowed, msg+"; nothing of this render was applied")
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	st.set(app, appsv1alpha1.ConditionReady, metav1.ConditionFalse, appsv1alpha1.ReasonApplyFailed, msg)
	st.set(app, appsv1alpha1.ConditionReconciling, metav1.ConditionTrue, appsv1alpha1.ReasonApplyFailed, "retrying")
	return ctrl.Result{}, errors.New(msg)
}

// fetch resolves the revision and renders the tree of its commit. repoURL is the normalised
// spec.source.git.repoURL; every redirect the server answers with is matched against the
// Team's repositories too, and the tree is cached for the Team's namespace alone.
func (c *Controller) fetch(ctx context.Context, app *appsv1alpha1.Application, team *tenancyv1alpha1.Team, repoURL string) (string, []appsource.Object, error) {
	g := app.Spec.Source.Git
	if c.syncRequested(app) {
		// flotilla app sync means "ask the server now", not "use the listing of a moment ago".
		c.Fetcher.Forget(func(u string) bool { return u == repoURL })
	}
	auth, err := c.auth(ctx, app)
	if err != nil {
		return "", nil, err
	}
	src := appsource.Git{RepoURL: repoURL, Revision: g.Revision, Team: app.Namespace,
		Allowed: func(u string) bool { return repositoryAllowed(team, u) }}
	commit, err := c.Fetcher.Resolve(ctx, src, auth)
	if err != nil {
		return "", nil, err
	}
	dir, err := c.Fetcher.Checkout(ctx, src, auth, commit)
	if err != nil {
		return "", nil, err
	}
	p := g.Path
	if p == "" {
		p = "."
	}
	objs, err := appsource.RenderDir(dir, p, c.Limits)
	return commit, objs, err
}

// syncRequested reports (once) a new flotilla app sync request on the Application.
func (c *Controller) syncRequested(app *appsv1alpha1.Application) bool {
	req := app.Annotations[appsv1alpha1.RequestedAtAnnotation]
	if req == "" {
		return false
	}
	key := client.ObjectKeyFromObject(app).String()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.synced == nil {
		c.synced = map[string]string{}
	}
	if c.synced[key] == req {
		return false
	}
	c.synced[key] = req
	return true
}

// auth reads the credentials Secret of the Application's namespace.
func (c *Controller) auth(ctx context.Context, app *appsv1alpha1.Application) (*appsource.Auth, error) {
	ref := app.Spec.Source.Git.SecretRef
	if ref == nil {
		return nil, nil
	}
	s := &corev1.Secret{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &appsource.Error{Field: "spec.source.git.secretRef", Permanent: true,
				Err: fmt.Errorf("Secret %s/%s not found: create it with username and password (or token), or sshPrivateKey and knownHosts", app.Namespace, ref.Name)}
		}
		return nil, err
	}
	return &appsource.Auth{
		Username: string(s.Data["username"]), Password: string(s.Data["password"]), Token: string(s.Data["token"]),
		SSHPrivateKey: s.Data["sshPrivateKey"], KnownHosts: s.Data["knownHosts"],
	}, nil
}

// template is one rendered object made ready to apply, and where it came from.
type template struct {
	u    *unstructured.Unstructured
	file string
	line int
}

func (t template) where() string {
	if t.line > 0 {
		return fmt.Sprintf("%s:%d", t.file, t.line)
	}
	return t.file
}

// templates checks the rendered objects and labels them: namespaced kinds only, in the
// Application's namespace, each once.
func (c *Controller) templates(app *appsv1alpha1.Application, objs []appsource.Object) ([]template, error) {
	seen := map[string]string{}
	out := make([]template, 0, len(objs))
	for _, o := range objs {
		t := template{u: o.Object.DeepCopy(), file: o.File, line: o.Line}
		u := t.u
		gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
		if err != nil {
			return nil, fmt.Errorf("%s: apiVersion %q: %v", t.where(), u.GetAPIVersion(), err)
		}
		m, err := c.Mapper.RESTMapping(gv.WithKind(u.GetKind()).GroupKind(), gv.Version)
		if err != nil {
			return nil, fmt.Errorf("%s: %s %s: the control plane does not serve kind %s in %s; install its CRD on the control plane first", t.where(), u.GetKind(), u.GetName(), u.GetKind(), u.GetAPIVersion())
		}
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			return nil, fmt.Errorf("%s: %s %s is cluster-scoped: an Application writes only namespaced objects into its own namespace %s; cluster-scoped objects are the platform's (ClusterPropagationPolicy)", t.where(), u.GetKind(), u.GetName(), app.Namespace)
		}
		if ns := u.GetNamespace(); ns != "" && ns != app.Namespace {
			return nil, fmt.Errorf("%s: %s %s names namespace %s: an Application writes only into its own namespace %s; drop metadata.namespace or set it to %s", t.where(), u.GetKind(), u.GetName(), ns, app.Namespace, app.Namespace)
		}
		u.SetNamespace(app.Namespace)
		id := m.GroupVersionKind.GroupKind().String() + "/" + u.GetName()
		if prev, dup := seen[id]; dup {
			return nil, fmt.Errorf("%s: %s %s is also defined at %s: each object once", t.where(), u.GetKind(), u.GetName(), prev)
		}
		seen[id] = t.where()
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[appsv1alpha1.ApplicationLabel] = app.Name
		u.SetLabels(labels)
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: app.Name, UID: app.UID}})
		for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"} {
			unstructured.RemoveNestedField(u.Object, "metadata", f)
		}
		unstructured.RemoveNestedField(u.Object, "status")
		out = append(out, t)
	}
	return out, nil
}

// apply server-side applies one template as the Team. A template is of any kind, so it goes
// as an unstructured apply configuration.
func apply(ctx context.Context, cl client.Client, u *unstructured.Unstructured, dryRun bool) error {
	opts := []client.ApplyOption{client.FieldOwner(FieldManager), client.ForceOwnership}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	return cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), opts...)
}

// claimed refuses objects of the same name that another Application, or a person, made: an
// Application never takes a template over.
func (c *Controller) claimed(ctx context.Context, app *appsv1alpha1.Application, t template) error {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(t.u.GroupVersionKind())
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(t.u), cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	switch owner := cur.GetLabels()[appsv1alpha1.ApplicationLabel]; owner {
	case app.Name:
		return nil
	case "":
		return fmt.Errorf("%s: %s %s already exists in %s and belongs to no Application; delete it, or rename it in the source", t.where(), t.u.GetKind(), t.u.GetName(), app.Namespace)
	default:
		return fmt.Errorf("%s: %s %s already belongs to Application %s; rename it in one of the sources", t.where(), t.u.GetKind(), t.u.GetName(), owner)
	}
}

// prune deletes the templates of the previous render that left the source.
func (c *Controller) prune(ctx context.Context, cl client.Client, app *appsv1alpha1.Application, before []appsv1alpha1.ApplicationObject, now []template) (int, error) {
	keep := map[string]bool{}
	for _, t := range now {
		keep[t.u.GroupVersionKind().GroupKind().String()+"/"+t.u.GetName()] = true
	}
	n := 0
	for _, o := range before {
		gv, err := schema.ParseGroupVersion(o.APIVersion)
		if err != nil {
			continue
		}
		gk := gv.WithKind(o.Kind)
		if keep[gk.GroupKind().String()+"/"+o.Name] {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gk)
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: o.Name}, u); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				continue
			}
			return n, err
		}
		if u.GetLabels()[appsv1alpha1.ApplicationLabel] != app.Name {
			continue // no longer the application's: someone took it over
		}
		if err := cl.Delete(ctx, u, client.Preconditions{UID: ptr.To(u.GetUID())}); client.IgnoreNotFound(err) != nil {
			return n, fmt.Errorf("%s %s: %w", o.Kind, o.Name, err)
		}
		n++
		c.Recorder.Eventf(app, nil, corev1.EventTypeNormal, "Pruned", "Prune", "%s %s left the source and was deleted", o.Kind, o.Name)
	}
	return n, nil
}

// teamClient writes as the Team's contributors: the Application can do no more than they.
func (c *Controller) teamClient(team *tenancyv1alpha1.Team, app *appsv1alpha1.Application) (client.Client, error) {
	groups := impersonatedGroups(team)
	user := fmt.Sprintf("flotilla:application:%s:%s", app.Namespace, app.Name)
	key := user + "|" + strings.Join(groups, ",")
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[key]; ok {
		return cl, nil
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	cl, err := client.New(cfg, client.Options{Scheme: kube.Scheme, Mapper: c.Mapper})
	if err != nil {
		return nil, err
	}
	if c.clients == nil {
		c.clients = map[string]client.Client{}
	}
	c.clients[key] = cl
	return cl, nil
}

// impersonatedGroups are the groups an Application acts as (tenancyv1alpha1.Team.ActingGroups):
// the Team's contributors, never a group a Team may not name, plus system:authenticated.
func impersonatedGroups(team *tenancyv1alpha1.Team) []string { return team.ActingGroups() }

// repositoryAllowed matches a repository URL against the Team's globs, both in their
// normalised spellings (appsource.NormalizeRepoURL and NormalizeRepoGlob): a URL that cannot
// be normalised (percent-escapes, .. segments, credentials) is allowed by no glob.
func repositoryAllowed(team *tenancyv1alpha1.Team, url string) bool {
	u, err := appsource.NormalizeRepoURL(url)
	if err != nil {
		return false
	}
	for _, g := range team.Spec.Repositories {
		if ok, err := path.Match(appsource.NormalizeRepoGlob(g), u); err == nil && ok {
			return true
		}
	}
	return false
}

func interval(app *appsv1alpha1.Application) time.Duration {
	if g := app.Spec.Source.Git; g != nil && g.Interval != nil && g.Interval.Duration > 0 {
		return g.Interval.Duration
	}
	return DefaultInterval
}

func reasonOf(err error) string {
	var e *appsource.Error
	if errors.As(err, &e) {
		switch e.Field {
		case "spec.source.git.revision":
			return appsv1alpha1.ReasonRevisionNotFound
		case "spec.source.git.secretRef":
			return appsv1alpha1.ReasonCredentialsInvalid
		case "spec.source.git.repoURL":
			return appsv1alpha1.ReasonFetchFailed
		}
	}
	return appsv1alpha1.ReasonRenderFailed
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

func shortOr(commit, none string) string {
	if commit == "" {
		return none
	}
	return short(commit)
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// status is the part of the Application's status this controller owns, built from what is
// there so condition times survive.
type status struct {
	s appsv1alpha1.ApplicationStatus
}

func statusOf(app *appsv1alpha1.Application) *status {
	st := &status{s: appsv1alpha1.ApplicationStatus{
		ObservedGeneration: app.Status.ObservedGeneration,
		Commit:             app.Status.Commit,
		LastFetchTime:      app.Status.LastFetchTime,
		Objects:            slices.Clone(app.Status.Objects),
	}}
	for _, c := range app.Status.Conditions {
		switch c.Type {
		case appsv1alpha1.ConditionReady, appsv1alpha1.ConditionReconciling, appsv1alpha1.ConditionStalled:
			st.s.Conditions = append(st.s.Conditions, c)
		}
	}
	return st
}

func (st *status) set(app *appsv1alpha1.Application, t string, s metav1.ConditionStatus, reason, msg string) {
	if len(msg) > 32000 {
		msg = msg[:32000]
	}
	meta.SetStatusCondition(&st.s.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: app.Generation})
}

// stalled: only a change of the Application, its Team or its source helps.
func (st *status) stalled(app *appsv1alpha1.Application, reason, msg string) {
	st.set(app, appsv1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
	st.set(app, appsv1alpha1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	st.set(app, appsv1alpha1.ConditionReconciling, metav1.ConditionFalse, reason, "waiting for a change of the Application, its Team or its source")
}

func (st *status) ready() bool {
	return meta.IsStatusConditionTrue(st.s.Conditions, appsv1alpha1.ConditionReady)
}

func (c *Controller) writeStatus(ctx context.Context, app *appsv1alpha1.Application, st *status) error {
	if err := c.Client.Status().Apply(ctx, st.apply(app), client.FieldOwner(StatusManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing status of Application %s/%s: %w", app.Namespace, app.Name, err)
	}
	return nil
}

// apply is the status this controller owns as an apply configuration: each field present
// exactly when the status struct serializes it (the omitempty ones left out when empty), so
// applying it claims those fields and gives up the ones left out. Clusters and targetPolicies
// are the targeting controller's and never set here.
func (st *status) apply(app *appsv1alpha1.Application) *appsv1alpha1ac.ApplicationApplyConfiguration {
	s := appsv1alpha1ac.ApplicationStatus().WithConditions(kube.Conditions(st.s.Conditions)...)
	if st.s.ObservedGeneration != 0 {
		s.WithObservedGeneration(st.s.ObservedGeneration)
	}
	if st.s.Commit != "" {
		s.WithCommit(st.s.Commit)
	}
	if st.s.LastFetchTime != nil {
		s.WithLastFetchTime(*st.s.LastFetchTime)
	}
	for _, o := range st.s.Objects {
		s.WithObjects(appsv1alpha1ac.ApplicationObject().WithAPIVersion(o.APIVersion).WithKind(o.Kind).WithName(o.Name))
	}
	return appsv1alpha1ac.Application(app.Name, app.Namespace).WithStatus(s)
}
