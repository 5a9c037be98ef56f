package release

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
	"github.com/flotilla-dev/flotilla/internal/revision"
	"github.com/flotilla-dev/flotilla/internal/traffic"
)

// trafficPoll is how often a release looks again at routes and Services it waits for: their
// Works are another binding's, whose changes do not wake the release.
const trafficPoll = 500 * time.Millisecond

// defaultScaleDownDelay keeps the old stack of a blue-green wave this long after the switch.
const defaultScaleDownDelay = 30 * time.Second

func routed(rel *rolloutv1alpha1.Release) bool { return rel.Spec.Strategy.TrafficRouting != nil }

func blueGreen(rel *rolloutv1alpha1.Release) bool { return rel.Spec.Strategy.BlueGreen != nil }

// trafficStep is what a routed canary runs at one step: the last setWeight, setCanaryScale
// and setHeaderRoute up to it.
type trafficStep struct {
	weight int32
	scale  *policyv1alpha1.CanaryScale
	header []policyv1alpha1.HeaderMatch
}

func trafficAt(steps []policyv1alpha1.CanaryStep, k int) trafficStep {
	var t trafficStep
	for _, st := range steps[:k+1] {
		switch {
		case st.SetWeight != nil:
			t.weight = *st.SetWeight
		case st.SetCanaryScale != nil:
			t.scale = st.SetCanaryScale
			if st.SetCanaryScale.MatchTrafficWeight {
				t.scale = nil
			}
		case st.SetHeaderRoute != nil:
			t.header = st.SetHeaderRoute.Match
		}
	}
	return t
}

// replicas is the canary's size in a cluster of share replicas: setCanaryScale's, or the
// weight's share rounded up; at least one while it gets requests.
func (t trafficStep) replicas(share int32) int32 {
	pct := t.weight
	n := int32(-1)
	if t.scale != nil {
		if t.scale.Replicas != nil {
			n = *t.scale.Replicas
		}
		if t.scale.Weight != nil {
			pct = *t.scale.Weight
		}
	}
	if n < 0 {
		n = int32(math.Ceil(float64(pct) * float64(share) / 100))
	}
	if n == 0 && (t.weight > 0 || len(t.header) > 0) {
		n = 1 // a canary that gets requests runs, whatever setCanaryScale says
	}
	return n
}

// setTraffic pins the clusters' canaries at the step's size and header route, and their
// routes at the step's weight, or at most at ceiling when set: a weight above what a
// cluster's routes carry for this revision waits there (the canary grows first).
func (s *step) setTraffic(clusters []string, t trafficStep, ceiling *int32) map[string]int32 {
	share := map[string]int32{}
	for _, tc := range s.binding.BindingSpec().Clusters {
		share[tc.Name] = tc.Replicas
	}
	counts := map[string]int32{}
	for _, cl := range clusters {
		weight := t.weight
		if ceiling != nil {
			weight = min(weight, *ceiling, routedWeight(s.revs, cl, s.rel.Spec.Revision))
		}
		pin := workv1alpha1.CanaryPin{Cluster: cl, Revision: s.rel.Spec.Revision, Replicas: t.replicas(share[cl]),
			Weight: &weight, HeaderMatch: t.header}
		counts[cl] = pin.Replicas
		s.putCanary(pin)
		s.markUpdated(cl)
	}
	return counts
}

// routedWeight is the canary weight a cluster's routes are set to for revision rev: none
// while its canary is another revision's.
func routedWeight(revs *workv1alpha1.Revisions, cluster string, rev int64) int32 {
	if pin, ok := revs.CanaryFor(cluster); ok && pin.Revision == rev && pin.Weight != nil {
		return *pin.Weight
	}
	return 0
}

// pinnedAs says whether the binding already pinned every cluster's canary at counts, so its
// status can speak of canaries of that size (a count raised in this pass has no status yet).
func pinnedAs(revs *workv1alpha1.Revisions, counts map[string]int32, rev int64) bool {
	for cl, n := range counts {
		if pin, ok := revs.CanaryFor(cl); !ok || pin.Revision != rev || pin.Replicas != n {
			return false
		}
	}
	return true
}

