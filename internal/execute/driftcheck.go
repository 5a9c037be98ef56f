package execute

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// driftTotal counts drift per member: objects put back plus differences newly reported. The
// label is bounded by the number of registered clusters.
var driftTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "flotilla_drift_total",
	Help: "Member objects found changed by hand: corrected (put back) plus reported (driftCorrection mode Report).",
}, []string{"cluster"})

// applyFailures counts member applies that failed, by cluster and by whether the member was
// busy (asked again soon) or refused the manifest.
var applyFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "flotilla_apply_failures_total",
	Help: "Member applies that failed: reason busy (a timeout, throttling or an overloaded member; asked again within seconds) or refused (the member rejected the manifest; asked again after 10s).",
}, []string{"cluster", "reason"})

func init() {
	metrics.Registry.MustRegister(driftTotal, applyFailures)
}

// DefaultDriftCheckInterval is how often every Work is compared with its member objects even
// without a member event.
const DefaultDriftCheckInterval = 5 * time.Minute

// Verdicts remembered per member object, so an unchanged object costs no Retain call and a
// difference the member already judged costs no second call to it.
const (
	// verdictClean + live state: the object matched at that state.
	verdictClean = "clean|"
	// verdictNone + signature: the member kept the object as it was when given the rendered
	// one; the difference was only of form (a defaulted or normalized value).
	verdictNone = "none|"
	// verdictReal + signature: confirmed drift, already reported and counted.
	verdictReal = "real|"
	// verdictDeleted: deleted by hand and reported (Report mode), already counted.
	verdictDeleted = "deleted|"
)

type verdictKey struct {
	work   types.NamespacedName
	object string
}

func objectKey(cluster string, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) string {
	return cluster + "/" + gvr.String() + "/" + obj.GetNamespace() + "/" + obj.GetName()
}

// liveState changes whenever a change of the member object could be drift: its spec (the
// generation; the resourceVersion for kinds without one), labels, annotations or scale
// ownership, and the Work's spec.
func liveState(w *workv1alpha1.Work, live *unstructured.Unstructured) string {
	h := sha256.New()
	keys := func(m map[string]string) {
		ks := make([]string, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			fmt.Fprintf(h, "%s=%s\n", k, m[k])
		}
	}
	keys(live.GetLabels())
	h.Write([]byte{0})
	keys(live.GetAnnotations())
	for _, mf := range live.GetManagedFields() {
		if mf.Subresource == "scale" {
			fmt.Fprintf(h, "scale:%s", mf.Manager)
		}
	}
	state := fmt.Sprintf("%d/%s/", w.Generation, w.UID)
	if g := live.GetGeneration(); g > 0 {
		state += fmt.Sprintf("g%d/", g)
	} else {
		state += "rv" + live.GetResourceVersion() + "/"
	}
	return state + hex.EncodeToString(h.Sum(nil))[:16]
}

