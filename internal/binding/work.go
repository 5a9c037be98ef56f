package binding

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/match"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/render"
	"github.com/flotilla-dev/flotilla/internal/revision"
	"github.com/flotilla-dev/flotilla/internal/traffic"
)

// canarySource is what a cluster's canary renders from.
type canarySource struct {
	template *unstructured.Unstructured
	replicas int32
}

type writtenWork struct {
	uid        types.UID
	generation int64
}

// trafficIndex indexes workload bindings by the Services and routes carrying their traffic
// ("Kind/name", see traffic.Names).
const trafficIndex = "spec.revisions.traffic"

// trafficSource is a workload whose traffic split a template carries.
type trafficSource struct {
	workload string
	targets  *workv1alpha1.TrafficTargets
	revs     *workv1alpha1.Revisions
	// primaryLabelled: the clusters whose primary runs healthy as last rendered, with the
	// stable role on its pods.
	primaryLabelled map[string]bool
	// err says why the template cannot carry the split it is asked to.
	err error
}

// selectsARole says whether a Service's Work already selects pods by their release role.
func selectsARole(w *workv1alpha1.Work) bool {
	if w == nil || len(w.Spec.Manifests) == 0 {
		return false
	}
	var svc struct {
		Kind string `json:"kind"`
		Spec struct {
			Selector map[string]string `json:"selector"`
		} `json:"spec"`
	}
	if json.Unmarshal(w.Spec.Manifests[len(w.Spec.Manifests)-1].Raw, &svc) != nil || svc.Kind != "Service" {
		return false
	}
	return svc.Spec.Selector[traffic.RoleLabel] != ""
}

// routedBy are the workloads of the template's namespace whose traffic it carries.
func (c *Controller) routedBy(ctx context.Context, b workv1alpha1.Binding, tmpl *unstructured.Unstructured) ([]trafficSource, error) {
	if tmpl.GetNamespace() == "" {
		return nil, nil
	}
	switch tmpl.GetKind() {
	case "Service", "HTTPRoute", "VirtualService":
	default:
		return nil, nil
	}
	list := &workv1alpha1.ResourceBindingList{}
	if err := c.Client.List(ctx, list, client.InNamespace(tmpl.GetNamespace()), client.MatchingFields{trafficIndex: traffic.Key(tmpl)}); err != nil {
		return nil, err
	}
	var out []trafficSource
	for i := range list.Items {
		rb := &list.Items[i]
		if b.BindingSpec().PolicyRef.Kind == kindClusterPropagationPolicy && rb.Spec.PolicyRef.Kind != kindClusterPropagationPolicy {
			continue // the platform's Services and routes take no split from a namespace's policy
		}
		src := trafficSource{workload: rb.Spec.Resource.Kind + " " + rb.Spec.Resource.Name, targets: rb.Spec.Revisions.Traffic, revs: rb.Spec.Revisions,
			primaryLabelled: map[string]bool{}}
		if rb.Status.ObservedGeneration == rb.Generation {
			for _, cs := range rb.Status.Clusters {
				src.primaryLabelled[cs.Cluster] = cs.Applied && cs.Health == workv1alpha1.HealthHealthy
			}
		}
		out = append(out, src)
	}
	if len(out) > 1 {
		var names []string
		for _, src := range out {
			names = append(names, src.workload)
		}
		return out[:0], &renderError{fmt.Errorf("%s %s carries the traffic of %s; one workload's release routes through it, so give each its own Services and routes", tmpl.GetKind(), tmpl.GetName(), strings.Join(names, " and "))}
	}
	return out, nil
}

// namedRule is an override rule and the policy it comes from, so a refused override is
// reported with its policy's name.
type namedRule struct {
	policy string
	policyv1alpha1.OverrideRule
}

// namedOverriders are the overriders of one rule and the policy they come from.
type namedOverriders struct {
	policy string
	policyv1alpha1.Overriders
}

