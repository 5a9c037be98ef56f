package clustercache

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/testenv"
)

// A lookup says whether the cache could answer, not only whether it found the object: once the
// member is disconnected (its shard moved to another replica), a miss is not an absence. The
// executor took such a miss for "never applied" and wrote unchanged objects again during a
// sharded restart.
func TestALookupAfterADisconnectIsNotAnAbsence(t *testing.T) {
	ctx := context.Background()
	cfg, c := testenv.Start(t)
	managed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ours",
		Labels: map[string]string{workv1alpha1.ManagedByLabel: workv1alpha1.ManagedByValue}}}
	if err := c.Create(ctx, managed); err != nil {
		t.Fatal(err)
	}
	cache := New(Options{ProbePeriod: time.Second, ProbeTimeout: 2 * time.Second, FailureThreshold: 3})
	if err := cache.Connect(ctx, "m1", cfg, "m1"); err != nil {
		t.Fatal(err)
	}
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	if err := cache.WatchObjects("m1", configMaps, func(ObjectEvent) {}); err != nil {
		t.Fatal(err)
	}
	if !cache.WaitObjectsSynced("m1", configMaps, 30*time.Second) {
		t.Fatal("the informer of configmaps did not sync in 30s")
	}

	if obj, listed := cache.LookupObject("m1", configMaps, "default", "ours"); obj == nil || !listed {
		t.Errorf("a managed object while connected: got %v, listed %v; want it, listed", obj, listed)
	}
	if obj, listed := cache.LookupObject("m1", configMaps, "default", "absent"); obj != nil || !listed {
		t.Errorf("an absent object while connected: got %v, listed %v; want nil, listed", obj, listed)
	}

	cache.Disconnect("m1")
	if obj, listed := cache.LookupObject("m1", configMaps, "default", "ours"); obj != nil || listed {
		t.Errorf("after the disconnect: got %v, listed %v; want nil, not listed", obj, listed)
	}
}
