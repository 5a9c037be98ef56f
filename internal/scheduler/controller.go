package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/match"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/replicas"
)

// Controller writes each binding's clusters: filter (Ready, affinity, taints, served kind),
// spread, then divide or duplicate the replicas. It re-schedules when clusters or policies
// change, and writes only spec.clusters, spec.gracefulEvictionTasks and its outcome
// (ScheduleAnnotation), in one request. Bindings of one group follow the group's lead: the
// member with the most replicas is scheduled as usual (on clusters that serve every kind of
// the group) and the others take its clusters and its division.
type Controller struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Interpreters answers what a kind means; nil serves the built-in interpreters only.
	Interpreters *interpret.Registry
}

// groupIndex indexes bindings by spec.group.
const groupIndex = "spec.group"

// SetupWithManager registers the controller.
func (c *Controller) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	for _, obj := range []client.Object{&workv1alpha1.ResourceBinding{}, &workv1alpha1.ClusterResourceBinding{}} {
		if err := mgr.GetFieldIndexer().IndexField(ctx, obj, groupIndex, func(o client.Object) []string {
			if g := o.(workv1alpha1.Binding).BindingSpec().Group; g != "" {
				return []string{g}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	all := handler.EnqueueRequestsFromMapFunc(c.allBindings)
	// A policy's placement is read by its own bindings only (the detector moves a template to
	// another policy by rewriting the binding's spec).
	byPolicy := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return kube.BindingsOfPolicy(ctx, c.Client, o)
	})
	group := handler.EnqueueRequestsFromMapFunc(c.groupOf)
	// Only a binding's spec is a scheduling input: its status writes (the binding
	// controller's, several per release step) wake the scheduler no more.
	specChanged := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	return ctrl.NewControllerManagedBy(mgr).Named("scheduler").
		For(&workv1alpha1.ResourceBinding{}, specChanged).
		Watches(&workv1alpha1.ResourceBinding{}, group, specChanged).
		Watches(&workv1alpha1.ClusterResourceBinding{}, &handler.EnqueueRequestForObject{}, specChanged).
		Watches(&workv1alpha1.ClusterResourceBinding{}, group, specChanged).
		Watches(&clusterv1alpha1.Cluster{}, all, builder.WithPredicates(schedulingInputsChanged)).
		// A Team's allowed clusters bound every binding of its namespace.
		Watches(&tenancyv1alpha1.Team{}, handler.EnqueueRequestsFromMapFunc(c.bindingsInNamespace)).
		Watches(&policyv1alpha1.PropagationPolicy{}, byPolicy).
		Watches(&policyv1alpha1.ClusterPropagationPolicy{}, byPolicy).
		WithOptions(controller.Options{MaxConcurrentReconciles: 16}). // passes wait on the binding patch
		Complete(kube.RequeueConflicts(c))
}

// schedulingInputsChanged passes Cluster updates that can change a placement: spec (taints),
// labels, readiness and served APIs. Resource-summary changes do not re-schedule everything
// (capacity is read when a binding is scheduled for another reason).
var schedulingInputsChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*clusterv1alpha1.Cluster)
	n, ok2 := e.ObjectNew.(*clusterv1alpha1.Cluster)
	if !ok1 || !ok2 {
		return true
	}
	return o.Generation != n.Generation || !apiequality.Semantic.DeepEqual(o.Labels, n.Labels) ||
		isReady(o) != isReady(n) || !apiequality.Semantic.DeepEqual(o.Status.APIEnablements, n.Status.APIEnablements) ||
		!n.DeletionTimestamp.IsZero()
}}

func (c *Controller) allBindings(ctx context.Context, _ client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	list := &workv1alpha1.ResourceBindingList{}
	if err := c.Client.List(ctx, list); err == nil {
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	clusterList := &workv1alpha1.ClusterResourceBindingList{}
	if err := c.Client.List(ctx, clusterList); err == nil {
		for i := range clusterList.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&clusterList.Items[i])})
		}
	}
	return reqs
}

// groupOf re-schedules a binding's whole group when one of them changes: the lead may change.
func (c *Controller) groupOf(ctx context.Context, o client.Object) []reconcile.Request {
	b, ok := o.(workv1alpha1.Binding)
	if !ok || b.BindingSpec().Group == "" {
		return nil
	}
	members, err := c.group(ctx, b)
	if err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, m := range members {
		if m.GetName() != b.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(m)})
		}
	}
	return reqs
}