// canaryShort names the clusters whose canary does not yet have its counts[cl] replicas
// available and says how far each got ("1/3 available in east"). A kind that reports no count
// is judged by its health alone; either way the canary must run healthy, by a status fresh
// for counts.
func canaryShort(clusters []string, counts map[string]int32, reported map[string]workv1alpha1.ClusterStatus, fresh bool) (waiting, short []string) {
	starting, _ := canaryWait(clusters, counts, reported, fresh)
	for _, cl := range clusters {
		want, avail := counts[cl], reported[cl].CanaryAvailableReplicas
		var why string
		switch {
		case want == 0:
		case avail != nil && *avail < want:
			why = fmt.Sprintf("%d/%d available in %s", *avail, want, cl)
		case !slices.Contains(starting, cl):
		case avail != nil:
			why = fmt.Sprintf("%d/%d available in %s, not reported healthy yet", *avail, want, cl)
		default:
			why = fmt.Sprintf("%d starting in %s", want, cl)
		}
		if why != "" {
			waiting, short = append(waiting, cl), append(short, why)
		}
	}
	return waiting, short
}

// putCanary sets a cluster's canary pin, pins sorted by cluster.
func (s *step) putCanary(pin workv1alpha1.CanaryPin) {
	i := slices.IndexFunc(s.revs.Canaries, func(c workv1alpha1.CanaryPin) bool { return c.Cluster == pin.Cluster })
	if i >= 0 {
		s.revs.Canaries[i] = pin
		return
	}
	s.revs.Canaries = append(s.revs.Canaries, pin)
	slices.SortFunc(s.revs.Canaries, func(a, b workv1alpha1.CanaryPin) int { return strings.Compare(a.Cluster, b.Cluster) })
}

// trafficToStable sends every request of the clusters to the primaries (no weight, no header
// route, the active Service on the primaries) and keeps the canaries running, so they are
// removed only once no route sends to them. It says whether the clusters have canaries.
func trafficToStable(revs *workv1alpha1.Revisions, clusters []string) bool {
	any := false
	for i := range revs.Canaries {
		c := &revs.Canaries[i]
		if clusters != nil && !slices.Contains(clusters, c.Cluster) {
			continue
		}
		any = true
		if c.Weight != nil {
			c.Weight = new(int32)
		}
		c.HeaderMatch, c.Active = nil, false
	}
	return any
}

// trafficObject is a route or Service a release's traffic is set in.
type trafficObject struct{ kind, name string }

func trafficObjects(t *workv1alpha1.TrafficTargets) []trafficObject {
	var objects []trafficObject
	if t.HTTPRoute != "" {
		objects = append(objects, trafficObject{"HTTPRoute", t.HTTPRoute})
	}
	if t.VirtualService != "" {
		objects = append(objects, trafficObject{"VirtualService", t.VirtualService})
	}
	if t.ActiveService != "" {
		objects = append(objects, trafficObject{"Service", t.ActiveService})
	}
	return objects
}

// clusterTraffic reads a cluster's routes (trafficRouting) or active Service (blueGreen) as
// their Works render and the executor applied them: how many are placed there, and what each
// one not yet rendered with the split revs give it, or not yet applied, waits for.
func (c *Controller) clusterTraffic(ctx context.Context, b workv1alpha1.Binding, revs *workv1alpha1.Revisions, cluster string) (int, []string, error) {
	t := revs.Traffic
	want := traffic.StateFor(revs, cluster)
	placed := 0
	var waiting []string
	for _, o := range trafficObjects(t) {
		w := &workv1alpha1.Work{}
		if err := kube.GetWork(ctx, c.Client, b.GetNamespace(), names.Binding(o.kind, o.name), cluster, w); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return 0, nil, err
			}
			continue
		}
		placed++
		got, err := renderedSplit(w, t)
		if err != nil {
			return 0, nil, err
		}
		applied := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.ConditionApplied)
		switch {
		case got != describeState(o.kind, want):
			msg := fmt.Sprintf("%s %s in %s to be rendered with %s", o.kind, o.name, cluster, describeState(o.kind, want))
			if why := c.renderError(ctx, b.GetNamespace(), names.Binding(o.kind, o.name), cluster); why != "" {
				msg += " (its binding says: " + why + ")"
			}
			waiting = append(waiting, msg)
		case applied == nil || applied.Status != metav1.ConditionTrue || applied.ObservedGeneration != w.Generation:
			waiting = append(waiting, fmt.Sprintf("%s %s in %s to be applied", o.kind, o.name, cluster))
		}
	}
	return placed, waiting, nil
}

