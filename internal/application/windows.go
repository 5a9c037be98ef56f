package application

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/changewindow"
)

// Change windows hold an Application's new renders.
// +kubebuilder:rbac:groups=rollout.flotilla.dev,resources=changewindows;clusterchangewindows,verbs=get;list;watch

// heldByWindow says whether change windows hold the Application's new render (a new commit or
// spec): an open deny window, or allow windows all closed, that select the Application in one
// of its clusters (every window without a cluster selector, before it has any). What is in
// force stays, and is still re-applied when changed by hand: a window holds changes, not
// restores. The rollout.flotilla.dev/override-window annotation passes overridable windows.
func (c *Controller) heldByWindow(ctx context.Context, app *appsv1alpha1.Application, st *status, commit string, now time.Time) (bool, ctrl.Result, error) {
	if commit == st.s.Commit && app.Generation == st.s.ObservedGeneration && st.ready() {
		return false, ctrl.Result{}, nil // the render in force, applied again
	}
	windows, _, err := changewindow.List(ctx, c.Client, app.Namespace, false)
	if err != nil || len(windows) == 0 {
		return false, ctrl.Result{}, err
	}
	subject := changewindow.Subject{Namespace: app.Namespace, HasApplication: true, ApplicationLabels: app.Labels}
	clusterLabels := []map[string]string{nil}
	if len(app.Status.Clusters) > 0 {
		clusterLabels = clusterLabels[:0]
		for _, name := range app.Status.Clusters {
			cl := &clusterv1alpha1.Cluster{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, cl); err != nil {
				if client.IgnoreNotFound(err) != nil {
					return false, ctrl.Result{}, err
				}
				continue
			}
			clusterLabels = append(clusterLabels, cl.Labels)
		}
	}
	var hold changewindow.Hold
	held := false
	for _, labels := range clusterLabels {
		if h, ok := changewindow.HeldAt(windows, subject, labels, now); ok && (!held || h.Until.After(hold.Until)) {
			hold, held = h, true
		}
	}
	if !held {
		return false, ctrl.Result{}, nil
	}
	what := "the new spec"
	if commit != "" && commit != st.s.Commit {
		what = "commit " + short(commit)
	}
	if reason := strings.TrimSpace(app.Annotations[rolloutv1alpha1.OverrideWindowAnnotation]); reason != "" && hold.Overridable {
		c.Recorder.Eventf(app, nil, corev1.EventTypeWarning, "WindowOverridden", "Apply", "%s applied past %s: %s",
			what, strings.Join(hold.Windows, ", "), truncate(reason, 256))
		return false, ctrl.Result{}, nil
	}
	msg := fmt.Sprintf("%s waits: %s; %s stays in force", what, hold.String(), shortOr(st.s.Commit, "what was applied last"))
	if hold.Overridable {
		msg += fmt.Sprintf(" (annotation %s: REASON applies it now)", rolloutv1alpha1.OverrideWindowAnnotation)
	}
	st.set(app, appsv1alpha1.ConditionReconciling, metav1.ConditionTrue, appsv1alpha1.ReasonHeldByWindow, msg)
	return true, ctrl.Result{RequeueAfter: hold.Until.Sub(now) + time.Second}, nil
}

// appsInScope are the Applications a change of window o may hold or free.
func (c *Controller) appsInScope(ctx context.Context, o client.Object) []reconcile.Request {
	var apps appsv1alpha1.ApplicationList
	var opts []client.ListOption
	if o.GetNamespace() != "" {
		opts = append(opts, client.InNamespace(o.GetNamespace()))
	}
	if err := c.Client.List(ctx, &apps, opts...); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(apps.Items))
	for _, a := range apps.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&a)})
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
