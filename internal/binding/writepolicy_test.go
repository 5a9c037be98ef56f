package binding

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/testenv"
)

// The binding status write policy: a verdict is written at once, a workload on its way and a
// change of the members' status details alone wait, and what was just written is not written
// again over a cache that does not show it yet.
func TestStatusWritePolicy(t *testing.T) {
	status := func(reason string, memberStatus string) *workv1alpha1.ResourceBindingStatus {
		st := &workv1alpha1.ResourceBindingStatus{
			Conditions: []metav1.Condition{{Type: workv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason}},
			Clusters:   []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true, Status: &runtime.RawExtension{Raw: []byte(memberStatus)}}},
		}
		if reason == workv1alpha1.ReasonReady {
			st.Conditions[0].Status = metav1.ConditionTrue
		}
		return st
	}
	bindingWith := func(st *workv1alpha1.ResourceBindingStatus) *workv1alpha1.ResourceBinding {
		b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment", ResourceVersion: "7"}}
		b.Status = *st
		return b
	}
	c := &Controller{}
	written := bindingWith(status(workv1alpha1.ReasonProgressing, `{"replicas":3}`))

	onItsWay := status(workv1alpha1.ReasonProgressing, `{"replicas":3,"updatedReplicas":1}`)
	if wait := c.progressWait(written, onItsWay, true); wait <= 0 || wait > progressWriteInterval {
		t.Fatalf("a workload on its way: wait %v, want up to %v", wait, progressWriteInterval)
	}
	// The wait runs from the first unwritten change: once it is over, the change is written.
	c.progressSince.Store(client.ObjectKeyFromObject(written), time.Now().Add(-progressWriteInterval))
	if wait := c.progressWait(written, onItsWay, true); wait != 0 {
		t.Fatalf("a change on its way for %v: wait %v, want 0", progressWriteInterval, wait)
	}

	healthy := status(workv1alpha1.ReasonReady, `{"replicas":3,"readyReplicas":3}`)
	if wait := c.progressWait(written, healthy, true); wait != 0 {
		t.Fatalf("a verdict: wait %v, want 0 (written at once)", wait)
	}
	settled := bindingWith(healthy)
	countersOnly := status(workv1alpha1.ReasonReady, `{"replicas":3,"readyReplicas":3,"availableReplicas":3}`)
	if wait := c.progressWait(settled, countersOnly, true); wait <= 0 {
		t.Fatal("a change of the members' status details alone was written at once")
	}
	if wait := c.progressWait(settled, healthy, false); wait != 0 {
		t.Fatalf("nothing changed: wait %v, want 0", wait)
	}

	// Written, and the cache still shows the binding as it was: the same status is not
	// written again; a different one is.
	c.statusWritten.Store(client.ObjectKeyFromObject(written), writtenStatus{written.ResourceVersion, healthy.DeepCopy()})
	if !c.wroteAlready(written, healthy) {
		t.Fatal("the status just written would be written again over the stale cache")
	}
	if c.wroteAlready(written, countersOnly) {
		t.Fatal("a status other than the one written counts as written")
	}
	moved := written.DeepCopy()
	moved.ResourceVersion = "8"
	if c.wroteAlready(moved, healthy) {
		t.Fatal("a binding the cache shows changed since counts as written")
	}
}