// group lists the live bindings of b's group and policy, b included, lead first: the most
// replicas, then by kind and name.
func (c *Controller) group(ctx context.Context, b workv1alpha1.Binding) ([]workv1alpha1.Binding, error) {
	var members []workv1alpha1.Binding
	spec := b.BindingSpec()
	if b.GetNamespace() == "" {
		list := &workv1alpha1.ClusterResourceBindingList{}
		if err := c.Client.List(ctx, list, client.MatchingFields{groupIndex: spec.Group}); err != nil {
			return nil, err
		}
		for i := range list.Items {
			members = append(members, &list.Items[i])
		}
	} else {
		list := &workv1alpha1.ResourceBindingList{}
		if err := c.Client.List(ctx, list, client.InNamespace(b.GetNamespace()), client.MatchingFields{groupIndex: spec.Group}); err != nil {
			return nil, err
		}
		for i := range list.Items {
			members = append(members, &list.Items[i])
		}
	}
	kept := members[:0]
	for _, m := range members {
		if m.GetDeletionTimestamp().IsZero() && m.BindingSpec().PolicyRef == spec.PolicyRef {
			kept = append(kept, m)
		}
	}
	sort.Slice(kept, func(i, j int) bool {
		a, b := kept[i].BindingSpec(), kept[j].BindingSpec()
		if a.Replicas != b.Replicas {
			return a.Replicas > b.Replicas
		}
		if a.Resource.Kind != b.Resource.Kind {
			return a.Resource.Kind < b.Resource.Kind
		}
		return a.Resource.Name < b.Resource.Name
	})
	return kept, nil
}

// The scheduler writes the clusters of bindings from Clusters' labels, taints and capacity.
// +kubebuilder:rbac:groups=work.flotilla.dev,resources=resourcebindings;clusterresourcebindings,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.flotilla.dev,resources=clusters,verbs=get;list;watch

// Reconcile schedules one binding.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := workv1alpha1.NewBinding(req.Namespace, req.Name)
	if err := c.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}
	bs := b.BindingSpec()
	spec, err := c.policySpec(ctx, bs.PolicyRef)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil // the detector removes bindings whose policy is gone
		}
		return ctrl.Result{}, err
	}
	clusters := &clusterv1alpha1.ClusterList{}
	if err := c.Client.List(ctx, clusters); err != nil {
		return ctrl.Result{}, err
	}
	allowed, teamNote, err := c.teamAllowed(ctx, b.GetNamespace(), clusters.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	clusters.Items = allowed
	var result []workv1alpha1.TargetCluster
	var reason string
	if bs.Group == "" {
		result, reason, err = c.schedule(ctx, b, []schema.GroupVersionKind{gvkOf(bs)}, spec, clusters.Items)
	} else {
		result, reason, err = c.scheduleInGroup(ctx, b, spec, clusters.Items)
	}
	// The outcome travels with the clusters, in one write; the binding controller reports it
	// as the Scheduled condition.
	outcome := workv1alpha1.Schedule{Placed: err == nil, Reason: "Scheduled", Message: reason + teamNote, Generation: b.GetGeneration()}
	patch := client.MergeFromWithOptions(b.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	moved, specChanged := false, false
	if err != nil {
		outcome.Reason, outcome.Message = "Unschedulable", err.Error()+teamNote
	} else {
		tasks := evictions(bs, result, clusters.Items, spec, c.divided(gvkOf(bs), spec), metav1.Now())
		if (!apiequality.Semantic.DeepEqual(result, bs.Clusters) && !(len(result) == 0 && len(bs.Clusters) == 0)) ||
			!apiequality.Semantic.DeepEqual(tasks, bs.GracefulEvictionTasks) && !(len(tasks) == 0 && len(bs.GracefulEvictionTasks) == 0) {
			moved, specChanged = len(bs.Clusters) > 0, true
			bs.Clusters = result
			bs.GracefulEvictionTasks = tasks
			outcome.Generation++ // the spec change makes the next generation, which this outcome is of
		}
	}
	old, had := workv1alpha1.ScheduleOf(b)
	outcomeChanged := !had || old.Placed != outcome.Placed || old.Reason != outcome.Reason || old.Message != outcome.Message
	if !specChanged && !outcomeChanged && old.Generation == b.GetGeneration() {
		return ctrl.Result{}, nil
	}
	raw, jerr := json.Marshal(outcome)
	if jerr != nil {
		return ctrl.Result{}, jerr
	}
	annotations := b.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[workv1alpha1.ScheduleAnnotation] = string(raw)
	b.SetAnnotations(annotations)
	if perr := c.Client.Patch(ctx, b, patch); perr != nil {
		return ctrl.Result{}, perr
	}
	switch {
	case err != nil && outcomeChanged && c.Recorder != nil:
		c.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "Unschedulable", "Schedule", "%s", err.Error())
	case moved && c.Recorder != nil:
		// A first placement is told by the Scheduled condition; an event per new template
		// would be one more control-plane write each. Moving a placed workload is news.
		c.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "Rescheduled", "Schedule", "%s", reason)
	}
	return ctrl.Result{}, nil
}

