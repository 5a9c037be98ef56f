package historian

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/history"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// memStore is a history store in memory that can be taken down.
type memStore struct {
	mu   sync.Mutex
	down bool
	recs map[string]history.Record
}

func (m *memStore) Append(_ context.Context, recs ...history.Record) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return 0, history.ErrUnavailable
	}
	n := 0
	for _, r := range recs {
		if _, ok := m.recs[r.ID]; !ok {
			m.recs[r.ID] = r
			n++
		}
	}
	return n, nil
}

func (m *memStore) List(context.Context, history.Filter, *history.Cursor, int) (history.Page, error) {
	return history.Page{}, errors.New("not used")
}

func (m *memStore) Latest(_ context.Context, f history.Filter) ([]history.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return nil, history.ErrUnavailable
	}
	newest := map[string]history.Record{}
	for _, r := range m.recs {
		k := r.Kind + "/" + r.Namespace + "/" + r.Name + "/" + r.Cluster
		if (f.Name == "" || f.Name == r.Name) && (!newest[k].Time.After(r.Time)) {
			newest[k] = r
		}
	}
	var out []history.Record
	for _, r := range newest {
		out = append(out, r)
	}
	return out, nil
}

func (m *memStore) SetActor(_ context.Context, id, actor string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return history.ErrUnavailable
	}
	if r, ok := m.recs[id]; ok {
		r.Actor = actor
		m.recs[id] = r
	}
	return nil
}

func (m *memStore) Prune(context.Context, time.Duration, int) (int64, error) { return 0, nil }
func (m *memStore) Ping(context.Context) error                               { return nil }
func (m *memStore) Close() error                                             { return nil }

func (m *memStore) outcomes() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.recs {
		out = append(out, r.Cluster+" "+r.Outcome)
	}
	sort.Strings(out)
	return out
}

// While the store is down, reconciles fail (and are retried); once it is back, the state in
// force is recorded once, and a restarted historian (empty memory) adds nothing.
func TestHistoryCatchesUpAfterTheStoreComesBack(t *testing.T) {
	tmpl, b := webBinding("u1", 3, workv1alpha1.ClusterStatus{Cluster: "east", Applied: true, Health: workv1alpha1.HealthHealthy}, workv1alpha1.ClusterStatus{Cluster: "west", Applied: true, Health: workv1alpha1.HealthProgressing})
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(tmpl, b).WithStatusSubresource(b).Build()
	store := &memStore{down: true, recs: map[string]history.Record{}}
	h := &Historian{Client: c, Reader: c, Store: store, Clock: clocktesting.NewFakePassiveClock(time.Now())}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "web-deployment"}}
	ctx := context.Background()
	if _, err := h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); !errors.Is(err, history.ErrUnavailable) {
		t.Fatalf("store down: reconcile error %v, want ErrUnavailable (so it is retried)", err)
	}
	store.down = false
	for range 2 {
		if _, err := h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"east healthy", "west applied"}
	if got := store.outcomes(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("records %v, want %v", got, want)
	}
	restarted := &Historian{Client: c, Reader: c, Store: store, Clock: clocktesting.NewFakePassiveClock(time.Now().Add(time.Hour))}
	if _, err := restarted.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
		t.Fatal(err)
	}
	if got := store.outcomes(); len(got) != 2 {
		t.Fatalf("a restarted historian recorded again: %v", got)
	}
}

func TestABadHistoryDSNStopsTheStart(t *testing.T) {
	if _, err := OpenLazy(context.Background(), "mysql://db/history", logr.Discard()); !errors.Is(err, history.ErrInvalid) {
		t.Errorf("a DSN of no known form: %v, want ErrInvalid naming --history-dsn", err)
	}
}

// A healthy revision whose pods roll again (its replicas moved by a placement change) is the
// same revision: no new record, and none when it turns healthy again.
func TestAReplicaChangeIsNoNewRecord(t *testing.T) {
	tmpl, b := webBinding("u1", 3, workv1alpha1.ClusterStatus{Cluster: "east", Applied: true, Health: workv1alpha1.HealthHealthy})
	c, store, h, req := historianOf(tmpl, b)
	ctx := context.Background()
	step := func(gen int64, health workv1alpha1.Health) {
		t.Helper()
		cur := &workv1alpha1.ResourceBinding{}
		if err := c.Get(ctx, req.NamespacedName, cur); err != nil {
			t.Fatal(err)
		}
		cur.Generation = gen
		if err := c.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		cur.Status.Clusters[0].Health = health
		if err := c.Status().Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if _, err := h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
			t.Fatal(err)
		}
	}
	step(3, workv1alpha1.HealthHealthy)
	step(4, workv1alpha1.HealthProgressing)
	step(4, workv1alpha1.HealthHealthy)
	if got := store.outcomes(); len(got) != 1 || got[0] != "east healthy" {
		t.Fatalf("records %v, want the first placement only", got)
	}
	step(5, workv1alpha1.HealthDegraded)
	if got := store.outcomes(); len(got) != 2 || got[1] != "east healthy" || got[0] != "east failed" {
		t.Fatalf("records %v, want a failed record once it went Degraded", got)
	}
}

// A binding deleted (its template left an Application) is recorded as removed under its
// template's kind, name and application, not the binding's name.
func TestARemovedBindingIsRecordedUnderItsTemplate(t *testing.T) {
	tmpl := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "store", Name: "front-cfg", Labels: map[string]string{appsv1alpha1.ApplicationLabel: "front"}}}
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "store", Name: "front-cfg-configmap", UID: "u2", Generation: 1},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "store", Name: "front-cfg"},
			PolicyRef: workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "store", Name: "app-front"}},
		Status: workv1alpha1.ResourceBindingStatus{Clusters: []workv1alpha1.ClusterStatus{{Cluster: "europe", Applied: true, Health: workv1alpha1.HealthHealthy}}}}
	c, store, h, req := historianOf(tmpl, b)
	ctx := context.Background()
	if _, err := h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
		t.Fatal(err)
	}
	for _, r := range store.recs {
		if r.Outcome != history.OutcomeRemoved {
			continue
		}
		if r.Kind != "ConfigMap" || r.Name != "front-cfg" || r.Application != "front" {
			t.Errorf("removal recorded as %s %s of application %q, want ConfigMap front-cfg of front", r.Kind, r.Name, r.Application)
		}
		return
	}
	t.Fatalf("no removal recorded: %v", store.outcomes())
}

// historianOf is a historian over a fake control plane holding tmpl and its binding b, with
// an empty store, and the request that reconciles b.
func historianOf(tmpl client.Object, b *workv1alpha1.ResourceBinding) (client.Client, *memStore, *Historian, ctrl.Request) {
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(tmpl, b).WithStatusSubresource(b).Build()
	store := &memStore{recs: map[string]history.Record{}}
	h := &Historian{Client: c, Reader: c, Store: store, Clock: clocktesting.NewFakePassiveClock(time.Now())}
	return c, store, h, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}}
}

// webBinding is shop/web's Deployment and the binding a PropagationPolicy made of it, with the
// clusters' status as last written.
func webBinding(uid types.UID, generation int64, clusters ...workv1alpha1.ClusterStatus) (*appsv1.Deployment, *workv1alpha1.ResourceBinding) {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}},
		&workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment", UID: uid, Generation: generation},
			Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
				PolicyRef: workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "web"}},
			Status: workv1alpha1.ResourceBindingStatus{Clusters: clusters}}
}
