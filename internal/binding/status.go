package binding

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/render"
	"github.com/flotilla-dev/flotilla/internal/workloadstatus"
)

// statusSettle gathers the Work status changes of one binding that arrive close together
// into one reconcile, so the binding and template statuses are written once for them.
const statusSettle = time.Second

// releasedStatusSettle is the window for bindings released in waves.
const releasedStatusSettle = 100 * time.Millisecond

// report writes the status of the binding and of its template from the Works, and says when
// to look again.
func (c *Controller) report(ctx context.Context, p *pass, renderErrors map[string]string) (time.Duration, error) {
	var interpretErrors []string
	if p.replicasErr != nil {
		interpretErrors = append(interpretErrors, p.replicasErr.Error())
	}
	for cluster, msg := range renderErrors {
		if strings.Contains(msg, "interpreter customization ") {
			interpretErrors = append(interpretErrors, cluster+": "+msg)
		}
	}
	sort.Strings(interpretErrors)
	ro, err := c.rolloutOf(ctx, p.b, p.tmpl, p.in)
	if err != nil {
		return 0, err
	}
	record, err := c.dependencyRecord(ctx, p)
	if err != nil {
		return 0, err
	}
	return c.aggregate(ctx, p.b, p.tmpl, p.in, ro, p.existing, renderErrors, interpretErrors, depReport{held: p.held, record: record})
}

var healthRank = map[workv1alpha1.Health]int{workv1alpha1.HealthHealthy: 0, workv1alpha1.HealthProgressing: 1, workv1alpha1.HealthUnknown: 2, workv1alpha1.HealthDegraded: 3}

// gathered is what the Works of a binding report, cluster by cluster.
type gathered struct {
	clusters   []workv1alpha1.ClusterStatus
	overall    workv1alpha1.Health
	allApplied bool
	// members are the clusters' object statuses, for the interpreter to aggregate.
	members []interpret.MemberStatus
	// problems are why clusters are not applied; interpretErrors what the interpreter failed
	// at; drifted the Drifted=True messages of the Works (driftCorrection mode Report);
	// waiting what held clusters wait for.
	problems, interpretErrors, drifted, waiting []string
}

// aggregate writes the binding's per-cluster status and the template's aggregated status.
func (c *Controller) aggregate(ctx context.Context, b workv1alpha1.Binding, tmpl *unstructured.Unstructured, in interpret.Interpreter, ro templateRollout, works map[string]*workv1alpha1.Work, renderErrors map[string]string, interpretErrors []string, dep depReport) (time.Duration, error) {
	bs := b.BindingSpec()
	if _, decided := workv1alpha1.ScheduleOf(b); !decided && len(bs.Clusters) == 0 {
		return 0, nil // the scheduler has not decided yet: nothing to report, no write
	}
	g := c.gather(ctx, b, ro, works, renderErrors, dep.held)
	g.interpretErrors = append(interpretErrors, g.interpretErrors...)
	status := b.BindingStatus().DeepCopy()
	status.ObservedGeneration = b.GetGeneration()
	status.Clusters, status.Health = g.clusters, g.overall
	status.Dependencies = dep.record
	var agg map[string]any
	if len(g.members) == len(status.Clusters) { // every member reported
		var err error
		if agg, err = in.AggregateStatus(tmpl, g.members); err != nil {
			g.interpretErrors = append(g.interpretErrors, err.Error())
			agg = nil
		}
	}
	c.setConditions(b, status, g)
	summarize(status, len(bs.Clusters) > 0, b.GetGeneration())
	c.Board.Put(b, status)
	wrote := c.wroteAlready(b, status) // first: it also forgets a record the cache has passed
	changed := !apiequality.Semantic.DeepEqual(status, b.BindingStatus()) && !wrote
	if wait := c.progressWait(b, status, changed); wait > 0 {
		return wait, nil
	}
	if changed {
		seenAt := b.GetResourceVersion()
		if err := writeStatus(ctx, c.Client, b, status); err != nil {
			return 0, err
		}
		c.statusWritten.Store(client.ObjectKeyFromObject(b), writtenStatus{seenAt, status.DeepCopy()})
	}
	if sc := meta.FindStatusCondition(status.Conditions, workv1alpha1.ConditionScheduled); len(bs.Clusters) == 0 && sc != nil && sc.Status == metav1.ConditionFalse {
		// No cluster can run it: the template says so, and tools waiting on it stop waiting.
		return 0, workloadstatus.WriteUnplaced(ctx, c.Client, tmpl, sc.Reason, "no cluster can run it: "+sc.Message, true)
	}
	if agg == nil {
		return 0, nil // not every member reported yet, or the kind's status is not aggregated
	}
	return 0, c.writeTemplateStatus(ctx, tmpl, in, agg, ro, g.drifted)
}