func gvkOf(bs *workv1alpha1.ResourceBindingSpec) schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(bs.Resource.APIVersion, bs.Resource.Kind)
}

// scheduleInGroup schedules the group's lead and derives b's clusters from the lead's: the
// same clusters, and for Divided replicas the same proportions.
func (c *Controller) scheduleInGroup(ctx context.Context, b workv1alpha1.Binding, spec *policyv1alpha1.PropagationSpec, clusters []clusterv1alpha1.Cluster) ([]workv1alpha1.TargetCluster, string, error) {
	members, err := c.group(ctx, b)
	if err != nil {
		return nil, "", err
	}
	if len(members) == 0 {
		members = []workv1alpha1.Binding{b}
	}
	lead := members[0]
	var kinds []schema.GroupVersionKind
	for _, m := range members {
		kinds = append(kinds, gvkOf(m.BindingSpec()))
	}
	leadClusters, reason, err := c.schedule(ctx, lead, kinds, spec, clusters)
	if err != nil {
		return nil, "", fmt.Errorf("group %s: %w", b.BindingSpec().Group, err)
	}
	leadSpec := lead.BindingSpec()
	reason = fmt.Sprintf("group %s led by %s %s: %s", b.BindingSpec().Group, leadSpec.Resource.Kind, leadSpec.Resource.Name, reason)
	if lead.GetName() == b.GetName() {
		return leadClusters, reason, nil
	}
	bs := b.BindingSpec()
	_, hasReplicas, _ := c.interpretReplicas(gvkOf(bs))
	rs := spec.Placement.ReplicaScheduling
	divided := hasReplicas && rs != nil && rs.Type == policyv1alpha1.ReplicaSchedulingDivided && leadSpec.Replicas > 0
	out := make([]workv1alpha1.TargetCluster, 0, len(leadClusters))
	if !divided {
		for _, t := range leadClusters {
			out = append(out, workv1alpha1.TargetCluster{Name: t.Name, Replicas: bs.Replicas})
		}
		return out, reason, nil
	}
	targets := make([]replicas.Target, len(leadClusters))
	for i, t := range leadClusters {
		targets[i] = replicas.Target{Name: t.Name, Weight: int64(t.Replicas), Available: -1}
	}
	current := replicas.Assignment{}
	for _, t := range bs.Clusters {
		current[t.Name] = t.Replicas
	}
	assignment, err := replicas.DivideByWeight(bs.Replicas, targets, current)
	if err != nil {
		return nil, "", err
	}
	for _, t := range leadClusters {
		if n, ok := assignment[t.Name]; ok || bs.Replicas == 0 {
			out = append(out, workv1alpha1.TargetCluster{Name: t.Name, Replicas: n})
		}
	}
	return out, reason, nil
}

func (c *Controller) policySpec(ctx context.Context, ref workv1alpha1.PolicyReference) (*policyv1alpha1.PropagationSpec, error) {
	if ref.Kind == "ClusterPropagationPolicy" {
		p := &policyv1alpha1.ClusterPropagationPolicy{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: ref.Name}, p); err != nil {
			return nil, err
		}
		return &p.Spec, nil
	}
	p := &policyv1alpha1.PropagationPolicy{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, p); err != nil {
		return nil, err
	}
	return &p.Spec, nil
}