// overrideRules returns the override rules that select the template, ClusterOverridePolicies
// first, then OverridePolicies, each by name, rules in their written order.
func (c *Controller) overrideRules(ctx context.Context, tmpl *unstructured.Unstructured) ([]namedRule, error) {
	var rules []namedRule
	cops := &policyv1alpha1.ClusterOverridePolicyList{}
	if err := c.Client.List(ctx, cops); err != nil {
		return nil, err
	}
	sort.Slice(cops.Items, func(i, j int) bool { return cops.Items[i].Name < cops.Items[j].Name })
	for _, p := range cops.Items {
		if _, ok := match.Resource(p.Spec.ResourceSelectors, tmpl); ok {
			for _, r := range p.Spec.OverrideRules {
				rules = append(rules, namedRule{"ClusterOverridePolicy " + p.Name, r})
			}
		}
	}
	ops := &policyv1alpha1.OverridePolicyList{}
	if err := c.Client.List(ctx, ops, client.InNamespace(tmpl.GetNamespace())); err != nil {
		return nil, err
	}
	sort.Slice(ops.Items, func(i, j int) bool { return ops.Items[i].Name < ops.Items[j].Name })
	for _, p := range ops.Items {
		if _, ok := match.Resource(p.Spec.ResourceSelectors, tmpl); ok {
			for _, r := range p.Spec.OverrideRules {
				rules = append(rules, namedRule{"OverridePolicy " + p.Namespace + "/" + p.Name, r})
			}
		}
	}
	return rules, nil
}

// WorkName is the name of a binding's Work in every execution namespace: NAMESPACE-NAME, or
// cluster.NAME for a ClusterResourceBinding (namespace names hold no dots, so they never clash).
func WorkName(b workv1alpha1.Binding) string {
	return workv1alpha1.WorkName(b.GetNamespace(), b.GetName())
}

