package kube

import (
	"context"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A lost optimistic-concurrency race is a quiet retry; any other error stays an error.
func TestConflictsAreRetriedQuietly(t *testing.T) {
	conflict := fmt.Errorf("updating: %w", apierrors.NewConflict(schema.GroupResource{Resource: "works"}, "w", errors.New("modified")))
	for _, tt := range []struct {
		err       error
		wantErr   bool
		wantRetry bool
	}{{conflict, false, true}, {errors.New("boom"), true, false}, {nil, false, false}} {
		r := RequeueConflicts(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, tt.err }))
		res, err := r.Reconcile(context.Background(), reconcile.Request{})
		if (err != nil) != tt.wantErr || (res.RequeueAfter > 0) != tt.wantRetry {
			t.Errorf("%v: result %+v, error %v", tt.err, res, err)
		}
	}
}
