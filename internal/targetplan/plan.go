// Package targetplan computes where TargetPolicies and ClusterTargetPolicies place an
// Application, writing nothing: the targeting controller writes the plan as generated
// propagation and override policies, and the inventory's what-if answers with it, so a preview
// and the placement that follows cannot differ. It must not import any controller.
package targetplan

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/match"
)

// Plan is the placement the target policies give one Application: what Reconcile writes, and
// what a what-if question previews.
type Plan struct {
	// TargetPolicies select the Application, namespaced first: NAMESPACE/NAME, then NAME.
	TargetPolicies []string
	// Clusters the Application is placed on; on a conflict, those of its status (nothing
	// moves); none while it has no templates (not rendered yet, or refused).
	Clusters []string
	// Left are the clusters the target policies select but the namespace's Team does not allow.
	Left []string
	// Reason and Message are those of the Application's Placed condition.
	Reason, Message string
	// Keep is true when the generated policies in force stay as they are (a conflict, or no
	// templates yet); otherwise they are replaced by the one below, or removed when Kind is "".
	Keep bool

	// Kind of the generated policy, PropagationPolicy or ClusterPropagationPolicy; "" when
	// the Application is not placed (Reason says why).
	Kind string
	// Namespace (of a PropagationPolicy) and Name of the generated policy.
	Namespace, Name string
	// Spec of the generated policy.
	Spec policyv1alpha1.PropagationSpec
	// OverrideRules of the generated override policy; none means no override policy.
	OverrideRules []policyv1alpha1.OverrideRule
	// RolloutWrittenBy names the TargetPolicy (NAMESPACE/NAME) whose rollout a generated
	// ClusterPropagationPolicy carries: a team wrote it, so it keeps the team's limits
	// (policyv1alpha1.RolloutWrittenByAnnotation). Empty when the platform wrote the rollout,
	// or the policy is the namespace's own.
	RolloutWrittenBy string
}

// Placed reports whether the plan generates a policy.
func (p *Plan) Placed() bool { return p.Kind != "" }