// notPlaced says which of a release's routes or Services a cluster waits for, none being placed.
func notPlaced(t *workv1alpha1.TrafficTargets, cluster string) string {
	var names []string
	for _, o := range trafficObjects(t) {
		names = append(names, o.kind+" "+o.name)
	}
	return fmt.Sprintf("%s to be placed in %s (place it with a policy of its own, on the workload's clusters)", strings.Join(names, " or "), cluster)
}

// trafficSettled says whether every cluster's routes (trafficRouting) or active Service
// (blueGreen) were rendered with the split revs give it and applied in the member, and if not,
// what is awaited.
// An object not placed in a cluster is skipped (a fleet may run Istio in some clusters and a
// Gateway API implementation in others), but each cluster of a routed release needs one of
// its routes unless lenient (a finished release removing its canaries).
func (c *Controller) trafficSettled(ctx context.Context, b workv1alpha1.Binding, revs *workv1alpha1.Revisions, clusters []string, lenient ...bool) (bool, string, error) {
	if revs.Traffic == nil {
		return true, "", nil
	}
	var waiting []string
	for _, cl := range clusters {
		placed, pending, err := c.clusterTraffic(ctx, b, revs, cl)
		if err != nil {
			return false, "", err
		}
		waiting = append(waiting, pending...)
		if placed == 0 && !(len(lenient) > 0 && lenient[0]) {
			waiting = append(waiting, notPlaced(revs.Traffic, cl))
		}
	}
	if len(waiting) > 0 {
		return false, "waiting for " + strings.Join(waiting, "; "), nil
	}
	return true, "", nil
}

// renderError is what the binding of a route or Service says keeps it from being rendered
// for a cluster, if anything.
func (c *Controller) renderError(ctx context.Context, namespace, binding, cluster string) string {
	rb := &workv1alpha1.ResourceBinding{}
	if c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: binding}, rb) != nil {
		return ""
	}
	for _, cs := range rb.Status.Clusters {
		if cs.Cluster == cluster && !cs.Applied {
			return cs.Message
		}
	}
	return ""
}