// schedule returns the target clusters sorted by name and a human reason. Clusters must serve
// every one of kinds (the binding's own, or its group's).
func (c *Controller) schedule(ctx context.Context, b workv1alpha1.Binding, kinds []schema.GroupVersionKind, spec *policyv1alpha1.PropagationSpec, clusters []clusterv1alpha1.Cluster) ([]workv1alpha1.TargetCluster, string, error) {
	bs := b.BindingSpec()
	gvk := gvkOf(bs)
	usable, why := c.filter(bs, gvk, kinds, spec, clusters)
	candidates, used := byAffinity(spec, usable)
	if len(candidates) == 0 {
		return nil, "", fmt.Errorf("no cluster matches the placement (%s; the rest excluded by cluster affinity)", why)
	}
	candidates, err := spread(spec.Placement.SpreadConstraints, candidates)
	if err != nil {
		return nil, "", err
	}
	assignment, hasReplicas, err := c.assign(ctx, bs, gvk, spec, candidates)
	if err != nil {
		return nil, "", err
	}
	var out []workv1alpha1.TargetCluster
	var parts []string
	for _, cl := range candidates {
		n, ok := assignment[cl.Name]
		if !ok && hasReplicas && bs.Replicas > 0 {
			continue
		}
		out = append(out, workv1alpha1.TargetCluster{Name: cl.Name, Replicas: n})
		parts = append(parts, fmt.Sprintf("%s=%d", cl.Name, n))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	sort.Strings(parts)
	reason := fmt.Sprintf("placed on %d of %d clusters: %s", len(out), len(clusters), strings.Join(parts, ", "))
	if used != "" {
		reason += " (affinity " + used + ")"
	}
	return out, reason, nil
}

// filter keeps the clusters the binding may run on (Ready, not tainted against it, serving
// its kinds, not failed over from or handed back), and says in words why the others are out.
func (c *Controller) filter(bs *workv1alpha1.ResourceBindingSpec, gvk schema.GroupVersionKind, kinds []schema.GroupVersionKind, spec *policyv1alpha1.PropagationSpec, clusters []clusterv1alpha1.Cluster) ([]clusterv1alpha1.Cluster, string) {
	divided := c.divided(gvk, spec)
	assigned := map[string]bool{}
	for _, t := range bs.Clusters {
		assigned[t.Name] = true
	}
	var usable []clusterv1alpha1.Cluster
	var notReady, tainted, notServing, failed, unmanaged int
	for _, cl := range clusters {
		switch {
		case !cl.DeletionTimestamp.IsZero():
			notReady++
		case bs.Excluded(cl.Name):
			failed++
		case slices.Contains(bs.UnmanagedClusters, cl.Name):
			unmanaged++
		case kube.Unreachable(&cl) && !toleratesUnreachable(spec.Placement.ClusterTolerations):
			// Divided replicas move; a Duplicated workload stays, reported lost.
			if assigned[cl.Name] && !divided {
				usable = append(usable, cl)
			} else {
				tainted++
			}
		case !isReady(&cl):
			// A placement stays on a cluster that is only briefly not Ready; failover moves it
			// once the grace period taints the cluster.
			if assigned[cl.Name] {
				usable = append(usable, cl)
			} else {
				notReady++
			}
		case !tolerates(spec.Placement.ClusterTolerations, withoutUnreachable(cl.Spec.Taints)):
			tainted++
		case !servesAll(&cl, kinds):
			notServing++
		default:
			usable = append(usable, cl)
		}
	}
	why := fmt.Sprintf("%d clusters: %d not Ready, %d tainted, %d not serving %s", len(clusters), notReady, tainted, notServing, gvk.Kind)
	if failed > 0 {
		why += fmt.Sprintf(", %d failed over from", failed)
	}
	if unmanaged > 0 {
		why += fmt.Sprintf(", %d handed back to unmanaged", unmanaged)
	}
	return usable, why
}

// byAffinity is the usable clusters the first cluster affinity term that matches any selects,
// and that term's name.
func byAffinity(spec *policyv1alpha1.PropagationSpec, usable []clusterv1alpha1.Cluster) ([]clusterv1alpha1.Cluster, string) {
	terms := []policyv1alpha1.ClusterAffinityTerm{{AffinityName: "", ClusterAffinity: policyv1alpha1.ClusterAffinity{}}}
	if a := spec.Placement.ClusterAffinity; a != nil {
		terms = []policyv1alpha1.ClusterAffinityTerm{{ClusterAffinity: *a}}
	} else if len(spec.Placement.ClusterAffinities) > 0 {
		terms = spec.Placement.ClusterAffinities
	}
	for _, term := range terms {
		var candidates []clusterv1alpha1.Cluster
		for _, cl := range usable {
			if match.Cluster(&term.ClusterAffinity, &cl) {
				candidates = append(candidates, cl)
			}
		}
		if len(candidates) > 0 {
			return candidates, term.AffinityName
		}
	}
	return nil, ""
}

// assign gives each candidate its replicas: all of them (Duplicated, or a kind without
// replicas), by static weight, or by capacity (Weighted or Aggregated), moving as few as
// possible from the current placement.
func (c *Controller) assign(ctx context.Context, bs *workv1alpha1.ResourceBindingSpec, gvk schema.GroupVersionKind, spec *policyv1alpha1.PropagationSpec,
	candidates []clusterv1alpha1.Cluster) (replicas.Assignment, bool, error) {
	current := replicas.Assignment{}
	for _, t := range bs.Clusters {
		current[t.Name] = t.Replicas
	}
	_, hasReplicas, _ := c.interpretReplicas(gvk)
	rs := spec.Placement.ReplicaScheduling
	switch {
	case !hasReplicas || rs == nil || rs.Type == policyv1alpha1.ReplicaSchedulingDuplicated:
		assignment := replicas.Assignment{}
		for _, cl := range candidates {
			assignment[cl.Name] = bs.Replicas
		}
		return assignment, hasReplicas, nil
	case rs.DivisionPreference == policyv1alpha1.DivisionWeighted && rs.WeightPreference != nil && len(rs.WeightPreference.StaticWeightList) > 0:
		targets := make([]replicas.Target, len(candidates))
		for i, cl := range candidates {
			targets[i] = replicas.Target{Name: cl.Name, Weight: staticWeight(rs.WeightPreference.StaticWeightList, &cl), Available: -1}
		}
		assignment, err := replicas.DivideByWeight(bs.Replicas, targets, current)
		return assignment, hasReplicas, err
	}
	// Capacity-based: Weighted by the replicas available in each cluster, or Aggregated.
	targets, err := c.capacityTargets(ctx, bs, candidates, current)
	if err != nil {
		return nil, hasReplicas, err
	}
	var assignment replicas.Assignment
	if rs.DivisionPreference == policyv1alpha1.DivisionAggregated {
		assignment, err = replicas.Aggregate(bs.Replicas, targets, current)
	} else {
		assignment, err = replicas.DivideByCapacity(bs.Replicas, targets, current)
	}
	return assignment, hasReplicas, err
}

// divided reports whether the binding's replicas are divided over clusters (not duplicated).
func (c *Controller) divided(gvk schema.GroupVersionKind, spec *policyv1alpha1.PropagationSpec) bool {
	_, hasReplicas, _ := c.interpretReplicas(gvk)
	rs := spec.Placement.ReplicaScheduling
	return hasReplicas && rs != nil && rs.Type == policyv1alpha1.ReplicaSchedulingDivided
}

func toleratesUnreachable(tols []policyv1alpha1.Toleration) bool {
	return tolerates(tols, []clusterv1alpha1.Taint{{Key: names.UnreachableTaintKey, Effect: clusterv1alpha1.TaintEffectNoExecute}})
}

func withoutUnreachable(taints []clusterv1alpha1.Taint) []clusterv1alpha1.Taint {
	out := make([]clusterv1alpha1.Taint, 0, len(taints))
	for _, t := range taints {
		if t.Key != names.UnreachableTaintKey || t.Effect != clusterv1alpha1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// evictions returns the eviction tasks after a new result: clusters whose Divided replicas
// moved off because the cluster is unreachable get a task (unless the purge mode is
// Immediately); tasks of clusters placed again end; other tasks stay.
func evictions(bs *workv1alpha1.ResourceBindingSpec, result []workv1alpha1.TargetCluster, clusters []clusterv1alpha1.Cluster,
	spec *policyv1alpha1.PropagationSpec, divided bool, now metav1.Time) []workv1alpha1.GracefulEvictionTask {
	placed := map[string]bool{}
	for _, t := range result {
		placed[t.Name] = true
	}
	var tasks []workv1alpha1.GracefulEvictionTask
	for _, t := range bs.GracefulEvictionTasks {
		if !placed[t.Cluster] {
			tasks = append(tasks, t)
		}
	}
	if !divided {
		return tasks
	}
	mode, grace := workv1alpha1.PurgeGraceful, int32(600)
	if f := spec.Failover; f != nil && f.Cluster != nil {
		if f.Cluster.PurgeMode != "" {
			mode = string(f.Cluster.PurgeMode)
		}
		if f.Cluster.GracePeriodSeconds > 0 {
			grace = f.Cluster.GracePeriodSeconds
		}
	}
	unreachable := map[string]bool{}
	for i := range clusters {
		if kube.Unreachable(&clusters[i]) {
			unreachable[clusters[i].Name] = true
		}
	}
	for _, t := range bs.Clusters {
		if placed[t.Name] || !unreachable[t.Name] || mode == workv1alpha1.PurgeImmediately {
			continue
		}
		if _, ok := bs.EvictionFor(t.Name); ok {
			continue
		}
		tasks = append(tasks, workv1alpha1.GracefulEvictionTask{Cluster: t.Name, Replicas: t.Replicas, Reason: workv1alpha1.EvictionReasonClusterFailover,
			Message:   fmt.Sprintf("cluster %s is unreachable; its %d replicas moved to the other clusters", t.Name, t.Replicas),
			PurgeMode: mode, GracePeriodSeconds: grace, CreationTimestamp: now})
	}
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].Cluster < tasks[j].Cluster })
	return tasks
}