// gather reads each target cluster's status from its Work, in cluster order.
func (c *Controller) gather(ctx context.Context, b workv1alpha1.Binding, ro templateRollout, works map[string]*workv1alpha1.Work, renderErrors map[string]string, held map[string]string) gathered {
	bs := b.BindingSpec()
	g := gathered{overall: workv1alpha1.HealthHealthy, allApplied: len(bs.Clusters) > 0}
	for _, t := range bs.Clusters {
		if slices.Contains(bs.UnmanagedClusters, t.Name) {
			continue // handed back: no Work, no status
		}
		cs := workv1alpha1.ClusterStatus{Cluster: t.Name, Health: workv1alpha1.HealthUnknown}
		if w, ok := works[t.Name]; ok {
			g.fromWork(b, ro, &cs, w)
		}
		if _, had := c.hadWork.Load(workKey(b, t.Name)); cs.LastApplied == nil && !had {
			// This process has had no Work there yet (it just started): what the member
			// last got stays on record until one reports.
			cs.LastApplied = previousApplied(b, t.Name)
		}
		if msg, bad := renderErrors[t.Name]; bad {
			cs.Applied, cs.Message = false, msg
			g.problems = append(g.problems, msg)
		} else if why, waits := held[t.Name]; waits {
			withWait(b, &cs, why, c.now())
			g.waiting = append(g.waiting, t.Name+": "+why)
		}
		if !cs.Applied {
			g.allApplied = false
		}
		c.clusterState(ctx, b, &cs)
		if healthRank[cs.Health] > healthRank[g.overall] {
			g.overall = cs.Health
		}
		g.clusters = append(g.clusters, cs)
	}
	sort.Slice(g.clusters, func(i, j int) bool { return g.clusters[i].Cluster < g.clusters[j].Cluster })
	if len(bs.Clusters) == 0 {
		g.overall = workv1alpha1.HealthUnknown
	}
	return g
}

