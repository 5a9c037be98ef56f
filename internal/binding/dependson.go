package binding

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/dependency"
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
