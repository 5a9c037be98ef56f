package scheduler

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	resourcehelper "k8s.io/component-helpers/resource"
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
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/match"
)

// Controller writes each binding's clusters: filter (Ready, affinity, taints, served kind),
// spread, then divide or duplicate the replicas. It re-schedules when clusters or policies
// change, and writes only spec.clusters and the Scheduled condition.
type Controller struct {
	Client   client.Client
	Recorder events.EventRecorder
}

// SetupWithManager registers the controller.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(c.allBindings)
	return ctrl.NewControllerManagedBy(mgr).Named("scheduler").
		For(&workv1alpha1.ResourceBinding{}).
		Watches(&clusterv1alpha1.Cluster{}, all, builder.WithPredicates(schedulingInputsChanged)).
		Watches(&policyv1alpha1.PropagationPolicy{}, all).
		Watches(&policyv1alpha1.ClusterPropagationPolicy{}, all).
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		Complete(c)
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
	list := &workv1alpha1.ResourceBindingList{}
	if err := c.Client.List(ctx, list); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i, b := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&b)}
	}
	return reqs
}

// Reconcile schedules one binding.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &workv1alpha1.ResourceBinding{}
	if err := c.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	spec, err := c.policySpec(ctx, b.Spec.PolicyRef)
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
	result, reason, err := c.schedule(ctx, b, spec, clusters.Items)
	before := b.DeepCopy()
	cond := metav1.Condition{Type: workv1alpha1.ConditionScheduled, ObservedGeneration: b.Generation}
	if err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Unschedulable", err.Error()
	} else {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "Scheduled", reason
		if !apiequality.Semantic.DeepEqual(result, b.Spec.Clusters) && !(len(result) == 0 && len(b.Spec.Clusters) == 0) {
			patch := client.MergeFrom(b.DeepCopy())
			b.Spec.Clusters = result
			if err := c.Client.Patch(ctx, b, patch); err != nil {
				return ctrl.Result{}, err
			}
			if c.Recorder != nil {
				c.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "Scheduled", "Schedule", "%s", reason)
			}
		}
	}
	old := meta.FindStatusCondition(before.Status.Conditions, workv1alpha1.ConditionScheduled)
	if old == nil || old.Status != cond.Status || old.Message != cond.Message {
		if err != nil && c.Recorder != nil {
			c.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "Unschedulable", "Schedule", "%s", err.Error())
		}
		statusPatch := client.MergeFrom(b.DeepCopy())
		meta.SetStatusCondition(&b.Status.Conditions, cond)
		if perr := c.Client.Status().Patch(ctx, b, statusPatch); perr != nil {
			return ctrl.Result{}, perr
		}
	}
	return ctrl.Result{}, nil
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