// fromWork fills one cluster's status from its Work's.
func (g *gathered) fromWork(b workv1alpha1.Binding, ro templateRollout, cs *workv1alpha1.ClusterStatus, w *workv1alpha1.Work) {
	bs := b.BindingSpec()
	applied := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.ConditionApplied)
	cs.Applied = applied != nil && applied.Status == metav1.ConditionTrue
	if applied != nil && !cs.Applied {
		cs.Message = applied.Message
		g.problems = append(g.problems, cs.Cluster+": "+applied.Message)
	}
	if w.Status.Health != "" {
		cs.Health = w.Status.Health
	}
	// The revision counts as running once the Work's current spec is applied.
	observed := cs.Applied && applied.ObservedGeneration == w.Generation
	if cs.Applied && !observed && cs.Health == workv1alpha1.HealthHealthy {
		// A new render is on its way: the health read is the previous one's, and a
		// Service must not narrow to pods that are not relabelled yet on its word.
		cs.Health = workv1alpha1.HealthProgressing
	}
	if observed {
		cs.Revision, _ = strconv.ParseInt(w.Labels[workv1alpha1.RevisionLabel], 10, 64)
		if _, ok := bs.Revisions.CanaryFor(cs.Cluster); ok {
			cs.CanaryHealth = workv1alpha1.HealthUnknown
			for _, o := range w.Status.Objects {
				if o.Name == render.CanaryName(bs.Resource.Name) && o.Kind == bs.Resource.Kind {
					cs.CanaryHealth, cs.CanaryAvailableReplicas = o.Health, o.AvailableReplicas
				}
			}
		}
	}
	if ic := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.ConditionInterpreted); ic != nil && ic.Status == metav1.ConditionFalse {
		g.interpretErrors = append(g.interpretErrors, cs.Cluster+": "+ic.Message)
		if cs.Message == "" {
			cs.Message = ic.Message
		}
	}
	if w.Status.AppliedHash != "" {
		cs.LastApplied = lastApplied(w)
	}
	cs.Drift = w.Status.Drift.DeepCopy()
	if dc := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.ConditionDrifted); dc != nil && dc.Status == metav1.ConditionTrue {
		g.drifted = append(g.drifted, dc.Message)
	}
	cs.Status = w.Status.ManifestStatus
	if cs.Health == workv1alpha1.HealthDegraded && cs.Message == "" {
		cs.Message = failingConditions(w.Status.ManifestStatus)
	}
	if w.Status.ManifestStatus != nil {
		m := map[string]any{}
		if json.Unmarshal(w.Status.ManifestStatus.Raw, &m) == nil {
			g.members = append(g.members, interpret.MemberStatus{Cluster: cs.Cluster, Status: m, Applied: cs.Applied, Health: cs.Health,
				Revision: cs.Revision, Observed: observed, Current: ro.current(b, *cs, observed)})
		}
	}
}

// setConditions sets the binding's Applied, Healthy, Interpreted, Drifted and Scheduled
// conditions from what the Works reported.
func (c *Controller) setConditions(b workv1alpha1.Binding, status *workv1alpha1.ResourceBindingStatus, g gathered) {
	gen := b.GetGeneration()
	applied := metav1.Condition{Type: workv1alpha1.ConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied", Message: "applied in every target cluster", ObservedGeneration: gen}
	if !g.allApplied {
		applied.Status, applied.Reason, applied.Message = metav1.ConditionFalse, "NotApplied", "waiting for the members"
		if len(g.problems) > 0 {
			applied.Reason, applied.Message = "ApplyFailed", fmt.Sprint(g.problems)
		} else if len(g.waiting) > 0 {
			applied.Reason, applied.Message = ReasonWaitingForDependencies, truncateMessage("waiting for dependencies: "+strings.Join(g.waiting, "; "))
		}
	}
	meta.SetStatusCondition(&status.Conditions, applied)
	meta.RemoveStatusCondition(&status.Conditions, conditionStalled) // no longer refused
	healthy := metav1.Condition{Type: workv1alpha1.ConditionHealthy, Status: metav1.ConditionFalse, Reason: string(g.overall), Message: "health across clusters: " + string(g.overall), ObservedGeneration: gen}
	if g.overall == workv1alpha1.HealthHealthy {
		healthy.Status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&status.Conditions, healthy)
	interpreted := metav1.Condition{Type: workv1alpha1.ConditionInterpreted, Status: metav1.ConditionTrue, Reason: "Interpreted",
		Message: "every interpreter call succeeded", ObservedGeneration: gen}
	if len(g.interpretErrors) > 0 {
		msg := strings.Join(g.interpretErrors, "; ")
		if len(msg) > 4096 {
			msg = msg[:4093] + "..."
		}
		interpreted.Status, interpreted.Reason, interpreted.Message = metav1.ConditionFalse, "InterpreterError", msg
		if old := meta.FindStatusCondition(b.BindingStatus().Conditions, workv1alpha1.ConditionInterpreted); c.Recorder != nil && (old == nil || old.Message != msg) {
			c.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "InterpreterError", "Interpret", "%s", msg)
		}
	}
	meta.SetStatusCondition(&status.Conditions, interpreted)
	if len(g.drifted) > 0 {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.ConditionDrifted, Status: metav1.ConditionTrue, Reason: "Drifted",
			Message: truncateMessage(strings.Join(g.drifted, "; ")), ObservedGeneration: gen})
	} else if meta.FindStatusCondition(status.Conditions, workv1alpha1.ConditionDrifted) != nil {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.ConditionDrifted, Status: metav1.ConditionFalse, Reason: "InSync",
			Message: "the member objects match the manifests", ObservedGeneration: gen})
	}
	if s, ok := workv1alpha1.ScheduleOf(b); ok {
		// The scheduler's outcome, written with the clusters it chose; reported here, in this
		// controller's one status write.
		sc := metav1.Condition{Type: workv1alpha1.ConditionScheduled, Status: metav1.ConditionFalse, Reason: s.Reason, Message: truncateMessage(s.Message), ObservedGeneration: s.Generation}
		if s.Placed {
			sc.Status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&status.Conditions, sc)
	}
}