// PlanFor computes the Application's placement from the stored target policies, Teams and
// Clusters, writing nothing. A proposed *appsv1alpha1.TargetPolicy or
// *appsv1alpha1.ClusterTargetPolicy takes the place of the stored one of its name, or joins
// them when there is none; nil plans with what is stored. Reconcile writes what it returns, so
// a preview and the placement that follows cannot differ.
func PlanFor(ctx context.Context, r client.Reader, app *appsv1alpha1.Application, proposed client.Object) (Plan, error) {
	targets, err := targetsOf(ctx, r, app, proposed)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{}
	for _, t := range targets {
		p.TargetPolicies = append(p.TargetPolicies, t.ref)
	}
	if len(targets) == 0 {
		p.Reason = appsv1alpha1.ReasonNoTarget
		p.Message = "no TargetPolicy of namespace " + app.Namespace + " nor ClusterTargetPolicy selects the application's labels: it runs nowhere"
		return p, nil
	}
	if field, a, b := conflict(targets); field != "" {
		p.Clusters = slices.Clone(app.Status.Clusters)
		p.Keep = true
		p.Reason = appsv1alpha1.ReasonTargetConflict
		p.Message = fmt.Sprintf("target policies %s and %s both set %s and disagree: make them agree or set it in one of them; the placement in force is unchanged", a.describe(), b.describe(), field)
		return p, nil
	}
	if p.Clusters, p.Left, err = clusters(ctx, r, app, targets); err != nil {
		return Plan{}, err
	}
	leftOut := ""
	if len(p.Left) > 0 {
		leftOut = fmt.Sprintf("; left out %s: not among Team %s/%s's clusters (spec.clusters.selector)", strings.Join(p.Left, ", "), app.Namespace, tenancyv1alpha1.TeamName)
	}
	if len(app.Status.Objects) == 0 {
		// Nothing runs anywhere (not rendered yet, or refused: its Ready condition says why),
		// so status lists no clusters; `app list` would otherwise read as "runs there".
		p.Keep = true
		p.Reason = appsv1alpha1.ReasonNoTarget
		p.Message = "the application has produced no templates yet (its Ready condition says why)"
		if len(p.Clusters) > 0 {
			p.Message += "; its target policies select " + strings.Join(p.Clusters, ", ")
		}
		p.Clusters = nil
		return p, nil
	}
	if len(p.Clusters) == 0 {
		p.Reason = appsv1alpha1.ReasonClustersNotAllowed
		p.Message = "no cluster matches the clusterSelectors of " + strings.Join(p.TargetPolicies, ", ") + leftOut
		return p, nil
	}
	p.Reason = appsv1alpha1.ReasonPlaced
	clusters := "clusters"
	if len(p.Clusters) == 1 {
		clusters = "cluster"
	}
	p.Message = fmt.Sprintf("placed on %d %s by %s", len(p.Clusters), clusters, strings.Join(p.TargetPolicies, ", ")) + leftOut

	platform := slices.ContainsFunc(targets, func(t target) bool { return t.cluster })
	p.Kind, p.Name = "PropagationPolicy", GeneratedName(app, platform)
	if platform {
		p.Kind = "ClusterPropagationPolicy"
	} else {
		p.Namespace = app.Namespace
	}
	p.Spec = policyv1alpha1.PropagationSpec{
		ResourceSelectors: selectors(app, platform),
		Placement: policyv1alpha1.Placement{
			ClusterAffinity:   affinity(targets, p.Clusters),
			ReplicaScheduling: first(targets, func(s *appsv1alpha1.TargetSpec) *policyv1alpha1.ReplicaScheduling { return s.ReplicaScheduling }),
		},
		Rollout:        first(targets, func(s *appsv1alpha1.TargetSpec) *policyv1alpha1.RolloutStrategy { return s.Rollout }),
		DeletionPolicy: first(targets, func(s *appsv1alpha1.TargetSpec) policyv1alpha1.DeletionPolicy { return s.DeletionPolicy }),
		DependsOn:      DependsOn(app),
	}
	if platform {
		// Trust follows the writer: a team's rollout copied into the platform's policy keeps
		// the team's limits (revision.StrategyTrustLabel).
		// A rollout the platform sets too (equal, or it would be a conflict) is the platform's:
		// a team copying the platform's strategy into its TargetPolicy must not take its
		// gates and switches over.
		platformRollout := slices.ContainsFunc(targets, func(t target) bool { return t.cluster && t.spec.Rollout != nil })
		if i := slices.IndexFunc(targets, func(t target) bool { return t.spec.Rollout != nil }); i >= 0 && !targets[i].cluster && !platformRollout {
			p.RolloutWrittenBy = targets[i].ref
		}
	}
	for _, t := range targets {
		p.OverrideRules = append(p.OverrideRules, t.spec.OverrideRules...)
	}
	if len(p.OverrideRules) > 32 {
		p.OverrideRules = p.OverrideRules[:32]
	}
	return p, nil
}

// Selects reports whether a TargetPolicy or ClusterTargetPolicy, not being deleted, selects
// the Application.
func Selects(policy client.Object, app *appsv1alpha1.Application) bool {
	t, ok := targetOf(policy)
	return ok && policy.GetDeletionTimestamp().IsZero() &&
		(t.cluster || policy.GetNamespace() == app.Namespace) &&
		match.Labels(&t.spec.AppSelector, app.Labels)
}

// targetOf is a TargetPolicy or ClusterTargetPolicy as a target.
func targetOf(o client.Object) (target, bool) {
	switch p := o.(type) {
	case *appsv1alpha1.TargetPolicy:
		return target{ref: p.Namespace + "/" + p.Name, spec: &p.Spec}, true
	case *appsv1alpha1.ClusterTargetPolicy:
		return target{ref: p.Name, cluster: true, spec: &p.Spec}, true
	}
	return target{}, false
}