// interpretReplicas tells whether the kind has replicas; a customization that scripts
// GetReplicas says it has, whatever it makes of the empty probe.
func (c *Controller) interpretReplicas(gvk schema.GroupVersionKind) (int32, bool, error) {
	probe := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "spec": map[string]any{}}}
	return c.Interpreters.For(gvk).GetReplicas(probe)
}

// capacityTargets weighs clusters by how many more pods of the template fit, counting the
// replicas a cluster holds now as fitting.
func (c *Controller) capacityTargets(ctx context.Context, bs *workv1alpha1.ResourceBindingSpec, candidates []clusterv1alpha1.Cluster, current replicas.Assignment) ([]replicas.Target, error) {
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion(bs.Resource.APIVersion)
	tmpl.SetKind(bs.Resource.Kind)
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: bs.Resource.Namespace, Name: bs.Resource.Name}, tmpl); err != nil {
		return nil, err
	}
	perPod, err := c.Interpreters.For(tmpl.GroupVersionKind()).ReplicaRequests(tmpl)
	if err != nil {
		return nil, fmt.Errorf("requests of one replica of %s %s: %w", tmpl.GetKind(), tmpl.GetName(), err)
	}
	targets := make([]replicas.Target, 0, len(candidates))
	for _, cl := range candidates {
		rs := cl.Status.ResourceSummary
		if rs == nil {
			return nil, fmt.Errorf("cluster %s has no resource summary yet; capacity-based division waits for it", cl.Name)
		}
		targets = append(targets, replicas.Target{Name: cl.Name, Available: replicas.AvailableReplicas(rs.Allocatable, rs.Requested, perPod) + int64(current[cl.Name])})
	}
	return targets, nil
}