// writeTemplateStatus merges the members' aggregated status into the template's and writes it
// when it changed: condition times that did not change are kept (from the template, and from
// this controller's last write when the cache does not show it yet), so an unchanged fleet
// costs no write.
func (c *Controller) writeTemplateStatus(ctx context.Context, tmpl *unstructured.Unstructured, in interpret.Interpreter, agg map[string]any, ro templateRollout, drifted []string) error {
	current, _, _ := unstructured.NestedMap(tmpl.Object, "status")
	merged := map[string]any{}
	r, ok := in.(interface{ ReplacesStatus() bool })
	replaces := ok && r.ReplacesStatus()
	for k, v := range current {
		merged[k] = runtime.DeepCopyJSONValue(v) // edited below; current stays what is stored
	}
	for k, v := range agg {
		merged[k] = v
	}
	if replaces {
		// A script returns the whole status: what it leaves out goes (null in the merge patch).
		for k := range current {
			if _, kept := agg[k]; !kept {
				delete(merged, k)
			}
		}
	}
	dropCondition(merged, names.ConditionPropagated) // placed now: the detector's note is stale
	withReleaseVerdict(merged, ro)
	keepConditionTimes(merged, current)
	key := tmpl.GroupVersionKind().String() + "/" + tmpl.GetNamespace() + "/" + tmpl.GetName()
	seenAt := fmt.Sprintf("%s/%d", tmpl.GetUID(), tmpl.GetGeneration())
	if v, ok := c.templateWritten.Load(key); ok && v.(writtenPatch).before == seenAt {
		// The cache may not show the last write yet: its condition times are kept too, or a
		// pass over the stale copy would stamp new ones and write again.
		var last struct {
			Status map[string]any `json:"status"`
		}
		if json.Unmarshal(v.(writtenPatch).patch, &last) == nil {
			keepConditionTimes(merged, last.Status)
		}
	}
	withDriftedCondition(merged, current, drifted)
	if apiequality.Semantic.DeepEqual(withoutEmpty(normalize(current)), withoutEmpty(normalize(merged))) {
		return nil
	}
	patchStatus := map[string]any{}
	for k, v := range merged {
		patchStatus[k] = v
	}
	for k := range current {
		if _, ok := merged[k]; !ok {
			patchStatus[k] = nil
		}
	}
	patch, _ := json.Marshal(map[string]any{"status": patchStatus})
	// The same patch for the same template and generation was written: the cache may not show
	// it yet, and a built-in kind's stored status drops zero counters, so it never reads equal.
	if v, ok := c.templateWritten.Load(key); ok && v.(writtenPatch).before == seenAt && string(v.(writtenPatch).patch) == string(patch) {
		return nil
	}
	if err := c.Client.Status().Patch(ctx, tmpl, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	c.templateWritten.Store(key, writtenPatch{seenAt, patch})
	return nil
}

// progressWriteInterval bounds how often the status of a workload on its way (applied and not
// yet healthy everywhere, or not applied yet) is written: each such write of the binding and
// of the template costs a control-plane write, and most rollouts settle within it. A settled
// state (healthy everywhere, degraded, failed, refused) is written at once, so failover and
// tools waiting on the template lose no time; history and releases read each step from the
// status board before it is written.
const progressWriteInterval = 10 * time.Second

// progressWait says how long a changed status waits before it is written; 0 writes now. A
// workload on its way waits, and so does a change of the members' status details alone (a
// Deployment's counters settling after it turned healthy): neither changes a verdict anyone
// acts on. The wait runs from the first unwritten change.
func (c *Controller) progressWait(b workv1alpha1.Binding, status *workv1alpha1.ResourceBindingStatus, changed bool) time.Duration {
	key := client.ObjectKeyFromObject(b)
	ready := meta.FindStatusCondition(status.Conditions, workv1alpha1.ConditionReady)
	onItsWay := ready != nil && ready.Reason == workv1alpha1.ReasonProgressing
	if !changed || !onItsWay && !apiequality.Semantic.DeepEqual(withoutDetails(status), withoutDetails(b.BindingStatus())) {
		c.progressSince.Delete(key)
		return 0
	}
	first, _ := c.progressSince.LoadOrStore(key, time.Now())
	if wait := progressWriteInterval - time.Since(first.(time.Time)); wait > 0 {
		return wait
	}
	c.progressSince.Delete(key)
	return 0
}

type writtenPatch struct {
	before string
	patch  []byte
}

type writtenStatus struct {
	before string
	status *workv1alpha1.ResourceBindingStatus
}

// wroteAlready says whether status is what this controller wrote last, over the cached
// binding it still sees. A record made over an older binding than the cached one can never
// match again (the cache only moves forward), so it goes with the status copy it holds, which
// would otherwise stay for the binding's life.
func (c *Controller) wroteAlready(b workv1alpha1.Binding, status *workv1alpha1.ResourceBindingStatus) bool {
	key := client.ObjectKeyFromObject(b)
	v, ok := c.statusWritten.Load(key)
	if !ok {
		return false
	}
	w := v.(writtenStatus)
	if w.before != b.GetResourceVersion() {
		c.statusWritten.CompareAndDelete(key, v)
		return false
	}
	return apiequality.Semantic.DeepEqual(w.status, status)
}

// withoutDetails is a binding status without the members' own status objects.
func withoutDetails(st *workv1alpha1.ResourceBindingStatus) *workv1alpha1.ResourceBindingStatus {
	out := st.DeepCopy()
	for i := range out.Clusters {
		out.Clusters[i].Status = nil
	}
	return out
}

// failingConditions says why a member object reads Degraded, from its status conditions
// (a Deployment's Progressing=False ProgressDeadlineExceeded: "...", ReplicaFailure=True).
func failingConditions(status *runtime.RawExtension) string {
	if status == nil {
		return ""
	}
	var st struct {
		Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
	}
	if json.Unmarshal(status.Raw, &st) != nil {
		return ""
	}
	var parts []string
	for _, c := range st.Conditions {
		failing := c.Status == "False" && (c.Type == "Progressing" || c.Type == "Available" || c.Type == "Ready")
		failing = failing || c.Status == "True" && (c.Type == "ReplicaFailure" || c.Type == "Failed" || c.Type == "Stalled")
		if failing {
			parts = append(parts, strings.TrimSuffix(fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message), ": "))
		}
	}
	return truncateMessage(strings.Join(parts, "; "))
}

