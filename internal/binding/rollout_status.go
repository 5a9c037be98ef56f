package binding

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1alpha1ac "github.com/flotilla-dev/flotilla/api/applyconfiguration/work/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/revision"
)

// templateRollout is what the control plane knows of the template's change in flight: which
// revision is the template as it is now, and the verdict of its release.
type templateRollout struct {
	latest int64 // 0: revisions are not tracked, every render is of the live template
	// pending: the template changed since its latest recorded revision; no cluster runs it yet.
	pending bool
	// release of the latest revision, nil when there is none.
	release *rolloutv1alpha1.Release
}

// rolloutOf reads the binding's latest revision and its release.
func (c *Controller) rolloutOf(ctx context.Context, b workv1alpha1.Binding, tmpl *unstructured.Unstructured, in interpret.Interpreter) (templateRollout, error) {
	revs := b.BindingSpec().Revisions
	if revs == nil {
		return templateRollout{}, nil
	}
	r := templateRollout{latest: revs.Latest}
	_, hash, err := revision.Load(ctx, c.Client, b, revs.Latest)
	switch {
	case apierrors.IsNotFound(err):
		r.pending = true
	case err != nil:
		return r, err
	default:
		r.pending = hash != revision.WorkloadHash(in, tmpl)
	}
	rel := &rolloutv1alpha1.Release{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: revision.Namespace(b), Name: revision.ReleaseName(b, revs.Latest)}, rel); err == nil {
		r.release = rel
	} else if !apierrors.IsNotFound(err) {
		return r, err
	}
	return r, nil
}

// current says whether a cluster runs the template as it is now.
func (r templateRollout) current(b workv1alpha1.Binding, cs workv1alpha1.ClusterStatus, observed bool) bool {
	bs := b.BindingSpec()
	if !observed || bs.Suspended(cs.Cluster) {
		return false
	}
	if r.latest == 0 {
		return true
	}
	if _, canary := bs.Revisions.CanaryFor(cs.Cluster); canary {
		return false
	}
	return !r.pending && cs.Revision == r.latest
}

// stopped is the message of a release of the latest revision that ended without it: the
// fleet will not run the template as it is now until someone acts.
func (r templateRollout) stopped() string {
	if r.release == nil || r.pending {
		return ""
	}
	switch p := r.release.Status.Phase; p {
	case rolloutv1alpha1.ReleaseRolledBack, rolloutv1alpha1.ReleaseAborted:
		msg := fmt.Sprintf("release %s of revision %d %s; the clusters run revision %d", r.release.Name, r.release.Spec.Revision, p, r.release.Spec.StableRevision)
		if r.release.Status.Message != "" {
			msg += ": " + r.release.Status.Message
		}
		return msg
	case rolloutv1alpha1.ReleaseProgressing, rolloutv1alpha1.ReleasePaused:
		// Automatic rollback off: a failed wave holds the release until someone aborts or
		// retries it, which is no progress either.
		for _, w := range r.release.Status.Waves {
			if w.Phase == rolloutv1alpha1.WaveFailed {
				return fmt.Sprintf("release %s of revision %d: wave %s Failed and waits for abort or retry: %s", r.release.Name, r.release.Spec.Revision, w.Name, w.Message)
			}
		}
	}
	return ""
}

// inFlight describes a release of the latest revision still under way, "" otherwise.
func (r templateRollout) inFlight() string {
	if r.release == nil || r.pending {
		return ""
	}
	switch p := r.release.Status.Phase; p {
	case "", rolloutv1alpha1.ReleaseProgressing, rolloutv1alpha1.ReleasePaused:
		if p == "" {
			p = rolloutv1alpha1.ReleaseProgressing
		}
		msg := fmt.Sprintf("release %s of revision %d %s", r.release.Name, r.release.Spec.Revision, p)
		if r.release.Status.Wave != "" {
			msg += " at wave " + r.release.Status.Wave
		}
		return msg
	}
	return ""
}

// withReleaseVerdict makes the template's aggregated Progressing condition (kinds that have
// one, such as Deployment) tell the release's truth: False with reason
// ProgressDeadlineExceeded when the release of the template's revision was rolled back or
// aborted, which `kubectl rollout status`, Argo CD and kstatus all read as failed; the
// release's wave named while it is under way.
func withReleaseVerdict(agg map[string]any, r templateRollout) {
	conds, _ := agg["conditions"].([]any)
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Progressing" {
			continue
		}
		if msg := r.stopped(); msg != "" {
			if m["status"] != "False" || m["reason"] != "ProgressDeadlineExceeded" {
				ts := r.release.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")
				if t := r.release.Status.CompletedAt; t != nil {
					ts = t.UTC().Format("2006-01-02T15:04:05Z")
				}
				m["lastTransitionTime"], m["lastUpdateTime"] = ts, ts
			}
			m["status"], m["reason"], m["message"] = "False", "ProgressDeadlineExceeded", msg
		} else if msg := r.inFlight(); msg != "" && m["status"] == "True" {
			m["message"] = msg + "; " + m["message"].(string)
		}
	}
}

