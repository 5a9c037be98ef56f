package binding

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/dependency"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// Dependencies (spec.dependsOn) hold a cluster's first Work: nothing of the template reaches a
// cluster before every dependency runs there Healthy at its current revision. Only the first
// Work is held, since that is where ordering matters (a database before the API that uses
// it); once the template runs in a cluster its later changes apply as usual, and those carried
// by a release wait in the release controller, which reads the same verdicts. Withholding the
// Work, rather than applying and scaling to zero, leaves the member untouched while it waits.

// dependsOnIndex indexes bindings with dependencies by the namespaces of their dependencies
// ("" for cluster-scoped ones), so a dependency's status change wakes only its possible
// dependents.
const dependsOnIndex = "spec.dependsOn.namespace"

// heldRecheck looks again at a held binding now and then: what no watch reports (a Team's
// groups, an Application appearing in another namespace) can free it too.
const heldRecheck = 30 * time.Second

func dependsOnNamespaces(o client.Object) []string {
	b, ok := o.(workv1alpha1.Binding)
	if !ok {
		return nil
	}
	var out []string
	for _, d := range b.BindingSpec().DependsOn {
		out = append(out, d.Namespace)
	}
	return out
}

// dependents are the bindings that may depend on b: those with a dependency in b's namespace.
func (c *Controller) dependents(b workv1alpha1.Binding) []reconcile.Request {
	ctx := context.Background()
	var reqs []reconcile.Request
	list := &workv1alpha1.ResourceBindingList{}
	if err := c.Client.List(ctx, list, client.MatchingFields{dependsOnIndex: b.GetNamespace()}); err == nil {
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	clusterList := &workv1alpha1.ClusterResourceBindingList{}
	if err := c.Client.List(ctx, clusterList, client.MatchingFields{dependsOnIndex: b.GetNamespace()}); err == nil {
		for i := range clusterList.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: clusterList.Items[i].Name}})
		}
	}
	return reqs
}

func (c *Controller) depReader() *dependency.Reader {
	c.depsOnce.Do(func() { c.deps = &dependency.Reader{Client: c.Client, Board: c.Board} })
	return c.deps
}

// ranThere says whether the binding's template has reached cluster: a Work there in this
// process, or a record of what the member last got.
func (c *Controller) ranThere(b workv1alpha1.Binding, cluster string) bool {
	_, had := c.hadWork.Load(workKey(b, cluster))
	return had || previousApplied(b, cluster) != nil
}

// waitsFor says what the template waits for before its first Work in cluster: its
// dependencies that do not run ready there, or the cycle it is part of; "" when none.
func (c *Controller) waitsFor(ctx context.Context, p *pass, cluster string) (string, error) {
	if len(p.bs.DependsOn) == 0 {
		return "", nil
	}
	if p.deps == nil {
		deps, err := c.depReader().Of(ctx, p.b)
		if err != nil {
			return "", err
		}
		p.deps = &deps
	}
	why := dependency.Verdict(cluster, *p.deps)
	if why == "" {
		return "", nil
	}
	if p.cycle == nil {
		// Looked for only when something waits: each member of a cycle waits for the next.
		p.cycle = new(string)
		if cy := c.depReader().Cycle(ctx, p.b); cy != nil {
			*p.cycle = dependency.CycleMessage(cy, func(k types.NamespacedName) string { return k.String() })
		}
	}
	if *p.cycle != "" {
		return *p.cycle, nil
	}
	return why, nil
}

// withWait fills a held cluster's status: what it waits for, since when (kept from the last
// status while it waits for the same), and a message saying so.
func withWait(b workv1alpha1.Binding, cs *workv1alpha1.ClusterStatus, why string, now time.Time) {
	cs.WaitingFor = truncate(why, 1024)
	cs.Message = truncateMessage("waiting for dependencies before it is first applied here: " + why)
	since := metav1.NewTime(now.Truncate(time.Second))
	for _, old := range b.BindingStatus().Clusters {
		if old.Cluster == cs.Cluster && old.WaitingSince != nil && old.WaitingFor != "" {
			since = *old.WaitingSince
		}
	}
	cs.WaitingSince = &since
}

func (c *Controller) now() time.Time {
	if c.Clock != nil {
		return c.Clock.Now()
	}
	return time.Now()
}

