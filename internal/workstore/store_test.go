package workstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

const finalizer = "work.flotilla.dev/executor"

func newClient(t *testing.T) (*Store, client.Client, client.Client) {
	t.Helper()
	delegate := fake.NewClientBuilder().WithScheme(kube.Scheme).Build()
	s := New()
	return s, s.Client(delegate), delegate
}

func work(namespace, name string, lbls map[string]string, configMap string) *workv1alpha1.Work {
	return &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: lbls},
		Spec: workv1alpha1.WorkSpec{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "` + configMap + `"}}`),
		}}}},
	}
}

func mustCreate(t *testing.T, c client.Client, w *workv1alpha1.Work) *workv1alpha1.Work {
	t.Helper()
	if err := c.Create(context.Background(), w); err != nil {
		t.Fatalf("create %s/%s: %v", w.Namespace, w.Name, err)
	}
	return w
}

func mustGet(t *testing.T, c client.Client, namespace, name string) *workv1alpha1.Work {
	t.Helper()
	w := &workv1alpha1.Work{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, w); err != nil {
		t.Fatalf("get %s/%s: %v", namespace, name, err)
	}
	return w
}

func names(list *workv1alpha1.WorkList) string {
	var out []string
	for _, w := range list.Items {
		out = append(out, w.Namespace+"/"+w.Name)
	}
	return fmt.Sprint(out) // one string keeps the comparisons short
}

func TestCreateGetAndListBySelectorAndNamespace(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newClient(t)
	mustCreate(t, c, work("es-b", "web", map[string]string{"cluster": "b", "app": "web"}, "web"))
	mustCreate(t, c, work("es-a", "web", map[string]string{"cluster": "a", "app": "web"}, "web"))
	mustCreate(t, c, work("es-a", "db", map[string]string{"cluster": "a", "app": "db"}, "db"))
	if s.Len() != 3 {
		t.Fatalf("Len = %d, want 3", s.Len())
	}

	got := mustGet(t, c, "es-a", "db")
	if got.Labels["app"] != "db" || got.Kind != "Work" {
		t.Fatalf("got %+v", got.ObjectMeta)
	}
	err := c.Get(ctx, types.NamespacedName{Namespace: "es-a", Name: "cache"}, &workv1alpha1.Work{})
	if status, ok := err.(apierrors.APIStatus); !apierrors.IsNotFound(err) || !ok || status.Status().Details.Group != "work.flotilla.dev" || status.Status().Details.Kind != "works" {
		t.Fatalf("get of a missing Work: %v, want NotFound of works.work.flotilla.dev", err)
	}

	for _, tc := range []struct {
		opts []client.ListOption
		want string
	}{
		{nil, "[es-a/db es-a/web es-b/web]"},
		{[]client.ListOption{client.InNamespace("es-a")}, "[es-a/db es-a/web]"},
		{[]client.ListOption{client.MatchingLabels{"app": "web"}}, "[es-a/web es-b/web]"},
		{[]client.ListOption{client.InNamespace("es-a"), client.MatchingLabels{"app": "web"}}, "[es-a/web]"},
		{[]client.ListOption{client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(labels.Set{"cluster": "b"})}}, "[es-b/web]"},
		{[]client.ListOption{&client.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"app": "db"})}}, "[es-a/db]"},
		{[]client.ListOption{client.HasLabels{"cluster"}, client.Limit(1)}, "[es-a/db es-a/web es-b/web]"},
		{[]client.ListOption{client.MatchingFields{"metadata.name": "web"}}, "[es-a/web es-b/web]"},
	} {
		list := &workv1alpha1.WorkList{}
		if err := c.List(ctx, list, tc.opts...); err != nil {
			t.Fatal(err)
		}
		if got := names(list); got != tc.want {
			t.Errorf("list %v = %s, want %s", tc.opts, got, tc.want)
		}
	}
	if err := c.List(ctx, &workv1alpha1.WorkList{}, client.MatchingFields{"spec.suspend": "true"}); err == nil {
		t.Error("a field selector on an unindexed field was accepted")
	}
}

// A binding's Works are listed from an index: it must follow relabels and deletions, and still
// apply the rest of the selector.
func TestListByBindingFollowsRelabelsAndDeletes(t *testing.T) {
	ctx := context.Background()
	_, c, _ := newClient(t)
	of := func(namespace, name string) map[string]string {
		return map[string]string{workv1alpha1.BindingNamespaceLabel: namespace, workv1alpha1.BindingNameLabel: name}
	}
	mustCreate(t, c, work("es-a", "shop.web", of("shop", "web"), "web"))
	mustCreate(t, c, work("es-b", "shop.web", of("shop", "web"), "web"))
	mustCreate(t, c, work("es-a", "shop.db", of("shop", "db"), "db"))
	list := func(opts ...client.ListOption) string {
		t.Helper()
		l := &workv1alpha1.WorkList{}
		if err := c.List(ctx, l, opts...); err != nil {
			t.Fatal(err)
		}
		return names(l)
	}
	web := client.MatchingLabels(of("shop", "web"))
	if got := list(web); got != "[es-a/shop.web es-b/shop.web]" {
		t.Fatalf("web's Works = %s", got)
	}
	if got := list(web, client.InNamespace("es-b")); got != "[es-b/shop.web]" {
		t.Fatalf("web's Works in es-b = %s", got)
	}
	moved := mustGet(t, c, "es-b", "shop.web")
	moved.Labels = of("shop", "db")
	if err := c.Update(ctx, moved); err != nil {
		t.Fatal(err)
	}
	if got := list(web); got != "[es-a/shop.web]" {
		t.Fatalf("web's Works after a relabel = %s", got)
	}
	if got := list(client.MatchingLabels(of("shop", "db"))); got != "[es-a/shop.db es-b/shop.web]" {
		t.Fatalf("db's Works after a relabel = %s", got)
	}
	if err := c.Delete(ctx, mustGet(t, c, "es-a", "shop.web")); err != nil {
		t.Fatal(err)
	}
	if got := list(web); got != "[]" {
		t.Fatalf("web's Works after its deletion = %s", got)
	}
	if got := list(client.InNamespace("es-a")); got != "[es-a/shop.db]" {
		t.Fatalf("es-a's Works after a deletion = %s", got)
	}
}

// BenchmarkListOneBinding lists one binding's Works among 3000 (1000 bindings on 3 clusters),
// as the binding controller and failover do on every pass.
func BenchmarkListOneBinding(b *testing.B) {
	ctx := context.Background()
	c := New().Client(fake.NewClientBuilder().WithScheme(kube.Scheme).Build())
	for i := range 1000 {
		for _, cluster := range []string{"a", "b", "c"} {
			name := fmt.Sprintf("app-%d", i)
			w := work("es-"+cluster, "shop."+name, map[string]string{workv1alpha1.BindingNamespaceLabel: "shop", workv1alpha1.BindingNameLabel: name}, name)
			if err := c.Create(ctx, w); err != nil {
				b.Fatal(err)
			}
		}
	}
	sel := client.MatchingLabels{workv1alpha1.BindingNamespaceLabel: "shop", workv1alpha1.BindingNameLabel: "app-500"}
	b.ResetTimer()
	for b.Loop() {
		l := &workv1alpha1.WorkList{}
		if err := c.List(ctx, l, sel); err != nil || len(l.Items) != 3 {
			b.Fatalf("%d Works, %v", len(l.Items), err)
		}
	}
}

func TestCreateAssignsMetadataAndIgnoresStatus(t *testing.T) {
	_, c, _ := newClient(t)
	w := work("es-a", "web", map[string]string{"app": "web"}, "web")
	w.Finalizers = []string{finalizer}
	w.Annotations = map[string]string{"note": "kept"}
	w.Status.AppliedHash = "ignored"
	mustCreate(t, c, w)
	if w.UID == "" || w.Generation != 1 || w.ResourceVersion == "" || w.CreationTimestamp.IsZero() {
		t.Fatalf("create did not write the assigned metadata back: %+v", w.ObjectMeta)
	}
	stored := mustGet(t, c, "es-a", "web")
	if stored.UID != w.UID || stored.ResourceVersion != w.ResourceVersion || stored.Status.AppliedHash != "" ||
		stored.Finalizers[0] != finalizer || stored.Annotations["note"] != "kept" || len(stored.Spec.Manifests) != 1 {
		t.Fatalf("stored %+v", stored)
	}
	if err := c.Create(context.Background(), work("es-a", "web", nil, "web")); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	other := mustCreate(t, c, work("es-a", "db", nil, "db"))
	if other.UID == w.UID || other.ResourceVersion == w.ResourceVersion {
		t.Fatalf("two Works share uid or resourceVersion: %s %s", other.UID, other.ResourceVersion)
	}
}

func TestReturnedWorksAreCopies(t *testing.T) {
	ctx := context.Background()
	_, c, _ := newClient(t)
	created := mustCreate(t, c, work("es-a", "web", map[string]string{"app": "web"}, "web"))
	created.Labels["app"] = "changed by the caller after create"

	got := mustGet(t, c, "es-a", "web")
	got.Labels["app"] = "changed after get"
	got.Spec.Manifests[0].Raw[0] = 'X'
	list := &workv1alpha1.WorkList{}
	if err := c.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	list.Items[0].Labels["app"] = "changed after list"

	again := mustGet(t, c, "es-a", "web")
	if again.Labels["app"] != "web" || again.Spec.Manifests[0].Raw[0] != '{' {
		t.Fatalf("the store saw a caller's change: %v %s", again.Labels, again.Spec.Manifests[0].Raw)
	}
}

// A reader that promises not to modify what it reads (client.UnsafeDisableDeepCopy, as with a
// cache) gets the stored Work's manifests themselves, not a copy of each.
func TestUnsafeReadsShareTheStoredWork(t *testing.T) {
	ctx := context.Background()
	_, c, _ := newClient(t)
	mustCreate(t, c, work("es-a", "web", map[string]string{"app": "web"}, "web"))
	first, second := &workv1alpha1.Work{}, &workv1alpha1.Work{}
	for _, w := range []*workv1alpha1.Work{first, second} {
		if err := c.Get(ctx, types.NamespacedName{Namespace: "es-a", Name: "web"}, w, client.UnsafeDisableDeepCopy); err != nil {
			t.Fatal(err)
		}
	}
	list := &workv1alpha1.WorkList{}
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		t.Fatal(err)
	}
	copied := mustGet(t, c, "es-a", "web")
	raw := func(w *workv1alpha1.Work) *byte { return &w.Spec.Manifests[0].Raw[0] }
	if raw(first) != raw(second) || raw(first) != raw(&list.Items[0]) {
		t.Fatal("unsafe reads of one stored Work got copies of its manifests")
	}
	if raw(copied) == raw(first) {
		t.Fatal("a default read shares the stored manifests")
	}
}

func TestGenerationMovesOnSpecChangesOnly(t *testing.T) {
	ctx := context.Background()
	_, c, _ := newClient(t)
	w := mustCreate(t, c, work("es-a", "web", map[string]string{"app": "web"}, "web"))

	rv := w.ResourceVersion
	w.Labels["team"] = "shop"
	if err := c.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	if w.Generation != 1 || w.ResourceVersion == rv {
		t.Fatalf("label update: generation %d, resourceVersion %s (was %s); want 1 and a new one", w.Generation, w.ResourceVersion, rv)
	}

	w.Spec.Suspend = true
	if err := c.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	if w.Generation != 2 {
		t.Fatalf("spec update: generation %d, want 2", w.Generation)
	}

	patch := client.MergeFrom(w.DeepCopy())
	w.Annotations = map[string]string{"note": "x"}
	if err := c.Patch(ctx, w, patch); err != nil {
		t.Fatal(err)
	}
	if w.Generation != 2 || w.Annotations["note"] != "x" {
		t.Fatalf("annotation patch: generation %d, want 2", w.Generation)
	}

	patch = client.MergeFrom(w.DeepCopy())
	w.Spec.DeletionPolicy = workv1alpha1.DeletionRelease
	if err := c.Patch(ctx, w, patch); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, c, "es-a", "web"); got.Generation != 3 || got.Spec.DeletionPolicy != workv1alpha1.DeletionRelease || !got.Spec.Suspend {
		t.Fatalf("spec patch: generation %d spec %+v, want 3 with both changes", got.Generation, got.Spec)
	}
}

func TestStatusWritesChangeOnlyStatus(t *testing.T) {
	ctx := context.Background()
	_, c, _ := newClient(t)
	w := mustCreate(t, c, work("es-a", "web", map[string]string{"app": "web"}, "web"))

	w.Status.AppliedHash = "h1"
	w.Spec.Suspend = true
	w.Labels["app"] = "not through status"
	rv := w.ResourceVersion
	if err := c.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, c, "es-a", "web")
	if got.Status.AppliedHash != "h1" || got.Spec.Suspend || got.Labels["app"] != "web" || got.Generation != 1 || got.ResourceVersion == rv {
		t.Fatalf("status update stored %+v", got)
	}

	patch := client.MergeFrom(got.DeepCopy())
	got.Status.Health = workv1alpha1.HealthHealthy
	got.Spec.DeletionPolicy = workv1alpha1.DeletionRelease
	if err := c.Status().Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	if got.Spec.DeletionPolicy != "" || got.Status.Health != workv1alpha1.HealthHealthy {
		t.Fatalf("status patch wrote back %+v", got)
	}
	again := mustGet(t, c, "es-a", "web")
	if again.Status.Health != workv1alpha1.HealthHealthy || again.Status.AppliedHash != "h1" || again.Spec.DeletionPolicy != "" || again.Generation != 1 {
		t.Fatalf("status patch stored %+v", again)
	}

	// The same writes through SubResource("status").
	again.Status.AppliedHash = "h2"
	if err := c.SubResource("status").Update(ctx, again); err != nil || mustGet(t, c, "es-a", "web").Status.AppliedHash != "h2" {
		t.Fatalf("SubResource(status).Update: %v", err)
	}
	if err := c.SubResource("scale").Update(ctx, again); err == nil {
		t.Fatal("a scale subresource of a Work was accepted")
	}
}

func TestMainWritesNeverChangeStatus(t *testing.T) {
	ctx := context.Background()
	_, c, _ := newClient(t)
	w := mustCreate(t, c, work("es-a", "web", nil, "web"))
	w.Status.AppliedHash = "h1"
	if err := c.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}

	w.Status.AppliedHash = "from update"
	w.Spec.Suspend = true
	if err := c.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	if w.Status.AppliedHash != "h1" || !w.Spec.Suspend {
		t.Fatalf("update wrote back status %q suspend %v", w.Status.AppliedHash, w.Spec.Suspend)
	}

	patch := client.MergeFrom(w.DeepCopy())
	w.Status.AppliedHash = "from patch"
	w.Status.Health = workv1alpha1.HealthDegraded
	if err := c.Patch(ctx, w, patch); err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, c, "es-a", "web")
	if got.Status.AppliedHash != "h1" || got.Status.Health != "" {
		t.Fatalf("main-resource writes changed status: %+v", got.Status)
	}
}

func TestUpdateWithStaleResourceVersionConflicts(t *testing.T) {
	ctx := context.Background()
	_, c, _ := newClient(t)
	w := mustCreate(t, c, work("es-a", "web", nil, "web"))
	stale := w.DeepCopy()
	w.Spec.Suspend = true
	if err := c.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	stale.Labels = map[string]string{"late": "yes"}
	if err := c.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v, want Conflict", err)
	}
	if err := c.Status().Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("stale status update: %v, want Conflict", err)
	}
	stale.ResourceVersion = "" // no resourceVersion: unconditional, as for custom resources
	if err := c.Update(ctx, stale); err != nil {
		t.Fatalf("unconditional update: %v", err)
	}
	if err := c.Update(ctx, work("es-a", "db", nil, "db")); !apierrors.IsNotFound(err) {
		t.Fatalf("update of a missing Work: %v, want NotFound", err)
	}
}

func TestMergePatchWithAndWithoutOptimisticLock(t *testing.T) {
	ctx := context.Background()
	_, c, _ := newClient(t)
	w := mustCreate(t, c, work("es-a", "web", map[string]string{"app": "web"}, "web"))
	stale := w.DeepCopy()
	w.Spec.Suspend = true
	if err := c.Update(ctx, w); err != nil {
		t.Fatal(err)
	}

	// Without the lock a patch from a stale copy still applies, and only what it changes.
	patch := client.MergeFrom(stale.DeepCopy())
	stale.Labels["team"] = "shop"
	if err := c.Patch(ctx, stale, patch); err != nil {
		t.Fatalf("patch without lock: %v", err)
	}
	if !stale.Spec.Suspend || stale.Labels["team"] != "shop" {
		t.Fatalf("patch without lock wrote back %+v", stale)
	}

	locked := w.DeepCopy() // w's resourceVersion is stale now
	patch = client.MergeFromWithOptions(locked.DeepCopy(), client.MergeFromWithOptimisticLock{})
	locked.Labels["team"] = "ops"
	if err := c.Patch(ctx, locked, patch); !apierrors.IsConflict(err) {
		t.Fatalf("locked patch from a stale copy: %v, want Conflict", err)
	}
	if err := c.Status().Patch(ctx, locked, patch); !apierrors.IsConflict(err) {
		t.Fatalf("locked status patch from a stale copy: %v, want Conflict", err)
	}

	fresh := mustGet(t, c, "es-a", "web")
	patch = client.MergeFromWithOptions(fresh.DeepCopy(), client.MergeFromWithOptimisticLock{})
	fresh.Labels["team"] = "ops"
	if err := c.Patch(ctx, fresh, patch); err != nil {
		t.Fatalf("locked patch from a fresh copy: %v", err)
	}
	if got := mustGet(t, c, "es-a", "web"); got.Labels["team"] != "ops" || got.ResourceVersion != fresh.ResourceVersion {
		t.Fatalf("stored %v rv %s, written back rv %s", got.Labels, got.ResourceVersion, fresh.ResourceVersion)
	}

	if err := c.Patch(ctx, work("es-a", "db", nil, "db"), client.RawPatch(types.MergePatchType, []byte(`{}`))); !apierrors.IsNotFound(err) {
		t.Fatalf("patch of a missing Work: %v, want NotFound", err)
	}
}

func TestJSONPatch(t *testing.T) {
	_, c, _ := newClient(t)
	w := mustCreate(t, c, work("es-a", "web", map[string]string{"app": "web"}, "web"))
	patch := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/labels/app","value":"web"},{"op":"add","path":"/spec/suspend","value":true}]`))
	if err := c.Patch(context.Background(), w, patch); err != nil {
		t.Fatal(err)
	}
	if !w.Spec.Suspend || w.Generation != 2 {
		t.Fatalf("JSON patch: suspend %v generation %d", w.Spec.Suspend, w.Generation)
	}
	failing := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/labels/app","value":"db"}]`))
	if err := c.Patch(context.Background(), w, failing); err == nil {
		t.Fatal("a failing JSON patch test op was accepted")
	}
}

