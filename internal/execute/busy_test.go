package execute

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/testenv"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// A member whose etcd times out (as an overloaded one does) has the apply asked again within a
// second, backing off, not after the 10 s a refused manifest waits: one change waits on every
// member's apply, and a busy moment passes. The failure shows in the status only once it has
// lasted past the settle window, and the next apply that goes through clears it.
func TestABusyMemberIsAskedAgainSoon(t *testing.T) {
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	memberCfg, member := testenv.Start(t)
	var refuse atomic.Int32
	refuse.Store(2)
	cfg := rest.CopyConfig(memberCfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPatch && strings.Contains(req.URL.Path, "/deployments/") && refuse.Add(-1) >= 0 {
				body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcdserver: request timed out","reason":"InternalError","code":500}`
				return &http.Response{StatusCode: http.StatusInternalServerError, Header: http.Header{"Content-Type": []string{"application/json"}},
					Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
			}
			return rt.RoundTrip(req)
		})
	})
	members := clustercache.New(clustercache.Options{ProbePeriod: time.Second, ProbeTimeout: 2 * time.Second, FailureThreshold: 3})
	if err := members.Connect(ctx, "m1", cfg, "m1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { members.Disconnect("m1") })
	store := workstore.New()
	works := store.Client(member)
	e := &Executor{Client: works, Works: store, Members: members, changes: kube.NewQueueSource[reconcile.Request]()}
	if err := works.Create(ctx, restartWork(t, "v1")); err != nil {
		t.Fatal(err)
	}
	req := reconcile.Request{NamespacedName: restartWorkKey}
	applied := func() *metav1.Condition {
		w := &workv1alpha1.Work{}
		if err := works.Get(ctx, restartWorkKey, w); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.ConditionApplied)
	}

	// The first refusal: tried again in a quarter second, nothing written to the status yet.
	res, err := e.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 300*time.Millisecond {
		t.Fatalf("after the first refusal the Work looks again in %s, want about 250ms", res.RequeueAfter)
	}
	if c := applied(); c != nil {
		t.Fatalf("a refusal inside the settle window was written: %+v", c)
	}
	// The second, past the settle window: written as ApplyFailed, tried again in half a second.
	time.Sleep(statusSettle + 100*time.Millisecond)
	if res, err = e.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > time.Second {
		t.Fatalf("after the second refusal the Work looks again in %s, want about 500ms (a refused manifest waits 10s)", res.RequeueAfter)
	}
	if c := applied(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ApplyFailed" || !strings.Contains(c.Message, "etcdserver: request timed out") {
		t.Fatalf("the lasting failure is not in the status: %+v", c)
	}
	// The member answers again: applied, and the count of refusals starts over.
	deadline := time.Now().Add(10 * time.Second)
	for c := applied(); c == nil || c.Status != metav1.ConditionTrue; c = applied() {
		if time.Now().After(deadline) {
			t.Fatalf("not applied once the member answered: %+v", c)
		}
		if _, err := e.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, ok := e.busyTries.Load(restartWorkKey); ok {
		t.Fatal("the refusals are still counted after an apply went through")
	}
}