// dropLeftWorks deletes the Works of clusters the binding no longer targets (those being
// evicted stay until their replacement is available) and hands back the Works of clusters
// handed back to unmanaged; it leaves in p.existing the Works of the clusters still targeted.
func (c *Controller) dropLeftWorks(ctx context.Context, p *pass) error {
	targets := map[string]bool{}
	for _, t := range p.bs.Clusters {
		if !slices.Contains(p.bs.UnmanagedClusters, t.Name) { // handed back: no Work, no status
			targets[t.Name] = true
		}
	}
	p.existing = map[string]*workv1alpha1.Work{}
	for i := range p.works {
		w := &p.works[i]
		cluster := w.Labels[workv1alpha1.ClusterLabel]
		c.hadWork.Store(workKey(p.b, cluster), true)
		if targets[cluster] {
			p.existing[cluster] = w
			continue
		}
		if task, evicting := p.bs.EvictionFor(cluster); evicting && task.PurgeMode != workv1alpha1.PurgeImmediately {
			continue // the old placement stays until its replacement is available
		}
		if !w.DeletionTimestamp.IsZero() {
			continue
		}
		if slices.Contains(p.bs.UnmanagedClusters, cluster) {
			if err := c.handBack(ctx, w); err != nil {
				return err
			}
			continue
		}
		if ok, err := c.mayDelete(ctx, p.b, cluster); err != nil {
			return err
		} else if !ok {
			p.deletionWaits = true // its dependents leave the cluster first
			continue
		}
		if err := c.Client.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// writeWorks renders and writes the Work of every cluster the binding targets.
func (c *Controller) writeWorks(ctx context.Context, p *pass) (written, error) {
	out := written{renderErrors: map[string]string{}}
	rules, err := c.overrideRules(ctx, p.tmpl)
	if err != nil {
		return out, err
	}
	routed, err := c.routedBy(ctx, p.b, p.tmpl)
	if re := (*renderError)(nil); errors.As(err, &re) {
		routed = []trafficSource{{err: re}} // every cluster's Work reports it
	} else if err != nil {
		return out, err
	}
	revisions := map[int64]*unstructured.Unstructured{}
	for _, t := range p.bs.Clusters {
		if slices.Contains(p.bs.UnmanagedClusters, t.Name) {
			continue // handed back: no Work, no status
		}
		wrote, err := c.writeClusterWork(ctx, p, t, rules, routed, revisions, &out)
		if out.clusterGone {
			return out, nil
		}
		if err != nil {
			var re *renderError
			if !errors.As(err, &re) {
				return out, err
			}
			out.renderErrors[t.Name] = err.Error()
		}
		out.any = out.any || wrote
	}
	return out, nil
}

// writeClusterWork writes one cluster's Work: suspended, not reached yet by a staged first
// release, held for its dependencies (first Work only), or rendered from the revision the cluster runs (and its canary's) with the
// cluster's overrides and routes. It reports whether it wrote.
func (c *Controller) writeClusterWork(ctx context.Context, p *pass, t workv1alpha1.TargetCluster, rules []namedRule, routed []trafficSource,
	revisions map[int64]*unstructured.Unstructured, out *written) (bool, error) {
	cl := &clusterv1alpha1.Cluster{}
	// Read only, so not copied: a pass reads each of its clusters, and a Cluster carries its
	// member's whole discovery.
	if err := c.Client.Get(ctx, client.ObjectKey{Name: t.Name}, cl, client.UnsafeDisableDeepCopy); err != nil {
		out.clusterGone = apierrors.IsNotFound(err)
		return false, client.IgnoreNotFound(err)
	}
	if !cl.DeletionTimestamp.IsZero() {
		return false, nil // unjoining: its finalizer drains the Works, none is written again
	}
	var overriders []namedOverriders
	for _, r := range rules {
		if match.Cluster(r.TargetCluster, cl) {
			overriders = append(overriders, namedOverriders{r.policy, r.Overriders})
		}
	}
	existing := p.existing[t.Name]
	if p.bs.Suspended(t.Name) {
		// Nothing new reaches the member; the executor stops writing and keeps reporting.
		if existing != nil && !existing.Spec.Suspend {
			patch := client.MergeFrom(existing.DeepCopy())
			existing.Spec.Suspend = true
			return false, c.Client.Patch(ctx, existing, patch)
		}
		return false, nil
	}
	if notYet, err := c.notReachedYet(ctx, p.b, t.Name, len(p.works) > 0); err != nil || notYet {
		if err == nil && existing != nil && existing.DeletionTimestamp.IsZero() {
			// A staged first release has not reached this cluster: a live object there stays
			// unmanaged, and one handed back by a rollback is released, never deleted.
			err = c.handBack(ctx, existing)
		}
		delete(p.existing, t.Name)
		return false, err
	}
	if existing == nil && !c.ranThere(p.b, t.Name) {
		why, err := c.waitsFor(ctx, p, t.Name)
		if why != "" {
			p.held[t.Name] = why
		}
		if err != nil || why != "" {
			return false, err
		}
	}
	source, rev, err := c.sourceFor(ctx, p.b, p.tmpl, t.Name, revisions)
	if err != nil {
		return false, err
	}
	canary, err := c.canaryOf(ctx, p, &t, rev, revisions)
	if err != nil {
		return false, err
	}
	if existing != nil && !existing.DeletionTimestamp.IsZero() {
		// Never rewrite a Work being deleted (its deletion policy decides what happens to
		// the member objects); the new one is written once it is gone.
		out.terminating = true
		return false, nil
	}
	return c.ensureWork(ctx, p.b, source, rev, canary, p.in, p.hasReplicas, t, overriders, routed, existing, renderInputs(p, rev, canary, t, overriders, routed))
}

// canaryOf is the canary a release pinned to the cluster, if any, taking its replicas out of
// the cluster's share t when the two run different revisions without routing.
func (c *Controller) canaryOf(ctx context.Context, p *pass, t *workv1alpha1.TargetCluster, rev int64, revisions map[int64]*unstructured.Unstructured) (*canarySource, error) {
	pin, ok := p.bs.Revisions.CanaryFor(t.Name)
	if !ok || !p.hasReplicas {
		return nil, nil
	}
	src, err := c.revisionSource(ctx, p.b, p.tmpl, pin.Revision, revisions)
	if err != nil {
		return nil, err
	}
	canary := &canarySource{template: src, replicas: min(pin.Replicas, t.Replicas)}
	if p.bs.Revisions.Traffic != nil {
		// Routed or blue-green: the route or the Service decides who gets the
		// requests, so the primary keeps its full share beside the canary.
		canary.replicas = pin.Replicas
	} else if pin.Revision != rev {
		t.Replicas -= canary.replicas // the canary's replicas come out of the cluster's share
	} // else the primary took the canary's revision: at full share until the canary goes
	return canary, nil
}

// handBack deletes a Work so that the executor strips Flotilla's marks from its member
// objects instead of deleting them.
func (c *Controller) handBack(ctx context.Context, w *workv1alpha1.Work) error {
	if w.Spec.DeletionPolicy != workv1alpha1.DeletionRelease {
		patch := client.MergeFrom(w.DeepCopy())
		w.Spec.DeletionPolicy = workv1alpha1.DeletionRelease
		if err := c.Client.Patch(ctx, w, patch); err != nil {
			return err
		}
	}
	if err := c.Client.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// notReachedYet reports a cluster that a staged first release has not reached (revisions are
// tracked and the cluster has none), or any cluster of a template released in waves whose
// first revision is not recorded yet.
func (c *Controller) notReachedYet(ctx context.Context, b workv1alpha1.Binding, cluster string, hasWorks bool) (bool, error) {
	revs := b.BindingSpec().Revisions
	if revs != nil {
		return revs.RevisionFor(cluster) == 0, nil
	}
	if hasWorks {
		return false, nil // already running: a rollout added later does not stage what runs
	}
	_, policy, err := kube.Policy(ctx, c.Client, b.BindingSpec().PolicyRef)
	if err != nil {
		return false, client.IgnoreNotFound(err)
	}
	// A template released in waves reaches no cluster before its first revision is recorded:
	// what the members first run is then exactly revision 1, and a change made in between is a
	// new revision with its release, never an update that skips the waves.
	return policy.Rollout != nil, nil
}

// renderError is a problem of the user's input (an override that does not fit): reported on
// the binding, not retried.
type renderError struct{ err error }

func (r *renderError) Error() string { return r.err.Error() }

// sourceFor is what a cluster renders: the revision a release pinned it to (or the stable
// one), with the template's current labels and annotations (metadata is not released in
// waves). The template itself is used when its workload is that revision's: the template may
// already be ahead of the revisions recorded so far, and must not reach a cluster before its
// release does.
func (c *Controller) sourceFor(ctx context.Context, b workv1alpha1.Binding, tmpl *unstructured.Unstructured, cluster string, loaded map[int64]*unstructured.Unstructured) (*unstructured.Unstructured, int64, error) {
	rev := b.BindingSpec().Revisions.RevisionFor(cluster)
	if rev == 0 {
		return tmpl, 0, nil
	}
	src, err := c.revisionSource(ctx, b, tmpl, rev, loaded)
	return src, rev, err
}

// revisionSource is the template as of revision rev, with its current metadata.
func (c *Controller) revisionSource(ctx context.Context, b workv1alpha1.Binding, tmpl *unstructured.Unstructured, rev int64, loaded map[int64]*unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if src, ok := loaded[rev]; ok {
		return src, nil
	}
	src, hash, err := revision.Load(ctx, c.Client, b, rev)
	if err != nil {
		return nil, err
	}
	if hash == revision.WorkloadHash(c.Interpreters.For(tmpl.GroupVersionKind()), tmpl) {
		src = tmpl
	} else {
		src.SetName(tmpl.GetName())
		src.SetNamespace(tmpl.GetNamespace())
		src.SetLabels(tmpl.GetLabels())
		src.SetAnnotations(tmpl.GetAnnotations())
	}
	loaded[rev] = src
	return src, nil
}

// ensureWork writes the cluster's Work when its content changed and says whether it wrote.
func (c *Controller) ensureWork(ctx context.Context, b workv1alpha1.Binding, tmpl *unstructured.Unstructured, rev int64, canary *canarySource, in interpret.Interpreter, hasReplicas bool, t workv1alpha1.TargetCluster, overriders []namedOverriders, routed []trafficSource, w *workv1alpha1.Work, inputs string) (wrote bool, err error) {
	ns := kube.ExecutionNamespacePrefix + t.Name
	name := WorkName(b)
	if w != nil {
		name = w.Name // written under an earlier version's naming: its member objects point at it
	}
	level := c.podSecurityLevel(b)
	from := renderedFrom{fingerprint: renderFingerprint(inputs, ns, name, level)}
	var manifests []workv1alpha1.Manifest
	if w != nil && inputs != "" && c.renderedAs(w, from) {
		manifests = w.Spec.Manifests // rendered from the same inputs already
	} else if manifests, err = c.renderManifests(ctx, b, tmpl, canary, in, hasReplicas, t, overriders, routed, w, ns, name, level); err != nil {
		return false, err
	}
	// Recorded once the Work holds these manifests (nothing failed), with the spec they are in.
	defer func() {
		if err == nil && w != nil && w.UID != "" && inputs != "" {
			from.uid, from.generation = w.UID, w.Generation
			c.rendered.Store(client.ObjectKeyFromObject(w), from)
		}
	}()
	spec := workv1alpha1.WorkSpec{
		Manifests:          manifests,
		DeletionPolicy:     b.BindingSpec().DeletionPolicy,
		ConflictResolution: b.BindingSpec().ConflictResolution,
		DriftCorrection:    b.BindingSpec().DriftCorrection.DeepCopy(),
	}
	labels := map[string]string{
		workv1alpha1.BindingNamespaceLabel: b.GetNamespace(), workv1alpha1.BindingNameLabel: b.GetName(), workv1alpha1.ClusterLabel: t.Name,
	}
	if rev != 0 {
		labels[workv1alpha1.RevisionLabel] = strconv.FormatInt(rev, 10)
	}
	if w == nil {
		var annotations map[string]string
		if level != "" {
			// The executor labels the member namespaces it creates for this Work with the level.
			annotations = map[string]string{names.PodSecurityLevelAnnotation: level}
		}
		w = &workv1alpha1.Work{
			// Created with the executor's finalizer: one write less per Work.
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{names.ExecutorFinalizer}, Labels: labels, Annotations: annotations},
			Spec:       spec,
		}
		if err := c.createWork(ctx, b, t.Name, w); err != nil {
			return false, err
		}
		return true, nil
	}
	if workSpecEqual(w.Spec, spec) && w.Labels[workv1alpha1.RevisionLabel] == labels[workv1alpha1.RevisionLabel] &&
		w.Annotations[names.PodSecurityLevelAnnotation] == level {
		return false, nil
	}
	patch := client.MergeFrom(w.DeepCopy())
	w.Spec = spec
	if level != "" {
		metav1.SetMetaDataAnnotation(&w.ObjectMeta, names.PodSecurityLevelAnnotation, level)
	} else {
		delete(w.Annotations, names.PodSecurityLevelAnnotation)
	}
	if rev != 0 {
		w.Labels[workv1alpha1.RevisionLabel] = labels[workv1alpha1.RevisionLabel]
	} else {
		delete(w.Labels, workv1alpha1.RevisionLabel)
	}
	if err := c.Client.Patch(ctx, w, patch); err != nil {
		return false, err
	}
	c.written.Store(client.ObjectKeyFromObject(w), writtenWork{w.UID, w.Generation})
	return true, nil
}

// renderedFrom is what a Work's manifests were rendered from, and the spec they went into.
type renderedFrom struct {
	uid         types.UID
	generation  int64
	fingerprint [sha256.Size]byte
}

// renderedAs says whether w's manifests were rendered from the inputs from names, and w has
// not been written since.
func (c *Controller) renderedAs(w *workv1alpha1.Work, from renderedFrom) bool {
	v, ok := c.rendered.Load(client.ObjectKeyFromObject(w))
	if !ok {
		return false
	}
	had := v.(renderedFrom)
	return had.uid == w.UID && had.generation == w.Generation && had.fingerprint == from.fingerprint
}

// renderInputs is what a cluster's manifests are rendered from in the common case: the
// template as read (its uid and resourceVersion: any change to it is a new version), the
// revision the cluster runs, the kind's interpreter, the cluster's replicas and overrides. A
// canary, a traffic split or dependencies read more than that: their Works are rendered on
// every pass ("" here).
func renderInputs(p *pass, rev int64, canary *canarySource, t workv1alpha1.TargetCluster, overriders []namedOverriders, routed []trafficSource) string {
	revs := p.bs.Revisions
	if canary != nil || len(routed) > 0 || (revs != nil && revs.Traffic != nil) || p.bs.PropagateDeps {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\x00%s\x00%d\x00%s\x00%d\x00%t", p.tmpl.GetUID(), p.tmpl.GetResourceVersion(), rev, interpret.Version(p.in), t.Replicas, p.hasReplicas)
	for _, o := range overriders {
		raw, err := json.Marshal(o.Overriders)
		if err != nil {
			return ""
		}
		fmt.Fprintf(&b, "\x00%s\x00%s", o.policy, raw)
	}
	return b.String()
}

// renderFingerprint adds what ensureWork knows to inputs: the Work's name and the Pod
// Security level its manifests are checked against.
func renderFingerprint(inputs, namespace, name, level string) [sha256.Size]byte {
	return sha256.Sum256([]byte(inputs + "\x00" + namespace + "\x00" + name + "\x00" + level))
}

// renderManifests renders what a cluster's Work carries: the template's dependencies, a routed
// canary's Service, the canary, then the template itself (last: the Work reports its status),
// each with the cluster's overrides, traffic and Pod Security checked.
func (c *Controller) renderManifests(ctx context.Context, b workv1alpha1.Binding, tmpl *unstructured.Unstructured, canary *canarySource, in interpret.Interpreter,
	hasReplicas bool, t workv1alpha1.TargetCluster, overriders []namedOverriders, routed []trafficSource, w *workv1alpha1.Work, ns, name, level string) ([]workv1alpha1.Manifest, error) {
	manifest, err := render.Render(tmpl, in, render.Target{Replicas: t.Replicas, HasReplicas: hasReplicas, WorkNamespace: ns, WorkName: name})
	if err != nil {
		return nil, &renderError{err}
	}
	if err := overrideAndCheck(manifest, overriders, t.Name, level); err != nil {
		return nil, err
	}
	for _, src := range routed {
		if src.err != nil {
			return nil, src.err
		}
		// After the overrides: the split is the release's, whatever a cluster's overrides say.
		st := traffic.StateFor(src.revs, t.Name)
		// Once a Service narrowed to a role it keeps one: falling back to the written selector
		// while the workload is briefly not healthy would send the active traffic to both stacks.
		st.PrimaryLabelled = st.PrimaryLabelled || src.primaryLabelled[t.Name] || selectsARole(w)
		if err := traffic.Render(manifest, src.targets, st); err != nil {
			return nil, &renderError{fmt.Errorf("traffic of %s for cluster %s: %w", src.workload, t.Name, err)}
		}
	}
	revs := b.BindingSpec().Revisions
	if revs != nil && revs.Traffic != nil {
		// The stable Service selects the primary's pods only, never the canary's.
		if err := render.Role(manifest, traffic.RoleStable); err != nil {
			return nil, &renderError{err}
		}
	}
	var manifests []workv1alpha1.Manifest
	if b.BindingSpec().PropagateDeps {
		if manifests, err = c.dependencies(ctx, tmpl, ns, name); err != nil {
			return nil, err
		}
	}
	if revs != nil && revs.Traffic.Routed() && tmpl.GetKind() == "Deployment" {
		svc, err := c.canaryService(ctx, tmpl.GetNamespace(), revs.Traffic, ns, name)
		if err != nil {
			return nil, err
		}
		manifests = append(manifests, svc...)
	}
	if canary != nil {
		m, err := render.Render(canary.template, in, render.Target{Replicas: canary.replicas, HasReplicas: true, WorkNamespace: ns, WorkName: name})
		if err != nil {
			return nil, &renderError{err}
		}
		if err := overrideAndCheck(m, overriders, t.Name, level); err != nil {
			return nil, err
		}
		if err := render.Canary(m); err != nil {
			return nil, &renderError{err}
		}
		raw, err := m.MarshalJSON()
		if err != nil {
			return nil, err
		}
		// Before the primary: the Work's last manifest is the template whose status it reports.
		manifests = append(manifests, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	}
	raw, err := manifest.MarshalJSON()
	if err != nil {
		return nil, err
	}
	manifests = append(manifests, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	if err := checkWorkSize(tmpl, t.Name, manifests); err != nil {
		return nil, &renderError{err}
	}
	return manifests, nil
}

// createWork creates a cluster's first Work in its execution namespace, seeded with what the
// member last got when this process has had no Work there (it just started).
func (c *Controller) createWork(ctx context.Context, b workv1alpha1.Binding, cluster string, w *workv1alpha1.Work) error {
	if err := c.ensureExecutionNamespace(ctx, w.Namespace); err != nil {
		return err
	}
	if err := c.Client.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating work %s/%s: %w", w.Namespace, w.Name, err)
	}
	// Only a first Work since the start is seeded: after one this process deleted (handed
	// back, removed) the record no longer says what the member has.
	_, had := c.hadWork.LoadOrStore(workKey(b, cluster), true)
	if st, ok := seededStatus(b, cluster, w.Generation); ok && !had {
		w.Status = st
		if err := c.Client.Status().Update(ctx, w); err != nil {
			return fmt.Errorf("seeding work %s/%s: %w", w.Namespace, w.Name, err)
		}
	}
	c.written.Store(client.ObjectKeyFromObject(w), writtenWork{w.UID, w.Generation})
	return nil
}

// MaxWorkBytes bounds the manifests of one Work. etcd refuses a write over 1.5 MiB by default
// (--max-request-bytes); keeping well under it leaves room for the Work's metadata and status,
// so an oversized template is reported on its binding instead of failing the write on every
// retry.
const MaxWorkBytes = 1280 << 10

// checkWorkSize refuses manifests too large for one Work, naming the template and the cluster.
func checkWorkSize(tmpl *unstructured.Unstructured, cluster string, manifests []workv1alpha1.Manifest) error {
	total := 0
	for _, m := range manifests {
		total += len(m.Raw)
	}
	if total <= MaxWorkBytes {
		return nil
	}
	ref := tmpl.GetName()
	if ns := tmpl.GetNamespace(); ns != "" {
		ref = ns + "/" + ref
	}
	return fmt.Errorf("%s %s with its overrides and dependencies renders %d KiB for cluster %s, over the %d KiB a Work may hold (etcd's object size limit); make the template or the objects it depends on smaller",
		tmpl.GetKind(), ref, total>>10, cluster, MaxWorkBytes>>10)
}

// dependencies renders the objects the template's pods reference. A missing one is skipped:
// the member's pods then report it, as they would in a single cluster.
func (c *Controller) dependencies(ctx context.Context, tmpl *unstructured.Unstructured, workNS, workName string) ([]workv1alpha1.Manifest, error) {
	var out []workv1alpha1.Manifest
	deps, err := c.Interpreters.For(tmpl.GroupVersionKind()).Dependencies(tmpl)
	if err != nil {
		return nil, &renderError{err}
	}
	for _, d := range deps {
		dep := &unstructured.Unstructured{}
		dep.SetAPIVersion(d.APIVersion)
		dep.SetKind(d.Kind)
		if err := c.Reader.Get(ctx, client.ObjectKey{Namespace: tmpl.GetNamespace(), Name: d.Name}, dep); err != nil {
			if meta.IsNoMatchError(err) {
				continue // a kind the control plane does not serve cannot be propagated
			}
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		if kube.IsSystemObject(dep) {
			continue
		}
		m, err := render.Render(dep, c.Interpreters.For(dep.GroupVersionKind()), render.Target{WorkNamespace: workNS, WorkName: workName})
		if err != nil {
			return nil, err
		}
		raw, err := m.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	}
	return out, nil
}

// canaryService is the canary Service a routed workload's Work carries when the team wrote
// none: a copy of the stable Service template under the canary's name, selecting the canary's
// pods. A canary Service template of that name is placed by its own binding instead.
func (c *Controller) canaryService(ctx context.Context, namespace string, t *workv1alpha1.TrafficTargets, workNS, workName string) ([]workv1alpha1.Manifest, error) {
	own := &corev1.Service{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: t.CanaryService}, own); err == nil {
		return nil, nil
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	stable := &unstructured.Unstructured{}
	stable.SetAPIVersion("v1")
	stable.SetKind("Service")
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: t.StableService}, stable); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil // the release says it waits for the stable Service
		}
		return nil, err
	}
	copied := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": t.CanaryService, "namespace": namespace}, "spec": runtimeDeepCopy(stable.Object["spec"])}}
	if labels := stable.GetLabels(); len(labels) > 0 {
		copied.SetLabels(labels)
	}
	// A plain in-cluster Service: node ports, external and load-balancer addresses belong to
	// the stable one (copied they would clash); a headless one stays headless.
	headless, _, _ := unstructured.NestedString(copied.Object, "spec", "clusterIP")
	for _, f := range []string{"clusterIP", "clusterIPs", "healthCheckNodePort", "type", "externalIPs", "externalName", "externalTrafficPolicy",
		"loadBalancerIP", "loadBalancerSourceRanges", "loadBalancerClass", "allocateLoadBalancerNodePorts"} {
		unstructured.RemoveNestedField(copied.Object, "spec", f)
	}
	if headless == "None" {
		_ = unstructured.SetNestedField(copied.Object, "None", "spec", "clusterIP")
	}
	if ports, ok, _ := unstructured.NestedSlice(copied.Object, "spec", "ports"); ok {
		for _, p := range ports {
			if m, ok := p.(map[string]any); ok {
				delete(m, "nodePort")
			}
		}
		_ = unstructured.SetNestedSlice(copied.Object, ports, "spec", "ports")
	}
	m, err := render.Render(copied, c.Interpreters.For(copied.GroupVersionKind()), render.Target{WorkNamespace: workNS, WorkName: workName})
	if err != nil {
		return nil, &renderError{err}
	}
	if err := traffic.Render(m, t, traffic.State{}); err != nil {
		return nil, &renderError{err}
	}
	raw, err := m.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}, nil
}

