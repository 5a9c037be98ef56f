package kube

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// conflictRetry is how soon a reconcile that lost an optimistic-concurrency race looks again:
// by then the cache has the other writer's change.
const conflictRetry = 200 * time.Millisecond

// RequeueConflicts turns an optimistic-concurrency conflict (another writer came first) into
// a quiet retry: controllers sharing objects meet it in normal work, and logging it as a
// reconcile error at error level only hides the errors that matter.
func RequeueConflicts(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		res, err := r.Reconcile(ctx, req)
		if err != nil && apierrors.IsConflict(err) {
			ctrl.LoggerFrom(ctx).V(1).Info("Conflict; looking again", "error", err.Error())
			return reconcile.Result{RequeueAfter: conflictRetry}, nil
		}
		return res, err
	})
}