// A status patch is applied to the Work without its spec; one that tests the spec still sees it.
func TestStatusJSONPatch(t *testing.T) {
	ctx := context.Background()
	_, c, _ := newClient(t)
	w := mustCreate(t, c, work("es-a", "web", nil, "web"))
	set := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/status","value":{"appliedHash":"abc"}}]`))
	if err := c.Status().Patch(ctx, w, set); err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, c, "es-a", "web")
	if got.Status.AppliedHash != "abc" || len(got.Spec.Manifests) != 1 || got.Generation != 1 {
		t.Fatalf("after a status patch: hash %q, %d manifests, generation %d", got.Status.AppliedHash, len(got.Spec.Manifests), got.Generation)
	}
	testsSpec := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"test","path":"/spec/manifests/0/metadata/name","value":"web"},{"op":"replace","path":"/status/appliedHash","value":"def"}]`))
	if err := c.Status().Patch(ctx, got, testsSpec); err != nil {
		t.Fatalf("a status patch testing the spec: %v", err)
	}
	if got := mustGet(t, c, "es-a", "web"); got.Status.AppliedHash != "def" {
		t.Fatalf("hash %q, want def", got.Status.AppliedHash)
	}
	spec := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/spec/suspend","value":true}]`))
	if err := c.Status().Patch(ctx, got, spec); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, c, "es-a", "web"); got.Spec.Suspend {
		t.Fatal("a status patch changed the spec")
	}
}

