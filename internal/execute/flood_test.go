package execute

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// A burst of member events, here 5000 objects of 5000 Works changing before the executor's
// controller drains anything, reaches the controller's queue whole: every Work is reconciled
// and its status refreshed. A bounded channel dropped what did not fit (4096 slots), leaving
// those Works' statuses stale until the next resync.
func TestMemberEventFloodReachesEveryWork(t *testing.T) {
	e := &Executor{changes: kube.NewQueueSource[reconcile.Request]()}
	const works = 5000
	for i := range works {
		obj := &unstructured.Unstructured{}
		obj.SetAnnotations(map[string]string{workv1alpha1.WorkNamespaceAnnotation: "flotilla-es-east", workv1alpha1.WorkNameAnnotation: fmt.Sprintf("shop-web-%d", i)})
		e.onMemberChange(clustercache.ObjectEvent{Cluster: "east", Object: obj})
		e.onMemberChange(clustercache.ObjectEvent{Cluster: "east", Object: obj}) // a second event of the same object
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := e.changes.Start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if q.Len() != works {
		t.Fatalf("%d Works queued, want all %d (each once)", q.Len(), works)
	}
	// Events after the start go straight to the queue, merged with what it holds.
	obj := &unstructured.Unstructured{}
	obj.SetAnnotations(map[string]string{workv1alpha1.WorkNamespaceAnnotation: "flotilla-es-east", workv1alpha1.WorkNameAnnotation: "shop-web-new"})
	e.onMemberChange(clustercache.ObjectEvent{Cluster: "east", Object: obj})
	if q.Len() != works+1 {
		t.Fatalf("%d queued after one more event, want %d", q.Len(), works+1)
	}
}