// checkDrift compares one rendered object with its live member object, without calling the
// member. It returns the fields that differ and were not judged before to be no drift.
func (e *Executor) checkDrift(key types.NamespacedName, cluster string, gvr schema.GroupVersionResource, w *workv1alpha1.Work, obj, live *unstructured.Unstructured) ([]driftField, error) {
	vk := verdictKey{key, objectKey(cluster, gvr, obj)}
	state := liveState(w, live)
	last, _ := e.verdicts.Load(vk)
	if last == verdictClean+state {
		return nil, nil
	}
	desired := obj.DeepCopy()
	asRecorded(desired, live)
	if err := e.Interpreters.For(obj.GroupVersionKind()).Retain(desired, live); err != nil {
		return nil, &retainError{fmt.Errorf("retaining member-side fields of %s %s/%s in cluster %s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), cluster, err)}
	}
	var ignore []string
	if w.Spec.DriftCorrection != nil {
		ignore = w.Spec.DriftCorrection.IgnoreFields
	}
	fields := driftOf(desired, live, ignore)
	if len(fields) == 0 {
		e.verdicts.Store(vk, verdictClean+state)
		return nil, nil
	}
	if last == verdictNone+driftSignature(fields) {
		return nil, nil
	}
	return fields, nil
}

// confirmDrift asks the member, with a server-side dry-run of the apply, whether the
// difference is real; Report mode writes nothing, so this is its only call. isNew says the
// drift was not reported before.
func (e *Executor) confirmDrift(ctx context.Context, key types.NamespacedName, cluster string, gvr schema.GroupVersionResource, ri dynamic.ResourceInterface, obj, live *unstructured.Unstructured, fields []driftField) ([]driftField, bool, error) {
	vk := verdictKey{key, objectKey(cluster, gvr, obj)}
	sig := driftSignature(fields)
	if last, _ := e.verdicts.Load(vk); last == verdictReal+sig {
		return fields, false, nil
	}
	desired := obj.DeepCopy()
	asRecorded(desired, live)
	retainScaledReplicas(live, desired)
	if err := e.Interpreters.For(obj.GroupVersionKind()).Retain(desired, live); err != nil {
		return nil, false, &retainError{fmt.Errorf("retaining member-side fields of %s %s/%s in cluster %s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), cluster, err)}
	}
	cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	dry, err := ri.Apply(cctx, obj.GetName(), desired, metav1.ApplyOptions{FieldManager: kube.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
	cancel()
	// A member that refuses the dry-run (a webhook without side-effect declarations) gets the
	// cheap comparison's answer.
	if err == nil && sameContent(dry, live) {
		e.verdicts.Store(vk, verdictNone+sig)
		return nil, false, nil
	}
	e.verdicts.Store(vk, verdictReal+sig)
	return fields, true, nil
}

// asRecorded gives desired the live object's record of the manifest it was applied from
// (ManifestHashAnnotation), or none when it has none: the record is never drift. An object
// applied before Flotilla kept the record gets it at its next apply, not as a correction.
func asRecorded(desired, live *unstructured.Unstructured) {
	annotations := desired.GetAnnotations()
	v, ok := live.GetAnnotations()[workv1alpha1.ManifestHashAnnotation]
	switch {
	case ok && annotations == nil:
		annotations = map[string]string{workv1alpha1.ManifestHashAnnotation: v}
	case ok:
		annotations[workv1alpha1.ManifestHashAnnotation] = v
	default:
		delete(annotations, workv1alpha1.ManifestHashAnnotation)
	}
	desired.SetAnnotations(annotations)
}

// reportDeletion remembers that an object deleted by hand was reported (driftCorrection mode
// Report) and says whether this is the first time.
func (e *Executor) reportDeletion(key types.NamespacedName, cluster string, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) bool {
	vk := verdictKey{key, objectKey(cluster, gvr, obj)}
	last, _ := e.verdicts.Swap(vk, verdictDeleted)
	return last != verdictDeleted
}

// sameContent compares two versions of an object without what every write changes.
func sameContent(a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy()
		unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
		unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
		unstructured.RemoveNestedField(c.Object, "metadata", "generation")
		return c.Object
	}
	return apiequality.Semantic.DeepEqual(strip(a), strip(b))
}

func (e *Executor) rememberVerdict(key types.NamespacedName, cluster string, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, v string) {
	vk := verdictKey{key, objectKey(cluster, gvr, obj)}
	if v == "" {
		e.verdicts.Delete(vk)
		return
	}
	e.verdicts.Store(vk, v)
}

// forgetWork drops what was remembered of a Work that is gone.
func (e *Executor) forgetWork(key types.NamespacedName) {
	e.drift.Delete(key)
	e.verdicts.Range(func(k, _ any) bool {
		if k.(verdictKey).work == key {
			e.verdicts.Delete(k)
		}
		return true
	})
}

// ours says whether a member object is Flotilla's: labelled so, or recorded as applied by this
// Work and still holding fields applied by Flotilla's field manager. A label removed by hand
// is drift to put back, not a reason to give the object up.
func (e *Executor) ours(live *unstructured.Unstructured, w *workv1alpha1.Work, key types.NamespacedName, obj *unstructured.Unstructured) bool {
	if live.GetLabels()[workv1alpha1.ManagedByLabel] == workv1alpha1.ManagedByValue {
		return true
	}
	recorded := w.Status.Objects
	if last, ok := e.applied.Load(key); ok && last.(appliedWork).uid == w.UID {
		recorded = last.(appliedWork).objects
	}
	for _, o := range recorded {
		if o.APIVersion == obj.GetAPIVersion() && o.Kind == obj.GetKind() && o.Namespace == obj.GetNamespace() && o.Name == obj.GetName() {
			return appliedByFlotilla(live)
		}
	}
	return false
}

// appliedByFlotilla says whether Flotilla's field manager applied fields of the object.
func appliedByFlotilla(live *unstructured.Unstructured) bool {
	for _, mf := range live.GetManagedFields() {
		if mf.Manager == kube.FieldManager && mf.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

func driftedObject(obj *unstructured.Unstructured, fields []string) workv1alpha1.DriftedObject {
	if len(fields) > 32 {
		fields = append(fields[:31:31], fmt.Sprintf("(%d more)", len(fields)-31))
	}
	for i, f := range fields {
		fields[i] = truncate(f, 512)
	}
	return workv1alpha1.DriftedObject{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Fields: fields}
}

// DescribeDrift says which objects and fields drifted, for messages and events.
func DescribeDrift(objects []workv1alpha1.DriftedObject) string {
	parts := make([]string, 0, len(objects))
	for _, o := range objects {
		ref := o.Name
		if o.Namespace != "" {
			ref = o.Namespace + "/" + o.Name
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", o.Kind, ref, strings.Join(o.Fields, ", ")))
	}
	return strings.Join(parts, "; ")
}

type driftRecord struct {
	uid    types.UID
	status *workv1alpha1.DriftStatus
}

// recordDrift puts what was found into the Work's status: corrections are counted (this
// process's record is what counts until the status is written), reported drift sets
// Drifted=True. Corrections and newly reported drift are events on the binding and the
// template, and count in flotilla_drift_total.
func (e *Executor) recordDrift(ctx context.Context, key types.NamespacedName, cluster string, w *workv1alpha1.Work, status *workv1alpha1.WorkStatus, corrected, reported, newlyReported []workv1alpha1.DriftedObject) {
	d := status.Drift.DeepCopy()
	if rec, ok := e.drift.Load(key); ok && rec.(driftRecord).uid == w.UID {
		d = rec.(driftRecord).status.DeepCopy()
	}
	if d == nil {
		d = &workv1alpha1.DriftStatus{}
	}
	report := w.Spec.DriftMode() == workv1alpha1.DriftReport
	if len(corrected) > 0 {
		d.Corrections += int64(len(corrected))
		now := metav1.Now()
		d.LastCorrectionTime = &now
		d.Objects = corrected
		driftTotal.WithLabelValues(cluster).Add(float64(len(corrected)))
		e.driftEvent(ctx, w, corev1.EventTypeNormal, "DriftCorrected", fmt.Sprintf("cluster %s: put back what was changed by hand in %s", cluster, DescribeDrift(corrected)))
	}
	if report {
		d.Objects = append(append([]workv1alpha1.DriftedObject(nil), corrected...), reported...)
	}
	if len(d.Objects) > 64 {
		d.Objects = d.Objects[:64]
	}
	if len(newlyReported) > 0 {
		driftTotal.WithLabelValues(cluster).Add(float64(len(newlyReported)))
		e.driftEvent(ctx, w, corev1.EventTypeWarning, "Drifted", fmt.Sprintf("cluster %s: changed by hand and left as it is (driftCorrection mode Report): %s", cluster, DescribeDrift(newlyReported)))
	}
	if d.Corrections == 0 && d.LastCorrectionTime == nil && len(d.Objects) == 0 {
		d = nil
	}
	status.Drift = d
	e.drift.Store(key, driftRecord{w.UID, d.DeepCopy()})

	cond := metav1.Condition{Type: workv1alpha1.ConditionDrifted, Status: metav1.ConditionFalse, Reason: "InSync",
		Message: "the member objects match the manifests", ObservedGeneration: w.Generation}
	switch {
	case report && len(reported) > 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, "Drifted"
		cond.Message = truncate(fmt.Sprintf("cluster %s: %s", cluster, DescribeDrift(reported)), 4096)
	case meta.FindStatusCondition(status.Conditions, workv1alpha1.ConditionDrifted) == nil:
		return // never drifted under Report: no condition, no write
	}
	meta.SetStatusCondition(&status.Conditions, cond)
}

// driftEvent records an event on the Work's binding and on its template; each finding is an
// event of its own (the recorder keeps distinct notes apart).
func (e *Executor) driftEvent(ctx context.Context, w *workv1alpha1.Work, eventType, reason, msg string) {
	log := ctrl.LoggerFrom(ctx)
	log.Info("Drift", "reason", reason, "message", msg)
	if e.Recorder == nil {
		return
	}
	if e.Agent { // an agent sees no bindings: the event is the Work's, the control plane resolves it
		e.Recorder.Eventf(w, nil, eventType, reason, "Drift", "%s", msg)
		return
	}
	b := workv1alpha1.NewBinding(w.Labels[workv1alpha1.BindingNamespaceLabel], w.Labels[workv1alpha1.BindingNameLabel])
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		return
	}
	r := b.BindingSpec().Resource
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion(r.APIVersion)
	tmpl.SetKind(r.Kind)
	tmpl.SetNamespace(r.Namespace)
	tmpl.SetName(r.Name)
	tmpl.SetUID(types.UID(r.UID))
	e.Recorder.Eventf(b, nil, eventType, reason, "Drift", "%s", msg)
	e.Recorder.Eventf(tmpl, nil, eventType, reason, "Drift", "%s", msg)
}

// checkEveryWork is the safety net under the member events: every interval each Work is
// compared with its member objects again (from the informers; an object without Flotilla's
// label or gone is read from the member).
func (e *Executor) checkEveryWork(ctx context.Context) error {
	t := time.NewTicker(e.DriftCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		works := &workv1alpha1.WorkList{}
		if err := e.Client.List(ctx, works, client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing Works for the drift check")
			continue
		}
		for i := range works.Items {
			if !strings.HasPrefix(works.Items[i].Namespace, kube.ExecutionNamespacePrefix) {
				continue
			}
			e.changes.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&works.Items[i])})
		}
	}
}