func runtimeDeepCopy(v any) any {
	return (&unstructured.Unstructured{Object: map[string]any{"v": v}}).DeepCopy().Object["v"]
}

// workSpecEqual says whether two Work specs ask for the same; manifests are compared as the
// objects they encode, so a new encoding of the same object (another key order) is no change.
func workSpecEqual(a, b workv1alpha1.WorkSpec) bool {
	if a.DeletionPolicy != b.DeletionPolicy || a.ConflictResolution != b.ConflictResolution || a.Suspend != b.Suspend || len(a.Manifests) != len(b.Manifests) ||
		!apiequality.Semantic.DeepEqual(a.DriftCorrection, b.DriftCorrection) {
		return false
	}
	for i := range a.Manifests {
		// Most passes render what the Work holds, byte for byte but the newline the rendered
		// JSON ends in (the store keeps manifests compacted).
		if bytes.Equal(bytes.TrimSpace(a.Manifests[i].Raw), bytes.TrimSpace(b.Manifests[i].Raw)) {
			continue
		}
		var x, y any
		if json.Unmarshal(a.Manifests[i].Raw, &x) != nil || json.Unmarshal(b.Manifests[i].Raw, &y) != nil {
			return false
		}
		if !apiequality.Semantic.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// ensureExecutionNamespace creates the cluster's execution namespace if the cache does not
// show it, once per cluster however many passes ask at once.
func (c *Controller) ensureExecutionNamespace(ctx context.Context, ns string) error {
	c.namespaceMu.Lock()
	defer c.namespaceMu.Unlock()
	err := c.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		return nil
	}
	if at, ok := c.namespaceCreated[ns]; ok && time.Since(at) < 30*time.Second {
		return nil // created just now; the cache has not seen it yet
	}
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating execution namespace %s: %w", ns, err)
	}
	if c.namespaceCreated == nil {
		c.namespaceCreated = map[string]time.Time{}
	}
	c.namespaceCreated[ns] = time.Now()
	return nil
}