func truncateMessage(msg string) string {
	if len(msg) > 4096 {
		return msg[:4093] + "..."
	}
	return msg
}

// withDriftedCondition puts a Drifted condition into the template's aggregated status while
// a member object differs and the policy only reports it (driftCorrection mode Report), and
// takes it out when none does.
func withDriftedCondition(merged, current map[string]any, drifted []string) {
	conds, _ := merged["conditions"].([]any)
	var kept []any
	old := findCondition(current, workv1alpha1.ConditionDrifted)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == workv1alpha1.ConditionDrifted {
			continue
		}
		kept = append(kept, c)
	}
	if len(drifted) > 0 {
		since := metav1.Now().UTC().Format(time.RFC3339)
		if old != nil && old["status"] == string(metav1.ConditionTrue) {
			if t, ok := old["lastTransitionTime"].(string); ok {
				since = t
			}
		}
		kept = append(kept, map[string]any{"type": workv1alpha1.ConditionDrifted, "status": string(metav1.ConditionTrue), "reason": "Drifted",
			"message": truncateMessage(strings.Join(drifted, "; ")), "lastTransitionTime": since, "lastUpdateTime": since})
	}
	if old == nil && len(drifted) == 0 {
		return
	}
	if len(kept) == 0 {
		if _, had := current["conditions"]; had {
			merged["conditions"] = []any{}
		} else {
			delete(merged, "conditions")
		}
		return
	}
	merged["conditions"] = kept
}