func TestWriteThatChangesNothingIsNoWrite(t *testing.T) {
	ctx := context.Background()
	_, c, _ := newClient(t)
	w := mustCreate(t, c, work("es-a", "web", map[string]string{"app": "web"}, "web"))
	rv := w.ResourceVersion
	if err := c.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(ctx, w, client.MergeFrom(w.DeepCopy())); err != nil {
		t.Fatal(err)
	}
	if err := c.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, c, "es-a", "web"); got.ResourceVersion != rv || w.ResourceVersion != rv {
		t.Fatalf("writes without changes moved the resourceVersion from %s to %s", rv, got.ResourceVersion)
	}
}

func TestServerSideApplyIsRefused(t *testing.T) {
	ctx := context.Background()
	_, c, _ := newClient(t)
	w := mustCreate(t, c, work("es-a", "web", nil, "web"))
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(workGVK)
	u.SetNamespace("es-a")
	u.SetName("web")
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("flotilla")); err != errServerSideApply {
		t.Fatalf("Apply: %v", err)
	}
	if err := c.Patch(ctx, w, client.RawPatch(types.ApplyPatchType, []byte(`{}`))); err != errServerSideApply {
		t.Fatalf("apply patch: %v", err)
	}
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u)); err != errServerSideApply {
		t.Fatalf("status Apply: %v", err)
	}
}