// renderedSplit describes the split a route or active Service Work renders.
func renderedSplit(w *workv1alpha1.Work, t *workv1alpha1.TrafficTargets) (string, error) {
	if len(w.Spec.Manifests) == 0 {
		return "", nil
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(w.Spec.Manifests[len(w.Spec.Manifests)-1].Raw, &u.Object); err != nil {
		return "", fmt.Errorf("work %s/%s: %w", w.Namespace, w.Name, err)
	}
	if u.GetKind() == "Service" {
		role, _, _ := unstructured.NestedString(u.Object, "spec", "selector", traffic.RoleLabel)
		return "selects the " + role + " pods", nil
	}
	split, _ := traffic.Read(u, t)
	return split.String(), nil
}

func describeState(kind string, st traffic.State) string {
	if kind == "Service" {
		if st.Active {
			return "selects the " + traffic.RoleCanary + " pods"
		}
		return "selects the " + traffic.RoleStable + " pods"
	}
	return traffic.Split{Canary: st.Weight, Header: len(st.HeaderMatch) > 0}.String()
}

// finishTraffic removes what a finished release left running behind its routes: the
// canaries, once the routes send nothing to them. It says whether anything is left.
func (c *Controller) finishTraffic(ctx context.Context, rel *rolloutv1alpha1.Release, b workv1alpha1.Binding) (bool, error) {
	revs := b.BindingSpec().Revisions.DeepCopy()
	var clusters []string
	for _, cp := range revs.Canaries {
		if cp.Revision == rel.Spec.Revision {
			clusters = append(clusters, cp.Cluster)
		}
	}
	if len(clusters) == 0 {
		return false, nil
	}
	trafficToStable(revs, clusters)
	if settled, _, err := c.trafficSettled(ctx, b, revs, clusters, true); err != nil || !settled {
		if err == nil {
			err = SetRevisions(ctx, c.Client, b, revs)
		}
		return true, err
	}
	revs.Canaries = slices.DeleteFunc(revs.Canaries, func(cp workv1alpha1.CanaryPin) bool { return slices.Contains(clusters, cp.Cluster) })
	return false, SetRevisions(ctx, c.Client, b, revs)
}

// blueGreenWave runs a blue-green wave up to the switch and the scale-down delay after it:
// step 0 runs the new stack at full scale behind the preview Service and runs the wave's
// gates against it, then switches the active Service; step 1 keeps the old stack for the
// delay. It says whether both are done (the primaries then take the revision).
func (c *Controller) blueGreenWave(ctx context.Context, s *step, ws *rolloutv1alpha1.WaveStatus, i int, wave Wave, clusterStatus map[string]workv1alpha1.ClusterStatus) (bool, error) {
	rel := s.rel
	bg := rel.Spec.Strategy.BlueGreen
	if ws.StepStartedAt == nil {
		ws.StepStartedAt = &metav1.MicroTime{Time: s.now}
	}
	share := map[string]int32{}
	for _, tc := range s.binding.BindingSpec().Clusters {
		share[tc.Name] = tc.Replicas
	}
	if ws.CurrentStep == 0 {
		// A stack an earlier release switched to goes out of the active Service before it
		// takes this release's revision: users never reach a revision its gates did not pass.
		var inherited []string
		for _, cl := range wave.Clusters {
			if pin, ok := s.revs.CanaryFor(cl); ok && pin.Active && pin.Revision != rel.Spec.Revision {
				pin.Active = false
				s.putCanary(pin)
				inherited = append(inherited, cl)
			}
		}
		if len(inherited) > 0 {
			ws.Phase, ws.Message = rolloutv1alpha1.WaveUpdating, fmt.Sprintf("switching %s back to the primaries in %s before the preview takes revision %d", bg.ActiveService, strings.Join(inherited, ", "), rel.Spec.Revision)
			s.after(trafficPoll)
			return false, nil
		}
		if settled, msg, err := c.trafficSettled(ctx, s.binding, s.revs, wave.Clusters); err != nil || !settled {
			ws.Phase, ws.Message = rolloutv1alpha1.WaveUpdating, "waiting for the active Service: "+msg
			s.after(trafficPoll)
			return false, err
		}
		for _, cl := range wave.Clusters {
			pin, _ := s.revs.CanaryFor(cl)
			s.putCanary(workv1alpha1.CanaryPin{Cluster: cl, Revision: rel.Spec.Revision, Replicas: max(share[cl], 1), Active: pin.Active && pin.Revision == rel.Spec.Revision})
			s.markUpdated(cl)
		}
		waiting, degraded := canaryWait(wave.Clusters, nil, clusterStatus, s.statusFresh)
		if len(degraded) > 0 {
			return false, c.failed(ctx, s, fmt.Sprintf("wave %s: preview stack Degraded in %s", wave.Name, strings.Join(degraded, ", ")))
		}
		if len(waiting) > 0 {
			if s.overdue(ws) {
				return false, c.failed(ctx, s, fmt.Sprintf("wave %s: preview stack not healthy within the progress deadline %s in %s", wave.Name, progressDeadline(rel), strings.Join(waiting, ", ")))
			}
			ws.Phase, ws.Message = rolloutv1alpha1.WaveUpdating, fmt.Sprintf("preview: revision %d starting at full scale behind %s in %s", rel.Spec.Revision, bg.PreviewService, strings.Join(waiting, ", "))
			ws.HealthyAt = nil
			return false, nil
		}
		if ws.HealthyAt == nil {
			ws.HealthyAt = &metav1.MicroTime{Time: s.now} // the bake counts from here
		}
		promoted := rel.Spec.PromotedWave != nil && int(*rel.Spec.PromotedWave) >= i
		if wave.Spec != nil && !promoted {
			g := wave.Spec.Gates
			if bake, _, _ := policyv1alpha1.ParseDuration("", g.BakeTime); bake > 0 {
				if left := bake - s.now.Sub(ws.HealthyAt.Time); left > 0 {
					ws.Phase, ws.Message = rolloutv1alpha1.WaveBaking, fmt.Sprintf("preview healthy; baking %s more before the switch", left.Round(time.Second))
					s.after(left)
					return false, nil
				}
			}
			if g.Analysis != nil {
				if passed, err := c.waveAnalysis(ctx, s, ws, g.Analysis, wave, wave.Name+"-preview", "wave "+wave.Name+" preview", "preview healthy; "); !passed || err != nil {
					return false, err
				}
			}
			if g.ManualApproval {
				ws.Phase, ws.Message = rolloutv1alpha1.WaveWaitingForApproval, fmt.Sprintf("preview healthy behind %s; waiting for `flotilla release promote` to switch %s", bg.PreviewService, bg.ActiveService)
				return false, nil
			}
		}
		for _, cl := range wave.Clusters {
			pin, _ := s.revs.CanaryFor(cl)
			pin.Active = true
			s.putCanary(pin)
		}
		ws.CurrentStep, ws.StepStartedAt = 1, &metav1.MicroTime{Time: s.now}
	}
	var degraded []string
	for _, cl := range wave.Clusters {
		if cs := clusterStatus[cl]; s.statusFresh && cs.CanaryHealth == workv1alpha1.HealthDegraded {
			degraded = append(degraded, cl)
		}
	}
	if len(degraded) > 0 {
		return false, c.failed(ctx, s, fmt.Sprintf("wave %s: the new stack went Degraded after the switch in %s", wave.Name, strings.Join(degraded, ", ")))
	}
	if settled, msg, err := c.trafficSettled(ctx, s.binding, s.revs, wave.Clusters); err != nil || !settled {
		if err == nil && s.overdue(ws) {
			return false, c.failed(ctx, s, fmt.Sprintf("wave %s: %s was not switched within the progress deadline %s (%s)", wave.Name, bg.ActiveService, progressDeadline(rel), msg))
		}
		ws.Phase, ws.Message = rolloutv1alpha1.WaveUpdating, "switching "+bg.ActiveService+" to revision "+fmt.Sprint(rel.Spec.Revision)+": "+msg
		s.after(trafficPoll)
		return false, err
	}
	delay := defaultScaleDownDelay
	if d, set, _ := policyv1alpha1.ParseDuration("", bg.ScaleDownDelay); set {
		delay = d
	}
	if left := delay - s.now.Sub(ws.StepStartedAt.Time); left > 0 {
		ws.Phase, ws.Message = rolloutv1alpha1.WaveBaking, fmt.Sprintf("switched: %s serves revision %d; the old stack stays %s more for an instant rollback", bg.ActiveService, rel.Spec.Revision, left.Round(time.Second))
		s.after(left)
		return false, nil
	}
	ws.CurrentStep = 2
	return true, nil
}

// finishRouted removes the canaries a finished routed release left, once its routes send
// nothing to them.
func (c *Controller) finishRouted(ctx context.Context, rel *rolloutv1alpha1.Release) (ctrl.Result, error) {
	if rel.Spec.Binding.Kind != "ResourceBinding" {
		return ctrl.Result{}, nil
	}
	b := workv1alpha1.NewBinding(rel.Namespace, rel.Spec.Binding.Name)
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: rel.Spec.Binding.Name}, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if b.BindingSpec().Revisions == nil || foreignTarget(rel, b) != "" {
		return ctrl.Result{}, nil
	}
	left, err := c.finishTraffic(ctx, rel, b)
	if err != nil || !left {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: trafficPoll}, nil
}