func isReady(cl *clusterv1alpha1.Cluster) bool {
	return meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ConditionReady)
}

func servesAll(cl *clusterv1alpha1.Cluster, kinds []schema.GroupVersionKind) bool {
	for _, k := range kinds {
		if !kube.Serves(cl, k) {
			return false
		}
	}
	return true
}

// tolerates: every NoSchedule and NoExecute taint must be tolerated; PreferNoSchedule never
// excludes a cluster. The matching is Kubernetes' own, the one the kube-scheduler's
// TaintToleration filter runs (component-helpers), on the core types. Flotilla's Taint and
// Toleration keep their own structs only because the CRDs validate their fields (key pattern,
// effect and operator enums, Exists takes no value), which the core structs carry no markers
// for; their fields and meanings are the core ones.
func tolerates(tols []policyv1alpha1.Toleration, taints []clusterv1alpha1.Taint) bool {
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), coreTaints(taints), coreTolerations(tols),
		func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false)
	return !untolerated
}

// coreTolerations converts tolerations to the core type. An Equal toleration without a key,
// which the core API refuses and the CRD accepts, tolerates nothing, so it is left out (the
// core matching would read it as "any key with this value").
func coreTolerations(tols []policyv1alpha1.Toleration) []corev1.Toleration {
	out := make([]corev1.Toleration, 0, len(tols))
	for _, t := range tols {
		if t.Key == "" && t.Operator != policyv1alpha1.TolerationOpExists {
			continue
		}
		out = append(out, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return out
}

func coreTaints(taints []clusterv1alpha1.Taint) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(taints))
	for _, t := range taints {
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect), TimeAdded: t.TimeAdded})
	}
	return out
}