// recorder lists the events a source hands its handler.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *recorder) handler() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.add("create %s initial=%v", e.Object.GetName(), e.IsInInitialList)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.add("update %s gen %d->%d", e.ObjectNew.GetName(), e.ObjectOld.GetGeneration(), e.ObjectNew.GetGeneration())
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.add("delete %s finalizers=%v", e.Object.GetName(), e.Object.GetFinalizers())
		},
	}
}

func (r *recorder) waitFor(t *testing.T, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		got := fmt.Sprint(r.events)
		n := len(r.events)
		r.mu.Unlock()
		if got == fmt.Sprint(want) {
			return
		}
		if n > len(want) || time.Now().After(deadline) {
			t.Fatalf("events\n got %s\nwant %s", got, fmt.Sprint(want))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func startSource(t *testing.T, s *Store, h handler.EventHandler, preds ...predicate.Predicate) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	src := s.Source(h, preds...)
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(queue.ShutDown)
	if err := src.Start(ctx, queue); err != nil {
		t.Fatal(err)
	}
	if err := src.Start(ctx, queue); err == nil {
		t.Fatal("a source started twice")
	}
	syncCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := src.(source.SyncingSource).WaitForSync(syncCtx); err != nil {
		t.Fatalf("WaitForSync: %v", err)
	}
}

func TestDeleteWithFinalizerWaitsForItsRemoval(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newClient(t)
	w := work("es-a", "web", nil, "web")
	w.Finalizers = []string{finalizer}
	mustCreate(t, c, w)
	rec := &recorder{}
	startSource(t, s, rec.handler())

	if err := c.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	deleting := mustGet(t, c, "es-a", "web")
	if deleting.DeletionTimestamp == nil || deleting.Generation != 2 {
		t.Fatalf("delete with a finalizer: deletionTimestamp %v generation %d, want set and 2", deleting.DeletionTimestamp, deleting.Generation)
	}
	if err := c.Delete(ctx, deleting); err != nil || mustGet(t, c, "es-a", "web").ResourceVersion != deleting.ResourceVersion {
		t.Fatalf("a second delete wrote again: %v", err)
	}

	added := deleting.DeepCopy()
	added.Finalizers = append(added.Finalizers, "other")
	if err := c.Update(ctx, added); !apierrors.IsInvalid(err) {
		t.Fatalf("adding a finalizer while deleting: %v, want Invalid", err)
	}

	patch := client.MergeFrom(deleting.DeepCopy())
	deleting.Finalizers = nil
	if err := c.Patch(ctx, deleting, patch); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(w), &workv1alpha1.Work{}); !apierrors.IsNotFound(err) || s.Len() != 0 {
		t.Fatalf("after its last finalizer: %v, Len %d; want NotFound and 0", err, s.Len())
	}
	rec.waitFor(t, []string{"create web initial=true", "update web gen 1->2", "delete web finalizers=[]"})

	if err := c.Delete(ctx, w); !apierrors.IsNotFound(err) {
		t.Fatalf("delete of a missing Work: %v, want NotFound", err)
	}
}