// trafficStep runs a routed canary's setWeight, setCanaryScale or setHeaderRoute step: the
// canaries at the step's size, the routes at its weight and header route, and says whether
// the canaries run healthy and every cluster's routes were applied that way.
// As in Argo Rollouts, the canary grows first: the routes keep the weight the wave last set
// (ws.TrafficWeight) until the replicas the new weight needs are available in every cluster
// of the wave. A lower weight goes to the routes at once.
func (c *Controller) trafficStep(ctx context.Context, s *step, ws *rolloutv1alpha1.WaveStatus, wave Wave, k int, clusterStatus map[string]workv1alpha1.ClusterStatus) (bool, error) {
	ts := trafficAt(wave.Spec.Steps, k)
	held := int32(0)
	if ws.TrafficWeight != nil {
		held = *ws.TrafficWeight
	}
	counts := s.setTraffic(wave.Clusters, ts, &held)
	fresh := s.statusFresh && pinnedAs(s.binding.BindingSpec().Revisions, counts, s.rel.Spec.Revision)
	_, degraded := canaryWait(wave.Clusters, counts, clusterStatus, s.statusFresh)
	label := revision.StepLabel(wave.Spec.Steps, k)
	if len(degraded) > 0 {
		return false, c.failed(ctx, s, fmt.Sprintf("wave %s: canary Degraded in %s", wave.Name, strings.Join(degraded, ", ")))
	}
	ws.Phase = rolloutv1alpha1.WaveUpdating
	if waiting, short := canaryShort(wave.Clusters, counts, clusterStatus, fresh); len(short) > 0 {
		if s.overdue(ws) {
			return false, c.failed(ctx, s, canaryOverdue(wave, k, waiting, progressDeadline(s.rel))+" ("+strings.Join(short, ", ")+")")
		}
		what := "canary scaling"
		if ts.weight > held {
			what = fmt.Sprintf("canary scaling for %d%%", ts.weight)
		}
		ws.Message = fmt.Sprintf("%s: %s: %s", label, what, strings.Join(short, ", "))
		return false, nil
	}
	ws.TrafficWeight = &ts.weight
	s.setTraffic(wave.Clusters, ts, nil)
	settled, msg, err := c.trafficSettled(ctx, s.binding, s.revs, wave.Clusters)
	if err != nil || !settled {
		if err == nil && s.overdue(ws) {
			return false, c.failed(ctx, s, fmt.Sprintf("wave %s step %d: the routes were not applied within the progress deadline %s (%s)", wave.Name, k+1, progressDeadline(s.rel), msg))
		}
		ws.Message = fmt.Sprintf("%s: %s", label, msg)
		s.after(trafficPoll)
		return false, err
	}
	return true, nil
}

