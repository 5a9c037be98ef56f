package execute

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/testenv"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// writeLog records the writes a member connection sends, as "METHOD path".
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (l *writeLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet {
			l.mu.Lock()
			l.writes = append(l.writes, req.Method+" "+req.URL.Path)
			l.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// take returns the writes since the last take.
func (l *writeLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.writes
	l.writes = nil
	return w
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// manager is one controller-manager process as the executor sees it: its Works in memory, its
// member connection (writes logged) and its executor, all new, as after a restart.
type manager struct {
	e      *Executor
	works  client.Client
	writes *writeLog
}

func startManager(t *testing.T, base client.Client, memberCfg *rest.Config) *manager {
	t.Helper()
	writes := &writeLog{}
	cfg := rest.CopyConfig(memberCfg)
	cfg.Wrap(writes.wrap)
	members := clustercache.New(clustercache.Options{ProbePeriod: time.Second, ProbeTimeout: 2 * time.Second, FailureThreshold: 3})
	if err := members.Connect(context.Background(), "m1", cfg, "m1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { members.Disconnect("m1") })
	store := workstore.New()
	works := store.Client(base)
	e := &Executor{Client: works, Works: store, Members: members, changes: kube.NewQueueSource[reconcile.Request]()}
	return &manager{e: e, works: works, writes: writes}
}

var restartWorkKey = types.NamespacedName{Namespace: kube.ExecutionNamespacePrefix + "m1", Name: "shop-web-deployment"}

// restartWork is a Work of a Deployment and the ConfigMap it uses, rendered as the binding
// controller renders them; config is the ConfigMap's data.
func restartWork(t *testing.T, config string) *workv1alpha1.Work {
	t.Helper()
	objectMeta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "shop", Name: name,
			Labels: map[string]string{workv1alpha1.ManagedByLabel: workv1alpha1.ManagedByValue, "app": "web"},
			Annotations: map[string]string{workv1alpha1.WorkNamespaceAnnotation: restartWorkKey.Namespace,
				workv1alpha1.WorkNameAnnotation: restartWorkKey.Name}}
	}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: objectMeta("web-config"),
		Data: map[string]string{"config": config}}
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: objectMeta("web"),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1",
					EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}}}}},
			},
		}}
	var manifests []workv1alpha1.Manifest
	for _, o := range []any{cm, d} {
		raw, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		manifests = append(manifests, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	}
	return &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Namespace: restartWorkKey.Namespace, Name: restartWorkKey.Name,
			Labels: map[string]string{workv1alpha1.ClusterLabel: "m1", workv1alpha1.BindingNamespaceLabel: "shop", workv1alpha1.BindingNameLabel: "web-deployment"}},
		Spec: workv1alpha1.WorkSpec{Manifests: manifests},
	}
}

// reconcileApplied reconciles the Work until its status says Applied for its generation (the
// executor writes status once it settled), and returns the Work.
func (m *manager) reconcileApplied(t *testing.T) *workv1alpha1.Work {
	t.Helper()
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := m.e.Reconcile(ctx, reconcile.Request{NamespacedName: restartWorkKey}); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		w := &workv1alpha1.Work{}
		if err := m.works.Get(ctx, restartWorkKey, w); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.ConditionApplied)
		if c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation && w.Status.AppliedHash == kube.ManifestsHash(w) {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Work was not applied: %+v", w.Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// memberObjectWrites are the writes to the Work's objects, leaving out the member namespace a
// first apply creates.
func memberObjectWrites(writes []string) []string {
	var out []string
	for _, w := range writes {
		if strings.Contains(w, "/namespaces/shop/") {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// A restarted controller-manager rebuilds its Works in memory, and its executor may meet one
// before the binding controller seeds its status with what the member last got (or without
// any record at all). It decides from the member objects, which record the manifest they were
// applied from: an unchanged object is not written again, a changed manifest is applied (that
// object only), and an object changed by hand is still put back.
func TestRestartedExecutorWritesOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	memberCfg, member := testenv.Start(t)

	// Given a Work applied by a first process.
	first := startManager(t, member, memberCfg)
	if err := first.works.Create(ctx, restartWork(t, "v1")); err != nil {
		t.Fatal(err)
	}
	first.reconcileApplied(t)
	want := []string{"PATCH /apis/apps/v1/namespaces/shop/deployments/web", "PATCH /api/v1/namespaces/shop/configmaps/web-config"}
	slices.Sort(want)
	if diff := cmp.Diff(want, memberObjectWrites(first.writes.take())); diff != "" {
		t.Fatalf("first apply: member writes (-want +got):\n%s", diff)
	}

	// When the process restarts and meets the same Work without a status,
	// then it writes nothing to the member.
	second := startManager(t, member, memberCfg)
	if err := second.works.Create(ctx, restartWork(t, "v1")); err != nil {
		t.Fatal(err)
	}
	second.reconcileApplied(t)
	if got := memberObjectWrites(second.writes.take()); len(got) != 0 {
		t.Errorf("after the restart, writes for an unchanged Work: %v, want none", got)
	}

	// When the ConfigMap's manifest changes, then that object alone is applied.
	w := &workv1alpha1.Work{}
	if err := second.works.Get(ctx, restartWorkKey, w); err != nil {
		t.Fatal(err)
	}
	w.Spec.Manifests[0] = restartWork(t, "v2").Spec.Manifests[0]
	if err := second.works.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	second.reconcileApplied(t)
	if diff := cmp.Diff([]string{"PATCH /api/v1/namespaces/shop/configmaps/web-config"}, memberObjectWrites(second.writes.take())); diff != "" {
		t.Errorf("a changed manifest: member writes (-want +got):\n%s", diff)
	}
	cm := &corev1.ConfigMap{}
	if err := member.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web-config"}, cm); err != nil || cm.Data["config"] != "v2" {
		t.Errorf("the member's ConfigMap after the change: %v (%v), want config v2", cm.Data, err)
	}

	// When someone changes the Deployment by hand and the process restarts again,
	// then the Deployment is put back (and the unchanged ConfigMap is not written).
	d := &appsv1.Deployment{}
	if err := member.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = "registry.example/web:by-hand"
	if err := member.Update(ctx, d, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	third := startManager(t, member, memberCfg)
	v2 := restartWork(t, "v2")
	if err := third.works.Create(ctx, v2); err != nil {
		t.Fatal(err)
	}
	got := third.reconcileApplied(t)
	if diff := cmp.Diff([]string{"PATCH /apis/apps/v1/namespaces/shop/deployments/web"}, memberObjectWrites(third.writes.take())); diff != "" {
		t.Errorf("drift after a restart: member writes (-want +got):\n%s", diff)
	}
	if err := member.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil || d.Spec.Template.Spec.Containers[0].Image != "registry.example/web:1" {
		t.Errorf("the drifted Deployment was not put back: image %q (%v)", d.Spec.Template.Spec.Containers[0].Image, err)
	}
	if got.Status.Drift == nil || got.Status.Drift.Corrections != 1 {
		t.Errorf("the correction is not counted in the Work's status: %+v", got.Status.Drift)
	}
}