func TestDeletePreconditionsAndDeleteAllOf(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newClient(t)
	web := mustCreate(t, c, work("es-a", "web", map[string]string{"app": "web"}, "web"))
	mustCreate(t, c, work("es-a", "db", map[string]string{"app": "db"}, "db"))
	mustCreate(t, c, work("es-b", "web", map[string]string{"app": "web"}, "web"))

	if err := c.Delete(ctx, web, client.Preconditions{UID: ptr(types.UID("other"))}); !apierrors.IsConflict(err) {
		t.Fatalf("delete with a wrong uid: %v, want Conflict", err)
	}
	if err := c.Delete(ctx, web, client.Preconditions{ResourceVersion: ptr("0")}); !apierrors.IsConflict(err) {
		t.Fatalf("delete with a wrong resourceVersion: %v, want Conflict", err)
	}
	if err := c.Delete(ctx, web, client.DryRunAll); err != nil || s.Len() != 3 {
		t.Fatalf("dry-run delete: %v, Len %d", err, s.Len())
	}
	if err := c.Delete(ctx, web, client.Preconditions{UID: &web.UID, ResourceVersion: &web.ResourceVersion}); err != nil {
		t.Fatalf("delete with matching preconditions: %v", err)
	}

	if err := c.DeleteAllOf(ctx, &workv1alpha1.Work{}, client.InNamespace("es-b"), client.MatchingLabels{"app": "db"}); err != nil || s.Len() != 2 {
		t.Fatalf("delete all of nothing: %v, Len %d", err, s.Len())
	}
	if err := c.DeleteAllOf(ctx, &workv1alpha1.Work{}, client.MatchingLabels{"app": "web"}); err != nil {
		t.Fatal(err)
	}
	list := &workv1alpha1.WorkList{}
	if err := c.List(ctx, list); err != nil || names(list) != "[es-a/db]" {
		t.Fatalf("left %s (%v), want es-a/db", names(list), err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestSourceDeliversInitialCreatesThenWritesInOrder(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newClient(t)
	mustCreate(t, c, work("es-b", "b", nil, "b"))
	a := mustCreate(t, c, work("es-a", "a", nil, "a"))
	all, changed := &recorder{}, &recorder{}
	startSource(t, s, all.handler())
	startSource(t, s, changed.handler(), predicate.GenerationChangedPredicate{})

	a.Status.AppliedHash = "h" // status only: no new generation
	if err := c.Status().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.Spec.Suspend = true
	if err := c.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, c, work("es-a", "c", nil, "c"))
	if err := c.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}

	all.waitFor(t, []string{"create a initial=true", "create b initial=true",
		"update a gen 1->1", "update a gen 1->2", "create c initial=false", "delete a finalizers=[]"})
	changed.waitFor(t, []string{"create a initial=true", "create b initial=true",
		"update a gen 1->2", "create c initial=false", "delete a finalizers=[]"})
}

// Writers never wait for a handler: 10000 writes finish while the handler is stuck, and once it
// moves every one of them arrives, in order.
func TestSourceLosesNoEventInABurst(t *testing.T) {
	const works, writesPerWork = 100, 100
	ctx := context.Background()
	s, c, _ := newClient(t)

	release := make(chan struct{})
	var mu sync.Mutex
	calls := 0
	lastVersion := map[string]int{}
	var outOfOrder []string
	record := func(o client.Object) {
		<-release
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls%1000 == 0 {
			time.Sleep(5 * time.Millisecond) // a slow handler
		}
		v, _ := strconv.Atoi(o.GetResourceVersion())
		if v <= lastVersion[o.GetName()] {
			outOfOrder = append(outOfOrder, o.GetName())
		}
		lastVersion[o.GetName()] = v
	}
	h := handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			record(e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			record(e.ObjectNew)
		},
	}
	startSource(t, s, h)

	written := make(chan error, 1)
	go func() {
		for i := range works {
			w := work("es-a", "w"+strconv.Itoa(i), map[string]string{"n": "0"}, "x")
			if err := c.Create(ctx, w); err != nil {
				written <- err
				return
			}
			for n := 1; n < writesPerWork; n++ {
				w.Labels["n"] = strconv.Itoa(n)
				if err := c.Update(ctx, w); err != nil {
					written <- err
					return
				}
			}
		}
		written <- nil
	}()
	select {
	case err := <-written:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("writers waited for a stuck handler")
	}
	close(release)

	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		got := calls
		mu.Unlock()
		if got == works*writesPerWork {
			break
		}
		if got > works*writesPerWork || time.Now().After(deadline) {
			t.Fatalf("handler saw %d events, want %d", got, works*writesPerWork)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(outOfOrder) > 0 {
		t.Fatalf("events out of order for %v", outOfOrder)
	}
}

func TestOtherTypesGoToTheDelegate(t *testing.T) {
	ctx := context.Background()
	s, c, delegate := newClient(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Data: map[string]string{"k": "v"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	fromDelegate := &corev1.ConfigMap{}
	if err := delegate.Get(ctx, client.ObjectKeyFromObject(cm), fromDelegate); err != nil || fromDelegate.Data["k"] != "v" {
		t.Fatalf("the ConfigMap is not in the delegate: %v", err)
	}
	patch := client.MergeFrom(cm.DeepCopy())
	cm.Data["k"] = "w"
	if err := c.Patch(ctx, cm, patch); err != nil {
		t.Fatal(err)
	}
	through := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), through); err != nil || through.Data["k"] != "w" {
		t.Fatalf("get through the store's client: %v %v", err, through.Data)
	}
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 0 {
		t.Fatalf("the store holds %d objects after ConfigMap writes", s.Len())
	}

	mustCreate(t, c, work("es-a", "web", nil, "web"))
	inDelegate := &workv1alpha1.WorkList{}
	if err := delegate.List(ctx, inDelegate); err != nil || len(inDelegate.Items) != 0 {
		t.Fatalf("a Work reached the delegate: %v %d", err, len(inDelegate.Items))
	}
	if c.Scheme() != kube.Scheme {
		t.Fatal("Scheme is not the delegate's")
	}
	if gvk, err := c.GroupVersionKindFor(&workv1alpha1.Work{}); err != nil || gvk != workGVK {
		t.Fatalf("GroupVersionKindFor: %v %v", gvk, err)
	}
	if namespaced, err := c.IsObjectNamespaced(&workv1alpha1.Work{}); err != nil || !namespaced {
		t.Fatalf("IsObjectNamespaced(Work): %v %v", namespaced, err)
	}

	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(workGVK)
	if err := c.Get(ctx, types.NamespacedName{Namespace: "es-a", Name: "web"}, u); err == nil {
		t.Fatal("an unstructured Work was served")
	}
}
