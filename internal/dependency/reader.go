package dependency

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/statusboard"
)

// accessTTL is how long an answer of the control plane on who may read what is reused: a
// Team's groups change rarely, and every held pass would otherwise cost a review.
const accessTTL = 30 * time.Second

// cycleLimit bounds the bindings a cycle search visits.
const cycleLimit = 64

// Reader resolves dependencies from cached objects and the status board.
type Reader struct {
	// Client reads cached objects and creates SubjectAccessReviews.
	Client client.Client
	// Board holds the newest binding statuses; nil reads the stored ones.
	Board *statusboard.Board

	access sync.Map // "from|to" -> accessAnswer
}

type accessAnswer struct {
	ok bool
	at time.Time
}

// IsApplication says whether a dependency selects an Application (its templates).
func IsApplication(s policyv1alpha1.DependencySelector) bool {
	return s.Kind == "Application" && s.APIVersion == appsv1alpha1.GroupVersion.String()
}

// Of resolves b's spec.dependsOn, each dependency with its bindings' newest status.
func (r *Reader) Of(ctx context.Context, b workv1alpha1.Binding) ([]Dep, error) {
	var deps []Dep
	for _, s := range b.BindingSpec().DependsOn {
		d, err := r.resolve(ctx, b, s)
		if err != nil {
			return nil, err
		}
		deps = append(deps, d)
	}
	return deps, nil
}

func (r *Reader) resolve(ctx context.Context, b workv1alpha1.Binding, s policyv1alpha1.DependencySelector) (Dep, error) {
	ns := s.Namespace
	if ns == "" {
		ns = b.GetNamespace()
	}
	d := Dep{Name: nameOf(s, ns)}
	if ok, err := r.Readable(ctx, b.GetNamespace(), ns); err != nil || !ok {
		d.Missing = true
		return d, err
	}
	templates, missing, err := r.templates(ctx, s, ns)
	if err != nil || missing {
		d.Missing = missing
		return d, err
	}
	self := client.ObjectKeyFromObject(b)
	for _, t := range templates {
		k := types.NamespacedName{Namespace: ns, Name: names.Binding(t.kind, t.name)}
		if k == self {
			continue // an Application's own templates do not wait for each other
		}
		dep := workv1alpha1.NewBinding(k.Namespace, k.Name)
		if err := r.Client.Get(ctx, k, dep); err != nil {
			if !apierrors.IsNotFound(err) {
				return d, err
			}
			// Not placed yet: an empty binding places it nowhere, and names its template.
			dep.BindingSpec().Resource = workv1alpha1.ObjectReference{Kind: t.kind, Namespace: ns, Name: t.name}
		}
		st, _ := r.Board.Of(dep)
		d.Bindings = append(d.Bindings, Placed{Binding: dep, Status: st})
	}
	return d, nil
}

// nameOf is how a dependency is named in messages.
func nameOf(s policyv1alpha1.DependencySelector, ns string) string {
	ref := s.Name
	if ns != "" {
		ref = ns + "/" + s.Name
	}
	if s.Name == "" {
		sel, _ := metav1.LabelSelectorAsSelector(s.LabelSelector.AsMetav1())
		ref = fmt.Sprintf("%s/{%s}", ns, sel)
	}
	return s.Kind + " " + ref
}

// template names one template a dependency selects.
type template struct{ kind, name string }

// templates are the templates s selects in ns; missing when an Application it names does not
// exist.
func (r *Reader) templates(ctx context.Context, s policyv1alpha1.DependencySelector, ns string) ([]template, bool, error) {
	if IsApplication(s) {
		app := &appsv1alpha1.Application{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Name}, app); err != nil {
			return nil, apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}
		var out []template
		for _, o := range app.Status.Objects {
			out = append(out, template{o.Kind, o.Name})
		}
		return out, false, nil
	}
	if s.Name != "" {
		return []template{{s.Kind, s.Name}}, false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector.AsMetav1())
	if err != nil {
		return nil, true, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.FromAPIVersionAndKind(s.APIVersion, s.Kind+"List"))
	if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, false, client.IgnoreNotFound(err)
	}
	var out []template
	for _, t := range list.Items {
		out = append(out, template{s.Kind, t.GetName()})
	}
	return out, false, nil
}

// Readable says whether namespace from may depend on namespace to: always its own, any from a
// cluster-scoped template (the platform's), else only where from's Team's contributors may get
// ResourceBindings in to.
func (r *Reader) Readable(ctx context.Context, from, to string) (bool, error) {
	if from == "" || from == to {
		return true, nil
	}
	key := from + "|" + to
	if v, ok := r.access.Load(key); ok && time.Since(v.(accessAnswer).at) < accessTTL {
		return v.(accessAnswer).ok, nil
	}
	team := &tenancyv1alpha1.Team{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: from, Name: tenancyv1alpha1.TeamName}, team); err != nil {
		if apierrors.IsNotFound(err) {
			r.access.Store(key, accessAnswer{false, time.Now()})
			return false, nil
		}
		return false, err
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "flotilla:team:" + from, Groups: team.ActingGroups(),
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: to, Verb: "get", Group: workv1alpha1.GroupVersion.Group, Resource: "resourcebindings"},
	}}
	if err := r.Client.Create(ctx, sar); err != nil {
		return false, err
	}
	r.access.Store(key, accessAnswer{sar.Status.Allowed, time.Now()})
	return sar.Status.Allowed, nil
}

// Cycle is the dependency cycle through b, as binding keys (b first and last), or nil.
func (r *Reader) Cycle(ctx context.Context, b workv1alpha1.Binding) []types.NamespacedName {
	start := client.ObjectKeyFromObject(b)
	next := func(k types.NamespacedName) []types.NamespacedName {
		var bd workv1alpha1.Binding = b
		if k != start {
			bd = workv1alpha1.NewBinding(k.Namespace, k.Name)
			if r.Client.Get(ctx, k, bd) != nil {
				return nil
			}
		}
		deps, err := r.Of(ctx, bd)
		if err != nil {
			return nil
		}
		var out []types.NamespacedName
		for _, d := range deps {
			for _, p := range d.Bindings {
				out = append(out, client.ObjectKeyFromObject(p.Binding))
			}
		}
		return out
	}
	return FindCycle(start, next, cycleLimit)
}