// targetsOf lists the target policies selecting the Application, namespaced first, by name,
// with the proposed one in place of the stored one of its name.
func targetsOf(ctx context.Context, r client.Reader, app *appsv1alpha1.Application, proposed client.Object) ([]target, error) {
	var stored []client.Object
	var tps appsv1alpha1.TargetPolicyList
	if err := r.List(ctx, &tps, client.InNamespace(app.Namespace)); err != nil {
		return nil, err
	}
	for i := range tps.Items {
		stored = append(stored, &tps.Items[i])
	}
	var ctps appsv1alpha1.ClusterTargetPolicyList
	if err := r.List(ctx, &ctps); err != nil {
		return nil, err
	}
	for i := range ctps.Items {
		stored = append(stored, &ctps.Items[i])
	}
	var want target
	if proposed != nil {
		var ok bool
		if want, ok = targetOf(proposed); !ok {
			return nil, fmt.Errorf("planning a placement with a %T: want a TargetPolicy or ClusterTargetPolicy", proposed)
		}
		stored = slices.DeleteFunc(stored, func(o client.Object) bool {
			t, _ := targetOf(o)
			return t.cluster == want.cluster && t.ref == want.ref
		})
		stored = append(stored, proposed)
	}
	var out []target
	for _, o := range stored {
		if Selects(o, app) {
			t, _ := targetOf(o)
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b target) int {
		if a.cluster != b.cluster {
			if a.cluster {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.ref, b.ref)
	})
	return out, nil
}

// clusters is the union of the targets' clusters, less those the Team does not allow.
func clusters(ctx context.Context, r client.Reader, app *appsv1alpha1.Application, ts []target) (in, left []string, err error) {
	var cls clusterv1alpha1.ClusterList
	if err := r.List(ctx, &cls); err != nil {
		return nil, nil, err
	}
	team := &tenancyv1alpha1.Team{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: tenancyv1alpha1.TeamName}, team); client.IgnoreNotFound(err) != nil {
		return nil, nil, err
	}
	var allowed func(*clusterv1alpha1.Cluster) bool = func(*clusterv1alpha1.Cluster) bool { return true }
	if team.Spec.Clusters != nil {
		sel, err := metav1.LabelSelectorAsSelector(team.Spec.Clusters.Selector.AsMetav1())
		if err != nil {
			return nil, nil, fmt.Errorf("Team %s/%s spec.clusters.selector: %w", team.Namespace, team.Name, err)
		}
		allowed = func(cl *clusterv1alpha1.Cluster) bool { return sel.Matches(labels.Set(cl.Labels)) }
	}
	for i := range cls.Items {
		cl := &cls.Items[i]
		if !cl.DeletionTimestamp.IsZero() {
			continue
		}
		if !slices.ContainsFunc(ts, func(t target) bool { return match.Labels(&t.spec.ClusterSelector, cl.Labels) }) {
			continue
		}
		if allowed(cl) {
			in = append(in, cl.Name)
		} else {
			left = append(left, cl.Name)
		}
	}
	slices.Sort(in)
	slices.Sort(left)
	return in, left, nil
}

// target is one target policy that selects the Application.
type target struct {
	ref     string // NAMESPACE/NAME or NAME
	cluster bool
	spec    *appsv1alpha1.TargetSpec
}

func (t target) describe() string {
	if t.cluster {
		return "ClusterTargetPolicy " + t.ref
	}
	return "TargetPolicy " + t.ref
}