// normalize makes JSON numbers comparable whatever their Go type.
// withoutEmpty drops the zero values of a JSON value's fields (0, "", false, null, {} and []),
// at any depth: a built-in kind's stored status omits them, so a status that differs from the
// stored one only by them is the same status (a restarted manager, with no record of its
// last write, would otherwise write every template's status once more).
func withoutEmpty(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			if e = withoutEmpty(e); !kube.ZeroJSON(e) {
				out[k] = e
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = withoutEmpty(e)
		}
		return out
	}
	return v
}

func normalize(m map[string]any) any {
	data, _ := json.Marshal(m)
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

// lastApplied is the record of what a Work applied, its objects without their health.
func lastApplied(w *workv1alpha1.Work) *workv1alpha1.LastApplied {
	la := &workv1alpha1.LastApplied{Hash: w.Status.AppliedHash}
	if u := kube.RenderedTemplate(w); u != nil && kube.AppliedThisSpec(w) {
		if n, found, err := unstructured.NestedInt64(u.Object, "spec", "replicas"); found && err == nil {
			la.Replicas = &n
		}
	}
	for _, o := range w.Status.Objects {
		la.Objects = append(la.Objects, workv1alpha1.AppliedObject{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})
	}
	return la
}

// workKey names a binding's Work in one cluster.
func workKey(b workv1alpha1.Binding, cluster string) string {
	return cluster + "/" + WorkName(b)
}

// previousApplied is a cluster's record of what it last got, from the binding's status.
func previousApplied(b workv1alpha1.Binding, cluster string) *workv1alpha1.LastApplied {
	for _, cs := range b.BindingStatus().Clusters {
		if cs.Cluster == cluster && cs.LastApplied != nil {
			return cs.LastApplied.DeepCopy()
		}
	}
	return nil
}

// seededStatus is what a Work created after a restart starts from: what its cluster last
// reported, so that an unchanged render is not applied again and the binding's status does
// not flap while the executor looks again.
func seededStatus(b workv1alpha1.Binding, cluster string, generation int64) (workv1alpha1.WorkStatus, bool) {
	for _, cs := range b.BindingStatus().Clusters {
		if cs.Cluster != cluster || cs.LastApplied == nil {
			continue
		}
		st := workv1alpha1.WorkStatus{AppliedHash: cs.LastApplied.Hash, Health: cs.Health, ManifestStatus: cs.Status, Drift: cs.Drift.DeepCopy()}
		st.Objects = append(st.Objects, cs.LastApplied.Objects...)
		if cs.Applied {
			st.Conditions = []metav1.Condition{{Type: workv1alpha1.ConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied",
				Message: "applied before the controller-manager restarted", ObservedGeneration: generation, LastTransitionTime: metav1.Now()}}
		}
		return st, true
	}
	return workv1alpha1.WorkStatus{}, false
}