// Many passes asking at once, over a cache that does not show the namespace yet, create it once.
func TestExecutionNamespaceCreatedOnce(t *testing.T) {
	var creates atomic.Int32
	c := &Controller{Client: interceptor.NewClient(fake.NewClientBuilder().WithScheme(kube.Scheme).WithIndex(&workv1alpha1.ResourceBinding{}, dependenciesIndex, recordedDependencies).WithIndex(&workv1alpha1.ClusterResourceBinding{}, dependenciesIndex, recordedDependencies).Build(), interceptor.Funcs{
		// A lagging cache: it never shows the namespace.
		Get: func(ctx context.Context, _ client.WithWatch, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
			return apierrors.NewNotFound(corev1.Resource("namespaces"), key.Name)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			creates.Add(1)
			return c.Create(ctx, obj, opts...)
		},
	})}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if err := c.ensureExecutionNamespace(context.Background(), "flotilla-es-east"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := creates.Load(); n != 1 {
		t.Fatalf("%d creates of one execution namespace, want 1", n)
	}
}

// A pass over a cached template that does not show the last status write yet stamps its
// conditions anew; the times of that write are kept, so the same verdict is not written twice.
// A real change is still written.
func TestTemplateStatusKeepsWrittenConditionTimesOverAStaleCache(t *testing.T) {
	tmpl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": "shop", "name": "web", "uid": "u1", "generation": int64(1)}}}
	var patches atomic.Int32
	cl := interceptor.NewClient(fake.NewClientBuilder().WithScheme(kube.Scheme).WithIndex(&workv1alpha1.ResourceBinding{}, dependenciesIndex, recordedDependencies).WithIndex(&workv1alpha1.ClusterResourceBinding{}, dependenciesIndex, recordedDependencies).WithObjects(tmpl.DeepCopy()).WithStatusSubresource(&appsv1.Deployment{}).Build(),
		interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patches.Add(1)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}})
	c := &Controller{Client: cl}
	aggregated := func(at string, ready int64) map[string]any {
		return map[string]any{"replicas": int64(3), "readyReplicas": ready, "conditions": []any{map[string]any{
			"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "available in every cluster",
			"lastTransitionTime": at, "lastUpdateTime": at}}}
	}
	ctx := context.Background()
	stale := tmpl.DeepCopy() // the cache keeps showing the template without status
	if err := c.writeTemplateStatus(ctx, stale.DeepCopy(), nil, aggregated("2026-11-26T10:00:00Z", 3), templateRollout{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.writeTemplateStatus(ctx, stale.DeepCopy(), nil, aggregated("2026-11-26T10:00:05Z", 3), templateRollout{}, nil); err != nil {
		t.Fatal(err)
	}
	if n := patches.Load(); n != 1 {
		t.Fatalf("the same verdict stamped 5 s later over a stale cache: %d status writes, want 1", n)
	}
	if err := c.writeTemplateStatus(ctx, stale.DeepCopy(), nil, aggregated("2026-11-26T10:00:09Z", 2), templateRollout{}, nil); err != nil {
		t.Fatal(err)
	}
	if n := patches.Load(); n != 2 {
		t.Fatalf("readyReplicas changed: %d status writes, want 2", n)
	}
	got := &appsv1.Deployment{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web"}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].LastTransitionTime.UTC().Format(time.RFC3339) != "2026-11-26T10:00:00Z" || got.Status.ReadyReplicas != 2 {
		t.Fatalf("stored status %+v: want readyReplicas 2 and Available since 10:00:00 (its first write)", got.Status)
	}
}

// A restarted manager has no record of its last status writes: a template whose stored status
// is the aggregated one, less the zero counters the kube-apiserver leaves out of a stored
// Deployment status, is not written again. A counter that moves still is.
func TestRestartedManagerWritesNoUnchangedTemplateStatus(t *testing.T) {
	ctx := context.Background()
	cfg, real := testenv.Start(t)
	watching, err := client.NewWithWatch(cfg, client.Options{Scheme: kube.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := real.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restart"}}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	if err := real.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "restart", Name: "web"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}}}}}); err != nil {
		t.Fatal(err)
	}
	var patches atomic.Int32
	cl := interceptor.NewClient(watching, interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
		patches.Add(1)
		return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
	}})
	aggregated := func(unavailable int64) map[string]any {
		return map[string]any{"replicas": int64(20), "readyReplicas": int64(20), "availableReplicas": int64(20), "unavailableReplicas": unavailable,
			"observedGeneration": int64(1), "conditions": []any{map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
				"message": "available in every cluster", "lastTransitionTime": "2026-11-28T10:00:00Z", "lastUpdateTime": "2026-11-28T10:00:00Z"}}}
	}
	stored := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "restart", Name: "web"}, u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	if err := (&Controller{Client: cl}).writeTemplateStatus(ctx, stored(), nil, aggregated(0), templateRollout{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(stored().Object, "status", "unavailableReplicas"); found {
		t.Fatal("the stored Deployment status keeps a zero counter; the test needs one that omits it")
	}
	restarted := &Controller{Client: cl}
	if err := restarted.writeTemplateStatus(ctx, stored(), nil, aggregated(0), templateRollout{}, nil); err != nil {
		t.Fatal(err)
	}
	if n := patches.Load(); n != 1 {
		t.Fatalf("a restarted manager wrote an unchanged status: %d status writes, want 1", n)
	}
	if err := restarted.writeTemplateStatus(ctx, stored(), nil, aggregated(2), templateRollout{}, nil); err != nil {
		t.Fatal(err)
	}
	if n := patches.Load(); n != 2 {
		t.Fatalf("unavailableReplicas moved to 2: %d status writes, want 2", n)
	}
}