// TrafficText says in words the split a cluster is rendered with (see ClusterRelease.Traffic).
func TrafficText(revs *workv1alpha1.Revisions, cluster string) string {
	if revs == nil || revs.Traffic == nil {
		return ""
	}
	pin, canary := revs.CanaryFor(cluster)
	st := traffic.StateFor(revs, cluster)
	switch {
	case revs.Traffic.BlueGreen() && canary && st.Active:
		return fmt.Sprintf("active → new stack (revision %d); old stack kept for rollback", pin.Revision)
	case revs.Traffic.BlueGreen() && canary:
		return fmt.Sprintf("active → primaries (revision %d); preview → new stack (revision %d)", revs.RevisionFor(cluster), pin.Revision)
	case revs.Traffic.BlueGreen():
		return fmt.Sprintf("active → primaries (revision %d)", revs.RevisionFor(cluster))
	}
	return traffic.Split{Canary: st.Weight, Header: len(st.HeaderMatch) > 0}.String()
}

// recordTraffic writes each cluster's split into the release's wave status: the split the
// release set, once its routes (or active Service) there run it, and otherwise what they
// wait for.
func (c *Controller) recordTraffic(ctx context.Context, status *rolloutv1alpha1.ReleaseStatus, b workv1alpha1.Binding, revs *workv1alpha1.Revisions) error {
	for i := range status.Waves {
		for j := range status.Waves[i].Clusters {
			cr := &status.Waves[i].Clusters[j]
			cr.Traffic = TrafficText(revs, cr.Name)
			if cr.Traffic == "" {
				continue
			}
			placed, pending, err := c.clusterTraffic(ctx, b, revs, cr.Name)
			if err != nil {
				return err
			}
			switch {
			case placed == 0:
				cr.Traffic = "set to " + cr.Traffic + ", but nothing carries it: waiting for " + notPlaced(revs.Traffic, cr.Name)
			case len(pending) > 0:
				cr.Traffic = "going to " + cr.Traffic + ": waiting for " + strings.Join(pending, "; ")
			}
		}
	}
	return nil
}