// leftoverWarmup is how long after a start the Works of every binding are taken to be
// written again; before, a dependency another workload shares could look unused.
const leftoverWarmup = 30 * time.Second

// buryLeftovers finishes, after a restart, what the last process could not: a cluster whose
// lastApplied record says it got objects, that has no Work and is no longer placed (or the
// binding is going), gets a Work made from the record and deleted at once, so the executor
// removes or hands back those objects as the deletion policy says. It says whether it buried
// any, or how long to wait before it may.
func (c *Controller) buryLeftovers(ctx context.Context, b workv1alpha1.Binding, works []workv1alpha1.Work) (bool, time.Duration, error) {
	bs := b.BindingSpec()
	deleting := !b.GetDeletionTimestamp().IsZero()
	has := map[string]bool{}
	for i := range works {
		has[works[i].Labels[workv1alpha1.ClusterLabel]] = true
	}
	buried := false
	for _, cs := range b.BindingStatus().Clusters {
		if cs.LastApplied == nil || len(cs.LastApplied.Objects) == 0 || has[cs.Cluster] {
			continue
		}
		if _, had := c.hadWork.Load(workKey(b, cs.Cluster)); had {
			continue
		}
		placed := slices.ContainsFunc(bs.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == cs.Cluster })
		unmanaged := slices.Contains(bs.UnmanagedClusters, cs.Cluster)
		if placed && !unmanaged && !deleting {
			continue // its Work is written again below
		}
		if wait := leftoverWarmup - time.Since(c.started); wait > 0 {
			return false, wait, nil
		}
		policy := bs.DeletionPolicy
		if unmanaged {
			policy = workv1alpha1.DeletionRelease
		}
		w := &workv1alpha1.Work{
			ObjectMeta: metav1.ObjectMeta{Namespace: kube.ExecutionNamespacePrefix + cs.Cluster, Name: WorkName(b), Finalizers: []string{names.ExecutorFinalizer},
				Labels: map[string]string{workv1alpha1.BindingNamespaceLabel: b.GetNamespace(), workv1alpha1.BindingNameLabel: b.GetName(), workv1alpha1.ClusterLabel: cs.Cluster}},
			Spec: workv1alpha1.WorkSpec{DeletionPolicy: policy},
		}
		for _, o := range cs.LastApplied.Objects {
			raw, err := json.Marshal(map[string]any{"apiVersion": o.APIVersion, "kind": o.Kind, "metadata": map[string]any{"name": o.Name, "namespace": o.Namespace}})
			if err != nil {
				return false, 0, err
			}
			w.Spec.Manifests = append(w.Spec.Manifests, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
		}
		c.hadWork.Store(workKey(b, cs.Cluster), true)
		if err := c.Client.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, 0, err
		}
		if err := c.Client.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
			return false, 0, err
		}
		buried = true
	}
	return buried, 0, nil
}