// schedule returns the target clusters sorted by name and a human reason.
func (c *Controller) schedule(ctx context.Context, b *workv1alpha1.ResourceBinding, spec *policyv1alpha1.PropagationSpec, clusters []clusterv1alpha1.Cluster) ([]workv1alpha1.TargetCluster, string, error) {
	gvk := schema.FromAPIVersionAndKind(b.Spec.Resource.APIVersion, b.Spec.Resource.Kind)
	var usable []clusterv1alpha1.Cluster
	var notReady, tainted, notServing int
	for _, cl := range clusters {
		switch {
		case !cl.DeletionTimestamp.IsZero() || !isReady(&cl):
			notReady++
		case !tolerates(spec.Placement.ClusterTolerations, cl.Spec.Taints):
			tainted++
		case !serves(&cl, gvk):
			notServing++
		default:
			usable = append(usable, cl)
		}
	}
	why := fmt.Sprintf("%d clusters: %d not Ready, %d tainted, %d not serving %s", len(clusters), notReady, tainted, notServing, gvk.Kind)

	terms := []policyv1alpha1.ClusterAffinityTerm{{AffinityName: "", ClusterAffinity: policyv1alpha1.ClusterAffinity{}}}
	if a := spec.Placement.ClusterAffinity; a != nil {
		terms = []policyv1alpha1.ClusterAffinityTerm{{ClusterAffinity: *a}}
	} else if len(spec.Placement.ClusterAffinities) > 0 {
		terms = spec.Placement.ClusterAffinities
	}
	var candidates []clusterv1alpha1.Cluster
	var used string
	for _, term := range terms {
		candidates = candidates[:0]
		for _, cl := range usable {
			if match.Cluster(&term.ClusterAffinity, &cl) {
				candidates = append(candidates, cl)
			}
		}
		if len(candidates) > 0 {
			used = term.AffinityName
			break
		}
	}
	if len(candidates) == 0 {
		return nil, "", fmt.Errorf("no cluster matches the placement (%s; the rest excluded by cluster affinity)", why)
	}
	candidates, err := spread(spec.Placement.SpreadConstraints, candidates)
	if err != nil {
		return nil, "", err
	}

	current := Assignment{}
	for _, t := range b.Spec.Clusters {
		current[t.Name] = t.Replicas
	}
	_, hasReplicas, _ := interpretReplicas(gvk)
	rs := spec.Placement.ReplicaScheduling
	var assignment Assignment
	switch {
	case !hasReplicas || rs == nil || rs.Type == policyv1alpha1.ReplicaSchedulingDuplicated:
		assignment = Assignment{}
		for _, cl := range candidates {
			assignment[cl.Name] = b.Spec.Replicas
		}
	case rs.DivisionPreference == policyv1alpha1.DivisionWeighted && rs.WeightPreference != nil && len(rs.WeightPreference.StaticWeightList) > 0:
		targets := make([]Target, len(candidates))
		for i, cl := range candidates {
			targets[i] = Target{Name: cl.Name, Weight: staticWeight(rs.WeightPreference.StaticWeightList, &cl), Available: -1}
		}
		assignment, err = DivideByWeight(b.Spec.Replicas, targets, current)
	default: // capacity-based: Weighted by AvailableReplicas, or Aggregated
		targets, terr := c.capacityTargets(ctx, b, candidates, current)
		if terr != nil {
			return nil, "", terr
		}
		if rs.DivisionPreference == policyv1alpha1.DivisionAggregated {
			assignment, err = Aggregate(b.Spec.Replicas, targets, current)
		} else {
			assignment, err = DivideByCapacity(b.Spec.Replicas, targets, current)
		}
	}
	if err != nil {
		return nil, "", err
	}
	var out []workv1alpha1.TargetCluster
	var parts []string
	for _, cl := range candidates {
		n, ok := assignment[cl.Name]
		if !ok && hasReplicas && b.Spec.Replicas > 0 {
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

func interpretReplicas(gvk schema.GroupVersionKind) (int32, bool, error) {
	probe := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	return interpret.For(gvk.GroupKind()).GetReplicas(probe)
}

// capacityTargets weighs clusters by how many more pods of the template fit, counting the
// replicas a cluster holds now as fitting.
func (c *Controller) capacityTargets(ctx context.Context, b *workv1alpha1.ResourceBinding, candidates []clusterv1alpha1.Cluster, current Assignment) ([]Target, error) {
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion(b.Spec.Resource.APIVersion)
	tmpl.SetKind(b.Spec.Resource.Kind)
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: b.Spec.Resource.Namespace, Name: b.Spec.Resource.Name}, tmpl); err != nil {
		return nil, err
	}
	podTemplate := &corev1.PodTemplateSpec{}
	if raw, found, _ := unstructured.NestedMap(tmpl.Object, "spec", "template"); found {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, podTemplate); err != nil {
			return nil, fmt.Errorf("spec.template of %s %s is not a pod template: %w", tmpl.GetKind(), tmpl.GetName(), err)
		}
	}
	perPod := resourcehelper.PodRequests(&corev1.Pod{Spec: podTemplate.Spec}, resourcehelper.PodResourcesOptions{})
	targets := make([]Target, 0, len(candidates))
	for _, cl := range candidates {
		rs := cl.Status.ResourceSummary
		if rs == nil {
			return nil, fmt.Errorf("cluster %s has no resource summary yet; capacity-based division waits for it", cl.Name)
		}
		targets = append(targets, Target{Name: cl.Name, Available: AvailableReplicas(rs.Allocatable, rs.Requested, perPod) + int64(current[cl.Name])})
	}
	return targets, nil
}

func isReady(cl *clusterv1alpha1.Cluster) bool {
	return meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ConditionReady)
}

func serves(cl *clusterv1alpha1.Cluster, gvk schema.GroupVersionKind) bool {
	for _, e := range cl.Status.APIEnablements {
		if e.GroupVersion != gvk.GroupVersion().String() {
			continue
		}
		for _, r := range e.Resources {
			if r.Kind == gvk.Kind {
				return true
			}
		}
	}
	return false
}

// tolerates: every NoSchedule and NoExecute taint must be tolerated; PreferNoSchedule never
// excludes a cluster.
func tolerates(tols []policyv1alpha1.Toleration, taints []clusterv1alpha1.Taint) bool {
	for _, t := range taints {
		if t.Effect == clusterv1alpha1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for _, tol := range tols {
			if tol.Effect != "" && tol.Effect != string(t.Effect) {
				continue
			}
			if tol.Operator == "Exists" && (tol.Key == "" || tol.Key == t.Key) {
				ok = true
			}
			if tol.Operator == "Equal" && tol.Key == t.Key && tol.Value == t.Value {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
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