// conflict names the first field two target policies set differently.
func conflict(ts []target) (string, target, target) {
	fields := []struct {
		name string
		get  func(*appsv1alpha1.TargetSpec) any
		set  func(*appsv1alpha1.TargetSpec) bool
	}{
		{"spec.replicaScheduling", func(s *appsv1alpha1.TargetSpec) any { return s.ReplicaScheduling }, func(s *appsv1alpha1.TargetSpec) bool { return s.ReplicaScheduling != nil }},
		{"spec.rollout", func(s *appsv1alpha1.TargetSpec) any { return s.Rollout }, func(s *appsv1alpha1.TargetSpec) bool { return s.Rollout != nil }},
		{"spec.deletionPolicy", func(s *appsv1alpha1.TargetSpec) any { return s.DeletionPolicy }, func(s *appsv1alpha1.TargetSpec) bool { return s.DeletionPolicy != "" }},
	}
	for _, f := range fields {
		var first *target
		for i := range ts {
			if !f.set(ts[i].spec) {
				continue
			}
			if first == nil {
				first = &ts[i]
				continue
			}
			if !equality.Semantic.DeepEqual(f.get(first.spec), f.get(ts[i].spec)) {
				return f.name, *first, ts[i]
			}
		}
	}
	return "", target{}, target{}
}

// first returns the first target's value of a field that is set.
func first[T any](ts []target, get func(*appsv1alpha1.TargetSpec) T) T {
	var zero T
	for _, t := range ts {
		if v := get(t.spec); !reflect.ValueOf(&v).Elem().IsZero() {
			return v
		}
	}
	return zero
}

// GeneratedName names the policies made for an Application: the ClusterPropagationPolicy
// (cluster), app-NAMESPACE.NAME (namespace names hold no dots, so shop/a-x and shop-a/x never
// share one), or the PropagationPolicy app-NAME in its namespace.
func GeneratedName(app *appsv1alpha1.Application, cluster bool) string {
	if cluster {
		return "app-" + app.Namespace + "." + app.Name
	}
	return "app-" + app.Name
}

// selectors select the Application's templates, one per kind.
func selectors(app *appsv1alpha1.Application, cluster bool) []policyv1alpha1.ResourceSelector {
	var out []policyv1alpha1.ResourceSelector
	seen := map[string]bool{}
	for _, o := range app.Status.Objects {
		k := o.APIVersion + "/" + o.Kind
		if seen[k] {
			continue
		}
		seen[k] = true
		s := policyv1alpha1.ResourceSelector{APIVersion: o.APIVersion, Kind: o.Kind,
			LabelSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{appsv1alpha1.ApplicationLabel: policyv1alpha1.LabelValue(app.Name)}}}
		if cluster {
			s.Namespace = app.Namespace
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b policyv1alpha1.ResourceSelector) int {
		return cmp.Or(cmp.Compare(a.APIVersion, b.APIVersion), cmp.Compare(a.Kind, b.Kind))
	})
	if len(out) > 64 {
		out = out[:64]
	}
	return out
}

// affinity is one target's clusterSelector as it stands, so relabelling a cluster needs no
// rewrite of the placement (the scheduler follows cluster labels); several targets' union is
// their clusters by name.
func affinity(ts []target, clusters []string) *policyv1alpha1.ClusterAffinity {
	if len(ts) == 1 {
		return &policyv1alpha1.ClusterAffinity{LabelSelector: ts[0].spec.ClusterSelector.DeepCopy()}
	}
	return &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}
}

// DependsOn is the Application's dependsOn as the generated policy carries it: each an
// Application selected by name, in its namespace (the Application's own when unset).
func DependsOn(app *appsv1alpha1.Application) []policyv1alpha1.DependencySelector {
	var out []policyv1alpha1.DependencySelector
	for _, d := range app.Spec.DependsOn {
		ns := d.Namespace
		if ns == "" {
			ns = app.Namespace
		}
		out = append(out, policyv1alpha1.DependencySelector{APIVersion: appsv1alpha1.GroupVersion.String(), Kind: "Application", Name: d.Name, Namespace: ns})
	}
	return out
}