// depReport is what a pass reports of dependencies: the clusters held, and the bindings the
// template depends on (status.dependencies).
type depReport struct {
	held   map[string]string
	record []string
}

// dependenciesIndex indexes bindings by the bindings they depend on (status.dependencies), so
// a dependency leaving a cluster finds its dependents.
const dependenciesIndex = "status.dependencies"

// deletionOrderLimit bounds how long a dependency's objects stay in a cluster for dependents
// that do not leave it (still placed there, or in a cycle): deleting must not hang for ever.
const deletionOrderLimit = 5 * time.Minute

// recordKey names a binding in status.dependencies.
func recordKey(b workv1alpha1.Binding) string {
	if b.GetNamespace() == "" {
		return b.GetName()
	}
	return b.GetNamespace() + "/" + b.GetName()
}

func recordedDependencies(o client.Object) []string {
	if b, ok := o.(workv1alpha1.Binding); ok {
		return b.BindingStatus().Dependencies
	}
	return nil
}

// dependencyRecord is status.dependencies: the bindings spec.dependsOn resolves to now, and
// those recorded before that are being deleted (their Application may be gone already, and
// their objects must still wait for this binding's to leave).
func (c *Controller) dependencyRecord(ctx context.Context, p *pass) ([]string, error) {
	if len(p.bs.DependsOn) == 0 {
		return nil, nil
	}
	if p.deps == nil {
		deps, err := c.depReader().Of(ctx, p.b)
		if err != nil {
			return nil, err
		}
		p.deps = &deps
	}
	set := map[string]bool{}
	for _, d := range *p.deps {
		for _, pl := range d.Bindings {
			if pl.Binding.GetUID() != "" { // placed: a binding exists
				set[recordKey(pl.Binding)] = true
			}
		}
	}
	for _, old := range p.b.BindingStatus().Dependencies {
		if set[old] {
			continue
		}
		ns, name, namespaced := strings.Cut(old, "/")
		if !namespaced {
			ns, name = "", old
		}
		dep := workv1alpha1.NewBinding(ns, name)
		if err := c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, dep); err == nil && !dep.GetDeletionTimestamp().IsZero() {
			set[old] = true
		}
	}
	out := slices.Sorted(maps.Keys(set))
	return out[:min(len(out), 256)], nil
}

// mayDelete says whether b's Work in cluster may be deleted now: deleting follows the reverse
// order, so not while a binding that depends on b still has a Work there (bounded by
// deletionOrderLimit; a dependent b itself depends on, a cycle, is not waited for).
func (c *Controller) mayDelete(ctx context.Context, b workv1alpha1.Binding, cluster string) (bool, error) {
	key := workKey(b, cluster)
	var dependents []string
	for _, list := range []client.ObjectList{&workv1alpha1.ResourceBindingList{}, &workv1alpha1.ClusterResourceBindingList{}} {
		if err := c.Client.List(ctx, list, client.MatchingFields{dependenciesIndex: recordKey(b)}); err != nil {
			return false, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return false, err
		}
		for _, o := range items {
			d := o.(workv1alpha1.Binding)
			if d.GetUID() == b.GetUID() || slices.Contains(b.BindingStatus().Dependencies, recordKey(d)) {
				continue
			}
			w := &workv1alpha1.Work{}
			if err := kube.GetWork(ctx, c.Client, d.GetNamespace(), d.GetName(), cluster, w); err == nil {
				dependents = append(dependents, recordKey(d))
			} else if !apierrors.IsNotFound(err) {
				return false, err
			}
		}
	}
	if len(dependents) == 0 {
		c.deleteWaits.Delete(key)
		return true, nil
	}
	first, waited := c.deleteWaits.LoadOrStore(key, c.now())
	log := ctrl.LoggerFrom(ctx).WithValues("binding", recordKey(b), "cluster", cluster, "dependents", dependents)
	if c.now().Sub(first.(time.Time)) > deletionOrderLimit {
		log.Info("Deleting although dependents still run in the cluster", "waited", deletionOrderLimit)
		c.deleteWaits.Delete(key)
		return true, nil
	}
	if !waited {
		log.Info("Deletion waits for dependents to leave the cluster") // once per wait, not per look
	}
	return false, nil
}