func staticWeight(list []policyv1alpha1.StaticClusterWeight, cl *clusterv1alpha1.Cluster) int64 {
	for _, w := range list {
		if match.Cluster(&w.TargetCluster, cl) {
			return w.Weight
		}
	}
	return 0
}

// spread keeps candidates from at least minGroups and at most maxGroups groups; with a
// maximum it keeps the groups with the most clusters (then by group name).
func spread(constraints []policyv1alpha1.SpreadConstraint, candidates []clusterv1alpha1.Cluster) ([]clusterv1alpha1.Cluster, error) {
	for _, sc := range constraints {
		key := sc.SpreadByLabel
		switch sc.SpreadByField {
		case "region", "zone":
			key = string(sc.SpreadByField)
		case "cluster":
			key = ""
		}
		groups := map[string][]clusterv1alpha1.Cluster{}
		for _, cl := range candidates {
			g := cl.Name
			if key != "" {
				v, ok := cl.Labels[key]
				if !ok {
					continue // a cluster without the label belongs to no group
				}
				g = v
			}
			groups[g] = append(groups[g], cl)
		}
		if int32(len(groups)) < sc.MinGroups {
			by := key
			if by == "" {
				by = "cluster"
			}
			return nil, fmt.Errorf("spread by %s needs at least %d groups, the candidate clusters form %d", by, sc.MinGroups, len(groups))
		}
		names := make([]string, 0, len(groups))
		for g := range groups {
			names = append(names, g)
		}
		sort.Slice(names, func(i, j int) bool {
			if len(groups[names[i]]) != len(groups[names[j]]) {
				return len(groups[names[i]]) > len(groups[names[j]])
			}
			return names[i] < names[j]
		})
		if sc.MaxGroups > 0 && int32(len(names)) > sc.MaxGroups {
			names = names[:sc.MaxGroups]
		}
		var kept []clusterv1alpha1.Cluster
		for _, g := range names {
			kept = append(kept, groups[g]...)
		}
		sort.Slice(kept, func(i, j int) bool { return kept[i].Name < kept[j].Name })
		candidates = kept
	}
	return candidates, nil
}

// teamAllowed keeps the clusters the namespace's Team allows (all when there is no Team or it
// sets no clusters) and says which it left out, for the Scheduled condition.
func (c *Controller) teamAllowed(ctx context.Context, namespace string, clusters []clusterv1alpha1.Cluster) ([]clusterv1alpha1.Cluster, string, error) {
	if namespace == "" {
		return clusters, "", nil
	}
	team := &tenancyv1alpha1.Team{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: tenancyv1alpha1.TeamName}, team); err != nil {
		return clusters, "", client.IgnoreNotFound(err)
	}
	if team.Spec.Clusters == nil {
		return clusters, "", nil
	}
	sel, err := metav1.LabelSelectorAsSelector(team.Spec.Clusters.Selector.AsMetav1())
	if err != nil {
		return nil, "", fmt.Errorf("team %s: spec.clusters.selector: %w", namespace, err)
	}
	var allowed []clusterv1alpha1.Cluster
	var outside []string
	for _, cl := range clusters {
		if sel.Matches(labels.Set(cl.Labels)) {
			allowed = append(allowed, cl)
		} else {
			outside = append(outside, cl.Name)
		}
	}
	if len(outside) == 0 {
		return allowed, "", nil
	}
	sort.Strings(outside)
	if len(outside) > 10 {
		outside = append(outside[:10], fmt.Sprintf("and %d more", len(outside)-10))
	}
	return allowed, fmt.Sprintf("; team %s allows only clusters matching %s, so never %s", namespace, sel, strings.Join(outside, ", ")), nil
}

// bindingsInNamespace lists the bindings of a Team's namespace.
func (c *Controller) bindingsInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	list := &workv1alpha1.ResourceBindingList{}
	if err := c.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