// releaseBinding queues the binding a Release moves, so the template's status follows the
// release's verdict.
func releaseBinding(_ context.Context, o client.Object) []reconcile.Request {
	rel, ok := o.(*rolloutv1alpha1.Release)
	if !ok {
		return nil
	}
	ns := rel.Namespace
	if rel.Spec.Binding.Kind == "ClusterResourceBinding" {
		ns = ""
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: rel.Spec.Binding.Name}}}
}

// releasePhaseChanged passes Release events that change what the template's status says.
var releasePhaseChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*rolloutv1alpha1.Release)
		n, ok2 := e.ObjectNew.(*rolloutv1alpha1.Release)
		return ok1 && ok2 && (o.Status.Phase != n.Status.Phase || o.Status.Wave != n.Status.Wave || o.Status.Message != n.Status.Message ||
			failedWaves(o) != failedWaves(n))
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

func findCondition(status map[string]any, condType string) map[string]any {
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == condType {
			return m
		}
	}
	return nil
}

// keepConditionTimes keeps the times of the template's conditions that did not change, so an
// unchanged fleet costs no status write: lastTransitionTime while status and reason stay,
// lastUpdateTime while the message stays too.
func keepConditionTimes(merged, current map[string]any) {
	conds, _ := merged["conditions"].([]any)
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		old := findCondition(current, t)
		if old == nil || old["status"] != m["status"] || old["reason"] != m["reason"] {
			continue
		}
		if _, has := m["lastTransitionTime"]; has && old["lastTransitionTime"] != nil {
			m["lastTransitionTime"] = old["lastTransitionTime"]
		}
		if _, has := m["lastUpdateTime"]; has && old["lastUpdateTime"] != nil && old["message"] == m["message"] {
			m["lastUpdateTime"] = old["lastUpdateTime"]
		}
	}
}

// dropCondition removes conditions of one type from a status.
func dropCondition(status map[string]any, condType string) {
	conds, ok := status["conditions"].([]any)
	if !ok {
		return
	}
	kept := conds[:0:0]
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == condType {
			continue
		}
		kept = append(kept, c)
	}
	if len(kept) != len(conds) {
		status["conditions"] = kept
	}
}

// writeStatus applies the binding controller's part of a binding's status: every field and
// condition but the scheduler's Scheduled, under its own field manager, so a stale cached copy
// never writes back the scheduler's condition (nor the scheduler ours).
// ownConditions are the binding status conditions the binding controller writes.
var ownConditions = []string{workv1alpha1.ConditionScheduled, workv1alpha1.ConditionApplied, workv1alpha1.ConditionHealthy,
	workv1alpha1.ConditionInterpreted, workv1alpha1.ConditionDrifted, workv1alpha1.ConditionReady,
	workv1alpha1.ConditionReconciling, workv1alpha1.ConditionStalled}

func writeStatus(ctx context.Context, c client.Client, b workv1alpha1.Binding, status *workv1alpha1.ResourceBindingStatus) error {
	own := status.DeepCopy()
	// Only its own conditions: one another writer set is never written back from this
	// controller's (possibly stale) copy.
	own.Conditions = slices.DeleteFunc(own.Conditions, func(c metav1.Condition) bool { return !slices.Contains(ownConditions, c.Type) })
	ac, err := statusApply(b, own)
	if err != nil {
		return err
	}
	if err := c.Status().Apply(ctx, ac, client.FieldOwner(workv1alpha1.BindingStatusManager), client.ForceOwnership); err != nil {
		return err
	}
	*b.BindingStatus() = *status
	return nil
}

// statusApply is the typed apply configuration of a binding with the given status: the
// status as it serializes (empty fields left out), so the fields claimed are those set.
func statusApply(b workv1alpha1.Binding, status *workv1alpha1.ResourceBindingStatus) (runtime.ApplyConfiguration, error) {
	data, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	st := &workv1alpha1ac.ResourceBindingStatusApplyConfiguration{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("status of %s: %w", b.GetName(), err)
	}
	if b.GetNamespace() == "" {
		return workv1alpha1ac.ClusterResourceBinding(b.GetName()).WithStatus(st), nil
	}
	return workv1alpha1ac.ResourceBinding(b.GetName(), b.GetNamespace()).WithStatus(st), nil
}

func failedWaves(rel *rolloutv1alpha1.Release) int {
	n := 0
	for _, w := range rel.Status.Waves {
		if w.Phase == rolloutv1alpha1.WaveFailed {
			n++
		}
	}
	return n
}
