package bench

// The scale bench (issue 35, part 2) runs on one fresh fleet of slim members and prints, in
// this order: the cost of probing the members while idle; every member object available,
// Flotilla against a plain server-side-apply client to the same members (ratio); status
// aggregation lag; the manager's RSS, CPU and writes per member object; the cost of idling at
// full load; p50/p99 of one template change reaching every cluster; a manager restart at full
// load (time until steady, member writes for unchanged objects); a release in waves of
// 1%/10%/89%; and failover of several clusters lost at once.
//
// Member objects are followed by one watch per member (all namespaces), keeping a few fields
// of each object and never the object: at 100 members x 2 000 Deployments a cache would cost
// the bench more than the manager it measures.

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
	"github.com/flotilla-dev/flotilla/internal/names"
)

// ScaleOptions size the scale bench.
type ScaleOptions struct {
	Members   int // member clusters
	Templates int // Deployments of 1 replica, each placed on every member
	// SpreadBy is a member label: each template goes to the members of one of its values, the
	// values taken in turn (one policy per value). Empty: every template on every member.
	SpreadBy string
	// LatencySamples are single-template changes timed after the bulk run.
	LatencySamples int
	// Lose is how many members are stopped at once for failover.
	Lose int
	// FailoverReplicas are the replicas per member of the Divided Deployment failover moves.
	FailoverReplicas int
	// Bake is each release wave's bakeTime gate.
	Bake time.Duration
	// Idle is how long the manager's idle CPU is measured, before and after the bulk run.
	Idle time.Duration
	// Skip names phases not run: ScalePhases lists them.
	Skip []string
	// ReleaseLose is how many clusters of the release's last wave are stopped once its first
	// wave began (0: none); the release must finish on the others, and they start again after.
	ReleaseLose int
	// ManagerReplicas is how many controller-manager replicas share the members (1: unsharded);
	// the fleet is started with them, and each one's memory is printed.
	ManagerReplicas int
}

// ScalePhases are the phases of the scale bench that --skip can leave out; the bulk run, the
// change latency and the restart always run.
var ScalePhases = []string{"ceiling", "release", "failover"}

func (o ScaleOptions) skips(phase string) bool { return slices.Contains(o.Skip, phase) }

// Validate names the flag that is out of range.
func (o ScaleOptions) Validate() error {
	switch {
	case o.Members < 3:
		return fmt.Errorf("--members %d: give at least 3, one per release wave", o.Members)
	case o.ManagerReplicas < 1 || o.ManagerReplicas > localfleet.MaxManagerReplicas:
		return fmt.Errorf("--manager-replicas %d: give 1 to %d", o.ManagerReplicas, localfleet.MaxManagerReplicas)
	case o.Templates < 1:
		return fmt.Errorf("--templates %d: give at least 1", o.Templates)
	case o.ReleaseLose < 0 || o.ReleaseLose >= len(releaseWaves(make([]string, o.Members))[2]):
		return fmt.Errorf("--release-lose %d: give 0 to fewer than the last wave's %d clusters", o.ReleaseLose, len(releaseWaves(make([]string, o.Members))[2]))
	case o.LatencySamples < 1:
		return fmt.Errorf("--latency-samples %d: give at least 1", o.LatencySamples)
	case o.Lose < 1 || o.Lose >= o.Members:
		return fmt.Errorf("--lose %d: give at least 1 and fewer than --members (%d), so some members are left to take the replicas", o.Lose, o.Members)
	case o.FailoverReplicas < 1:
		return fmt.Errorf("--failover-replicas %d: give at least 1", o.FailoverReplicas)
	case o.Bake < 0:
		return fmt.Errorf("--bake %s: give 0 or a positive duration", o.Bake)
	case o.Idle < time.Second:
		return fmt.Errorf("--idle %s: give at least 1s", o.Idle)
	}
	for _, p := range o.Skip {
		if !slices.Contains(ScalePhases, p) {
			return fmt.Errorf("--skip %s: give one of %s", p, strings.Join(ScalePhases, ", "))
		}
	}
	return nil
}

// DefaultReleaseLose is the --release-lose of n members: 5, or a quarter of a smaller fleet.
func DefaultReleaseLose(n int) int { return min(5, n/4) }

// DefaultLose is the --lose of n members: 10 clusters, or half the fleet when it is smaller.
func DefaultLose(n int) int { return max(1, min(10, n/2)) }

// releaseWaves splits sorted members into waves of 1%, 10% and 89%, each percentage of the
// fleet rounded up as a rollout's percentage waves are, and each wave at least one cluster.
func releaseWaves(members []string) [3][]string {
	n := len(members)
	first := max(1, (n+99)/100)
	second := max(1, (n*10+99)/100)
	return [3][]string{members[:first], members[first : first+second], members[first+second:]}
}

const (
	scaleNS         = "scale"
	scaleCeilingNS  = "scale-ceiling"
	scaleReleaseNS  = "scale-release"
	scaleFailoverNS = "scale-failover"
	changeKey       = "bench/change"
)

// Scale runs the scale bench against a started and joined local fleet.
func Scale(ctx context.Context, lf *localfleet.LocalFleet, o ScaleOptions, out io.Writer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	c, err := newClients(lf)
	if err != nil {
		return err
	}
	layout, err := newScaleLayout(lf.Fleet(), o.SpreadBy)
	if err != nil {
		return err
	}
	members, n := c.members, o.Templates
	objects := layout.objects(n)
	fmt.Fprintf(out, "== scale: %d members, %d Deployments of 1 replica %s (%d member objects), %d cores\n",
		len(members), n, layout, objects, goruntime.NumCPU())
	timeline := &memberTimeline{applied: map[string]map[string]time.Time{}, available: map[string]map[string]time.Time{}}
	board := newMemberBoard(func(member string, d *appsv1.Deployment, now time.Time) {
		if d.Namespace == scaleReleaseNS {
			timeline.record(member, d, now)
		}
	})
	wctx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	board.follow(wctx, c.memberCS)

	// 7. Probing N members: the manager's CPU while nothing but probes and leases run.
	pid := managerPID(lf)
	if _, err := waitSteady(ctx, lf, 5*time.Minute); err != nil { // the joins' own work done
		return err
	}
	rssIdle := currentRSS(pid)
	replicasIdle := map[string]int64{}
	for name, p := range managerPIDs(lf) {
		replicasIdle[name] = currentRSS(p)
	}
	idle := idleCPU(ctx, pid, o.Idle)
	fmt.Fprintf(out, "7. idle with %d members joined, nothing placed: manager %.3f cores (%.2f ms CPU per member per second), RSS %d MiB\n",
		len(members), idle, idle*1000/float64(len(members)), rssIdle>>20)

	// 1. The ceiling: a plain server-side-apply client, all members at once.
	var ceiling spans
	if !o.skips("ceiling") {
		if ceiling, err = scaleCeiling(ctx, c, board, layout, n, o.LatencySamples, out); err != nil {
			return err
		}
	}

	// Flotilla: templates in the control plane, one policy duplicating them everywhere.
	if err := cp(ctx, c.cp, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleNS}}); err != nil {
		return err
	}
	for _, p := range layout.policies(scaleNS) {
		if err := cp(ctx, c.cp, p); err != nil {
			return err
		}
	}
	cpuBefore, fleetBefore := cpuSeconds(pid), fleetCPU(lf)
	writesBefore, err := fleetWrites(ctx, lf)
	if err != nil {
		return err
	}
	start := time.Now()
	aggregated := watchAggregated(ctx, c.cpCS, scaleNS, n, func(name string) int32 { return int32(len(layout.members(templateIndex(name)))) }, start)
	if err := forEachParallel(n, inFlightPerMember, func(i int) error { return c.cp.Create(ctx, layout.deployment(scaleNS, i)) }); err != nil {
		return fmt.Errorf("creating templates: %w", err)
	}
	created := time.Since(start)
	if err := board.waitAvailable(ctx, scaleNS, objects, 60*time.Minute); err != nil {
		return fmt.Errorf("flotilla: %w (%s)", err, board.lagging(scaleNS, members, layout.perMember(n)))
	}
	flotilla := board.span(scaleNS, start)
	agg, err := aggregated()
	if err != nil {
		return err
	}
	cpu := cpuSeconds(pid) - cpuBefore
	fleetSpent := fleetBefore.since(fleetCPU(lf))
	writesAfter, err := fleetWrites(ctx, lf)
	if err != nil {
		return err
	}
	rssLoaded := currentRSS(pid)
	ratio := "the plain client skipped"
	if !o.skips("ceiling") {
		ratio = fmt.Sprintf("%.2fx the plain client's time (goal <= 2x)", flotilla.available.Seconds()/ceiling.available.Seconds())
	}
	fmt.Fprintf(out, "1. Flotilla: templates created in %.1fs; all %d member objects exist %.1fs, available %.1fs (%.0f objects/s): %s\n",
		created.Seconds(), objects, flotilla.exist.Seconds(), flotilla.available.Seconds(), float64(objects)/flotilla.available.Seconds(), ratio)
	fmt.Fprintf(out, "   member objects available: %s\n", board.spread(scaleNS, start))
	fmt.Fprintf(out, "2. every template's status aggregated from all its clusters %.1fs after the start: %.1fs after the last member object was available\n",
		agg.Seconds(), (agg - flotilla.available).Seconds())
	ready, total, err := bindingsReady(ctx, c.cp, scaleNS)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "   bindings Ready then: %d of %d\n", ready, total)
	per1000 := float64(objects) / 1000
	fmt.Fprintf(out, "6. manager: %.1f CPU s (%.2f per 1000 member objects); RSS %d MiB idle -> %d MiB loaded, peak %d MiB: %.1f KiB per member object (goal <= 40)\n",
		cpu, cpu/per1000, rssIdle>>20, rssLoaded>>20, peakRSS(pid)>>20, float64(rssLoaded-rssIdle)/1024/float64(objects))
	if len(replicasIdle) > 1 {
		fmt.Fprintf(out, "   %s\n", shareOfReplicas(lf, replicasIdle, objects, "loaded"))
	}
	fmt.Fprintf(out, "   CPU seconds by role until available: %s\n", fleetSpent)
	for _, where := range []string{"control plane", "members"} {
		fmt.Fprintf(out, "   writes to the %s per member object: %s\n", where, writesAfter[where].since(writesBefore[where], objects))
	}

	// 7. again, with everything placed: what the manager spends on resyncs and probes at load.
	time.Sleep(5 * time.Second) // status writes still trailing the last aggregation
	idle = idleCPU(ctx, pid, o.Idle)
	fmt.Fprintf(out, "7. idle at full load: manager %.3f cores (%.2f ms CPU per member per second, %.3f ms per member object per second)\n",
		idle, idle*1000/float64(len(members)), idle*1000/float64(objects))
	if len(replicasIdle) > 1 {
		// What each keeps once the work settled: right after the load the leader's figure
		// still carries the garbage of rendering, which its collector has not returned yet.
		fmt.Fprintf(out, "   %s\n", shareOfReplicas(lf, replicasIdle, objects, "settled"))
	}

	// 3. One template change reaching every cluster.
	failures := func() (busy, refused float64) {
		busy, _ = managerMetricSum(ctx, lf, "flotilla_apply_failures_total{", `reason="busy"`)
		refused, _ = managerMetricSum(ctx, lf, "flotilla_apply_failures_total{", `reason="refused"`)
		return busy, refused
	}
	busyBefore, refusedBefore := failures()
	lat, err := scaleChangeLatency(ctx, c, board, layout, n, o.LatencySamples)
	if err != nil {
		return err
	}
	busyAfter, refusedAfter := failures()
	fewest, most := layout.clustersPerTemplate()
	clusters := fmt.Sprintf("%d", most)
	if fewest != most {
		clusters = fmt.Sprintf("%d to %d", fewest, most)
	}
	fmt.Fprintf(out, "3. one template change -> all its %s clusters (goal p99 < 5s): %s\n", clusters, lat)
	fmt.Fprintf(out, "   member applies that failed meanwhile: %.0f busy (asked again within seconds), %.0f refused (asked again after 10s)\n",
		busyAfter-busyBefore, refusedAfter-refusedBefore)

	// 8. A manager restart at full load.
	if err := scaleRestart(ctx, lf, c, out); err != nil {
		return err
	}

	// 4. A release in waves of 1%/10%/89%.
	if !o.skips("release") {
		if err := scaleRelease(ctx, lf, c, timeline, o, out); err != nil {
			return err
		}
	}

	// 5. Several clusters lost at once.
	if o.skips("failover") {
		return nil
	}
	return scaleFailover(ctx, lf, c, board, o, out)
}

// scaleCeiling applies the templates' Deployments to every member with a plain server-side-
// apply client and says when all were available.
func scaleCeiling(ctx context.Context, c *clients, board *memberBoard, layout scaleLayout, n, samples int, out io.Writer) (spans, error) {
	objects := layout.objects(n)
	if err := forEachParallel(len(c.members), 16, func(i int) error { return ensureNS(ctx, c.memberCS[c.members[i]], scaleCeilingNS) }); err != nil {
		return spans{}, err
	}
	start := time.Now()
	if err := ssaAll(ctx, c, scaleCeilingNS, layout, n); err != nil {
		return spans{}, fmt.Errorf("ceiling client: %w", err)
	}
	applied := time.Since(start)
	if err := board.waitAvailable(ctx, scaleCeilingNS, objects, 60*time.Minute); err != nil {
		return spans{}, fmt.Errorf("ceiling: %w", err)
	}
	ceiling := board.span(scaleCeilingNS, start)
	fmt.Fprintf(out, "1. plain SSA client: all %d applied in %.1fs, exist %.1fs, available %.1fs (%.0f objects/s)\n",
		objects, applied.Seconds(), ceiling.exist.Seconds(), ceiling.available.Seconds(), float64(objects)/ceiling.available.Seconds())
	// The floor under Flotilla's change latency on this machine: the same changes, sent
	// straight to the members.
	lat, err := ceilingChangeLatency(ctx, c, board, layout, n, samples)
	if err != nil {
		return spans{}, fmt.Errorf("ceiling: %w", err)
	}
	fmt.Fprintf(out, "3. plain SSA client, one change -> all its clusters: %s\n", lat)
	// Taken away again, so that Flotilla starts on members holding what the client's did
	// (at 50 000 objects the copies would double what the members' etcd and caches hold).
	// A slim member runs no namespace controller, so the Deployments go by collection.
	// Thousands per member can outlast the apiserver's request timeout; each try deletes more.
	err = forEachParallel(len(c.members), 4, func(i int) error {
		for try := 0; ; try++ {
			err := c.memberCS[c.members[i]].AppsV1().Deployments(scaleCeilingNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			if err == nil || try == 20 || !kube.Busy(err) {
				return err
			}
			time.Sleep(kube.BusyBackoff(try))
		}
	})
	if err != nil {
		return spans{}, fmt.Errorf("removing the plain client's Deployments: %w", err)
	}
	return ceiling, nil
}

// cp creates an object in the control plane, or finds it there.
func cp(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func scaleDeployment(ns string, i int) *appsv1.Deployment {
	d := deployment(ns, i)
	d.Spec.Replicas = ptr.To[int32](1)
	return d
}

// ssaAll applies n Deployments to every member with server-side apply, all members at once:
// inFlightPerMember requests at a time per member, fewer beyond 8 members so that no more
// than 256 are in flight. 50 members x 32 in flight timed out in the members' shared etcd on
// 2 cores; a request that times out there is sent again, as a careful client would.
func ssaAll(ctx context.Context, c *clients, ns string, layout scaleLayout, n int) error {
	inFlight := max(4, min(inFlightPerMember, 256/len(c.members)))
	var wg sync.WaitGroup
	errs := make(chan error, len(c.members))
	for _, m := range c.members {
		templates := layout.templatesOf(m, n)
		wg.Go(func() {
			errs <- forEachParallel(len(templates), inFlight, func(j int) error {
				obj := layout.deployment(ns, templates[j])
				u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
				if err != nil {
					return err
				}
				for try := 1; ; try++ {
					_, err = c.memberDyn[m].Resource(deploymentsGVR).Namespace(ns).Apply(ctx, obj.Name, &unstructured.Unstructured{Object: u},
						metav1.ApplyOptions{FieldManager: "bench-ceiling", Force: true})
					if err == nil || try == 5 || !kube.Busy(err) {
						return err
					}
					time.Sleep(time.Duration(try) * 200 * time.Millisecond)
				}
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// watchAggregated watches the templates of ns until each shows its generation observed and
// availableReplicas from every cluster it is placed on (want: 1 replica on each), and says when.
func watchAggregated(ctx context.Context, cs kubernetes.Interface, ns string, n int, want func(name string) int32, start time.Time) func() (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Minute)
	templates := cs.AppsV1().Deployments(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return templates.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return templates.Watch(ctx, o)
		},
	}
	done := map[string]bool{}
	note := func(d *appsv1.Deployment) {
		done[d.Name] = d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas == want(d.Name)
	}
	all := func() bool {
		k := 0
		for _, ok := range done {
			if ok {
				k++
			}
		}
		return k >= n
	}
	var at time.Duration
	var werr error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		_, werr = watchtools.UntilWithSync(ctx, lw, &appsv1.Deployment{}, func(store cache.Store) (bool, error) {
			for _, o := range store.List() {
				note(o.(*appsv1.Deployment))
			}
			return all(), nil
		}, func(e watch.Event) (bool, error) {
			if d, ok := e.Object.(*appsv1.Deployment); ok && e.Type != watch.Deleted {
				note(d)
			}
			return all(), nil
		})
		at = time.Since(start)
	}()
	return func() (time.Duration, error) {
		defer cancel()
		<-finished
		if werr != nil {
			k := 0
			for _, ok := range done {
				if ok {
					k++
				}
			}
			return 0, fmt.Errorf("watching the templates' aggregated status: %d of %d aggregated: %w", k, n, werr)
		}
		return at, nil
	}
}

// bindingsReady counts the bindings of ns whose Ready condition is True for their generation,
// a page at a time: at 100 clusters a binding's status holds every member's.
func bindingsReady(ctx context.Context, c client.Client, ns string) (ready, total int, err error) {
	cont := ""
	for {
		list := &workv1alpha1.ResourceBindingList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.Limit(100), client.Continue(cont)); err != nil {
			return 0, 0, err
		}
		for _, b := range list.Items {
			total++
			cond := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.ConditionReady)
			if cond != nil && cond.Status == metav1.ConditionTrue && b.Status.ObservedGeneration >= b.Generation {
				ready++
			}
		}
		if cont = list.Continue; cont == "" {
			return ready, total, nil
		}
	}
}

// changeSamples are single changes timed: until the last cluster showed each, until the
// first did, and from the first to the last (the fan-out).
type changeSamples struct{ last, first, fanOut []time.Duration }

func (c changeSamples) String() string {
	return fmt.Sprintf("p50 %s p99 %s max %s (%d changes); first cluster p50 %s p99 %s, first to last p50 %s p99 %s",
		pct(c.last, 50), pct(c.last, 99), pct(c.last, 100), len(c.last), pct(c.first, 50), pct(c.first, 99), pct(c.fanOut, 50), pct(c.fanOut, 99))
}

// timeChanges makes one change at a time to a template of ns (change does it, given the
// template, its name and the annotation value) and times until every member it is placed on
// shows it.
func timeChanges(ctx context.Context, board *memberBoard, ns string, layout scaleLayout, n, samples int, change func(i int, name, value string) error) (changeSamples, error) {
	var out changeSamples
	for s := range samples {
		i := (s * 7919) % n
		name, placed := fmt.Sprintf("app-%04d", i), layout.members(i)
		value := "change-" + strconv.Itoa(s)
		start := time.Now()
		if err := change(i, name, value); err != nil {
			return out, fmt.Errorf("change of %s: %w", name, err)
		}
		if err := poll(ctx, 2*time.Minute, func() bool { return board.changed(ns, name, value, placed) == len(placed) }); err != nil {
			return out, fmt.Errorf("change of %s: %d of %d clusters: %w", name, board.changed(ns, name, value, placed), len(placed), err)
		}
		first, last := board.changeSpan(ns, name, placed)
		out.last = append(out.last, time.Since(start))
		out.first = append(out.first, first.Sub(start))
		out.fanOut = append(out.fanOut, last.Sub(first))
	}
	return out, nil
}

// scaleChangeLatency changes one template at a time in the control plane.
func scaleChangeLatency(ctx context.Context, c *clients, board *memberBoard, layout scaleLayout, n, samples int) (changeSamples, error) {
	return timeChanges(ctx, board, scaleNS, layout, n, samples, func(_ int, name, value string) error {
		patch := []byte(`{"metadata":{"annotations":{"` + changeKey + `":"` + value + `"}}}`)
		return c.cp.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: scaleNS, Name: name}}, client.RawPatch("application/merge-patch+json", patch))
	})
}

// ceilingChangeLatency makes the same changes with the plain client: one server-side apply
// per member it is placed on, all at once, as Flotilla's executor sends them.
func ceilingChangeLatency(ctx context.Context, c *clients, board *memberBoard, layout scaleLayout, n, samples int) (changeSamples, error) {
	return timeChanges(ctx, board, scaleCeilingNS, layout, n, samples, func(i int, name, value string) error {
		obj := layout.deployment(scaleCeilingNS, i)
		obj.Annotations = map[string]string{changeKey: value}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		placed := layout.members(i)
		return forEachParallel(len(placed), executorWorkersInFlight, func(j int) error {
			_, err := c.memberDyn[placed[j]].Resource(deploymentsGVR).Namespace(scaleCeilingNS).Apply(ctx, name, &unstructured.Unstructured{Object: u},
				metav1.ApplyOptions{FieldManager: "bench-ceiling", Force: true})
			return err
		})
	})
}

// executorWorkersInFlight matches the executor's workers: the plain client's fan-out of one
// change sends as many applies at once as Flotilla's does.
const executorWorkersInFlight = 32

// scaleRestart restarts the manager with every object in place and times until it is steady:
// its work queues empty and the control plane's writes back to their idle rate. The member
// writes it made are counted from the members' apiserver metrics, before and after.
func scaleRestart(ctx context.Context, lf *localfleet.LocalFleet, c *clients, out io.Writer) error {
	// The restart finds every status written: a status write the binding controller still
	// holds back (up to 10 s, its progressWriteInterval, in a delayed requeue no queue depth
	// shows) would make the new manager apply again, rightly.
	time.Sleep(12 * time.Second)
	if _, err := waitSteady(ctx, lf, 15*time.Minute); err != nil {
		return fmt.Errorf("before the manager restart: %w", err)
	}
	before, err := fleetWrites(ctx, lf)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := lf.RestartManager(ctx); err != nil {
		return err
	}
	up := time.Since(start)
	pid := managerPID(lf)
	steady, err := waitSteady(ctx, lf, 15*time.Minute)
	if err != nil {
		return fmt.Errorf("manager restart: %w", err)
	}
	steady = time.Since(start) - steady // the quiet seconds that showed it steady do not count
	after, err := fleetWrites(ctx, lf)
	if err != nil {
		return err
	}
	ready, total, err := bindingsReady(ctx, c.cp, scaleNS)
	if err != nil {
		return err
	}
	objectWrites := 0.0
	for k, v := range after["members"] {
		if strings.HasSuffix(k, " deployments") {
			objectWrites += v - before["members"][k]
		}
	}
	fmt.Fprintf(out, "8. manager restart at full load: ready in %.1fs, steady (queues empty, control-plane writes at idle rate) after %.1fs; then %d of %d bindings Ready; CPU %.1fs, RSS %d MiB\n",
		up.Seconds(), steady.Seconds(), ready, total, cpuSeconds(pid), currentRSS(pid)>>20)
	fmt.Fprintf(out, "   writes to member Deployments (unchanged objects): %.0f (goal 0); all writes to the members: %s\n",
		objectWrites, after["members"].since(before["members"], 1))
	fmt.Fprintf(out, "   writes to the control plane per binding: %s\n", after["control plane"].since(before["control plane"], max(total, 1)))
	return nil
}

// waitSteady waits until the manager's work queues are empty and the control plane takes no
// more writes than leases and heartbeats for three seconds in a row; it returns how long the
// quiet part lasted, to be taken off the time spent.
func waitSteady(ctx context.Context, lf *localfleet.LocalFleet, timeout time.Duration) (time.Duration, error) {
	busy := func() (float64, error) {
		w, err := apiserverWrites(ctx, lf, []string{""})
		if err != nil {
			return 0, err
		}
		return busyWrites(w["control plane"]), nil
	}
	deadline := time.Now().Add(timeout)
	last, err := busy()
	if err != nil {
		return 0, err
	}
	var quietSince time.Time
	for {
		time.Sleep(time.Second)
		now, err := busy()
		if err != nil {
			return 0, err
		}
		depth, err := managerQueueDepth(ctx, lf)
		if err != nil {
			return 0, err
		}
		if depth == 0 && now-last < 2 {
			if quietSince.IsZero() {
				quietSince = time.Now()
			}
			if time.Since(quietSince) >= 3*time.Second {
				return time.Since(quietSince), nil
			}
		} else {
			quietSince = time.Time{}
		}
		last = now
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("not steady after %s: %.0f work queue items, %.0f control-plane writes in the last second", timeout, depth, now-last)
		}
	}
}

// busyWrites sums the writes that are not leases, events or node heartbeats.
func busyWrites(w writeCounts) float64 {
	sum := 0.0
	for k, v := range w {
		if !strings.Contains(k, "leases") && !strings.Contains(k, "events") && !strings.HasSuffix(k, "nodes/status") {
			sum += v
		}
	}
	return sum
}

// managerQueueDepth sums the controller-manager's work queue depths from its metrics.
func managerQueueDepth(ctx context.Context, lf *localfleet.LocalFleet) (float64, error) {
	return managerMetricSum(ctx, lf, "workqueue_depth{", "")
}

// managerMetricSum sums every series of the controller-manager's metrics whose line starts
// with prefix (a metric name and "{", or a name and " ") and holds label (empty: any).
func managerMetricSum(ctx context.Context, lf *localfleet.LocalFleet, prefix, label string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+lf.ManagerMetricsAddress()+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading the manager's metrics: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(line, prefix) && strings.Contains(line, label) {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += v
		}
	}
	return sum, nil
}

// scaleRelease releases one Deployment over every member in waves of 1%, 10% and 89%, each
// wave gated by health and bake, and prints each wave's overhead beyond its gates: from the
// previous wave's last cluster available plus its bake (or from the change, for the first) to
// the wave's first apply. o.ReleaseLose clusters of the last wave are stopped once the first
// wave began: the release must finish on the others (failover declares them lost).
func scaleRelease(ctx context.Context, lf *localfleet.LocalFleet, c *clients, timeline *memberTimeline, o ScaleOptions, out io.Writer) error {
	bake := o.Bake
	waves := releaseWaves(c.members)
	waveNames := [3]string{"one-percent", "ten-percent", "the-rest"}
	var spec []policyv1alpha1.Wave
	for i, w := range waves {
		wave := policyv1alpha1.Wave{Name: waveNames[i], ClusterNames: w}
		if bake > 0 {
			wave.Gates.BakeTime = ptr.To(intstr.FromString(bake.String()))
		}
		spec = append(spec, wave)
	}
	if err := cp(ctx, c.cp, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleReleaseNS}}); err != nil {
		return err
	}
	if err := cp(ctx, c.cp, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: scaleReleaseNS},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Rollout:           &policyv1alpha1.RolloutStrategy{Waves: spec},
		},
	}); err != nil {
		return err
	}
	web := scaleDeployment(scaleReleaseNS, 0)
	web.Name = "web"
	if err := cp(ctx, c.cp, web); err != nil {
		return err
	}
	image := func(i int) string { return fmt.Sprintf("registry.example/app:%d", i) }
	all := func(kind map[string]map[string]time.Time, img string) func() bool {
		return func() bool {
			for _, m := range c.members {
				if _, ok := timeline.at(kind, img, m); !ok {
					return false
				}
			}
			return true
		}
	}
	if err := poll(ctx, 10*time.Minute, all(timeline.available, image(1))); err != nil {
		return fmt.Errorf("release: first placement: %w", err)
	}
	cur := &appsv1.Deployment{}
	if err := c.cp.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
		return err
	}
	cur.Spec.Template.Spec.Containers[0].Image = image(2)
	start := time.Now()
	if err := c.cp.Update(ctx, cur); err != nil {
		return err
	}
	stopped := waves[2][len(waves[2])-o.ReleaseLose:]
	if len(stopped) > 0 {
		waves[2] = waves[2][:len(waves[2])-len(stopped)]
		if err := poll(ctx, 10*time.Minute, func() bool { _, ok := timeline.at(timeline.applied, image(2), waves[0][0]); return ok }); err != nil {
			return fmt.Errorf("release: the first wave never began: %w", err)
		}
		for _, m := range stopped {
			if err := lf.StopMember(m); err != nil {
				return err
			}
		}
	}
	left := slices.Concat(waves[0], waves[1], waves[2])
	done := func() bool {
		for _, m := range left {
			if _, ok := timeline.at(timeline.available, image(2), m); !ok {
				return false
			}
		}
		return true
	}
	if err := poll(ctx, 20*time.Minute, done); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	phase, finished, err := releaseOutcome(ctx, c.cp, scaleReleaseNS, 20*time.Minute)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "4. release over %d clusters in waves of %d/%d/%d, bake %s per wave:\n", len(c.members), len(waves[0]), len(waves[1]), len(waves[2]), bake)
	gatesPassed := start
	var last time.Time
	for i, w := range waves {
		first, lastApplied, lastAvailable := span(timeline, image(2), w)
		after := "the previous wave's gates passed"
		if i == 0 {
			after = "the change"
		}
		fmt.Fprintf(out, "   wave %d (%s, %d clusters): first apply %s after %s (at +%s); all applied %s and all available %s after its first apply\n",
			i+1, waveNames[i], len(w), first.Sub(gatesPassed).Round(time.Millisecond), after, first.Sub(start).Round(time.Millisecond),
			lastApplied.Sub(first).Round(time.Millisecond), lastAvailable.Sub(first).Round(time.Millisecond))
		gatesPassed, last = lastAvailable.Add(bake), lastAvailable
	}
	fmt.Fprintf(out, "   total: change -> last cluster available %s (gates: health and %s bake x 3); the overhead per wave is its first apply after the gates passed\n", last.Sub(start).Round(time.Millisecond), bake)
	fmt.Fprintf(out, "   the Release %s %s after the change", phase, finished.Sub(start).Round(time.Millisecond))
	if len(stopped) == 0 {
		fmt.Fprintln(out)
		return nil
	}
	fmt.Fprintf(out, ", on the %d clusters left: %d of the last wave (%s) were stopped once the first wave began\n", len(left), len(stopped), strings.Join(stopped, ", "))
	for _, m := range stopped {
		if err := lf.StartMember(ctx, m); err != nil {
			return err
		}
	}
	// Back in the fleet (Ready, untainted) before the next phase counts on them.
	return poll(ctx, 10*time.Minute, func() bool {
		list := &clusterv1alpha1.ClusterList{}
		if c.cp.List(ctx, list) != nil {
			return false
		}
		for _, cl := range list.Items {
			if slices.Contains(stopped, cl.Name) && (!meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ConditionReady) || kube.Unreachable(&cl)) {
				return false
			}
		}
		return true
	})
}

// releaseOutcome waits for the latest Release in ns to end and says how and when.
func releaseOutcome(ctx context.Context, c client.Client, ns string, timeout time.Duration) (rolloutv1alpha1.ReleasePhase, time.Time, error) {
	var phase rolloutv1alpha1.ReleasePhase
	var at time.Time
	err := poll(ctx, timeout, func() bool {
		list := &rolloutv1alpha1.ReleaseList{}
		if c.List(ctx, list, client.InNamespace(ns)) != nil || len(list.Items) == 0 {
			return false
		}
		latest := slices.MaxFunc(list.Items, func(a, b rolloutv1alpha1.Release) int { return int(a.Spec.Revision - b.Spec.Revision) })
		if latest.Status.CompletedAt == nil {
			return false
		}
		phase, at = latest.Status.Phase, latest.Status.CompletedAt.Time
		return true
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("release: it never ended: %w", err)
	}
	return phase, at, nil
}

// span is when the first cluster of w applied img, the last applied it and the last ran it
// available.
func span(t *memberTimeline, img string, w []string) (first, lastApplied, lastAvailable time.Time) {
	for _, m := range w {
		a, _ := t.at(t.applied, img, m)
		v, _ := t.at(t.available, img, m)
		if first.IsZero() || a.Before(first) {
			first = a
		}
		if a.After(lastApplied) {
			lastApplied = a
		}
		if v.After(lastAvailable) {
			lastAvailable = v
		}
	}
	return first, lastApplied, lastAvailable
}

// scaleFailover divides one Deployment over every member by equal static weights, stops
// o.Lose members at once and times, from the stop: all of them not Ready, all tainted
// unreachable, the binding re-placed off them, and every replica available on the others.
func scaleFailover(ctx context.Context, lf *localfleet.LocalFleet, c *clients, board *memberBoard, o ScaleOptions, out io.Writer) error {
	if err := cp(ctx, c.cp, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleFailoverNS}}); err != nil {
		return err
	}
	if err := cp(ctx, c.cp, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "spread", Namespace: scaleFailoverNS},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{
				Type: policyv1alpha1.ReplicaSchedulingDivided, DivisionPreference: policyv1alpha1.DivisionWeighted,
				WeightPreference: &policyv1alpha1.WeightPreference{StaticWeightList: []policyv1alpha1.StaticClusterWeight{{
					TargetCluster: policyv1alpha1.ClusterAffinity{LabelSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"env": "bench"}}},
					Weight:        1,
				}}}}},
		},
	}); err != nil {
		return err
	}
	want := int32(o.FailoverReplicas * len(c.members))
	d := scaleDeployment(scaleFailoverNS, 0)
	d.Name, d.Spec.Replicas = "spread", ptr.To(want)
	if err := cp(ctx, c.cp, d); err != nil {
		return err
	}
	if err := poll(ctx, 10*time.Minute, func() bool { return board.availableReplicas(scaleFailoverNS, "spread", c.members) == want }); err != nil {
		return fmt.Errorf("failover: %d replicas before the stop: %w", want, err)
	}
	lost := c.members[len(c.members)-o.Lose:]
	survivors := c.members[:len(c.members)-o.Lose]
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(lost))
	for _, m := range lost {
		wg.Go(func() { errs <- lf.StopMember(m) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	stopped := time.Since(start)
	// all not Ready, all tainted, binding off them, replicas available on the others
	var t [4]time.Duration
	err := poll(ctx, 15*time.Minute, func() bool {
		notReady, tainted := 0, 0
		list := &clusterv1alpha1.ClusterList{}
		if c.cp.List(ctx, list) == nil {
			for i := range list.Items {
				cl := &list.Items[i]
				if !slices.Contains(lost, cl.Name) {
					continue
				}
				if !meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ConditionReady) {
					notReady++
				}
				if kube.Unreachable(cl) {
					tainted++
				}
			}
		}
		mark := func(i int, ok bool) {
			if t[i] == 0 && ok {
				t[i] = time.Since(start)
			}
		}
		mark(0, notReady == len(lost))
		mark(1, tainted == len(lost))
		if t[2] == 0 {
			b := &workv1alpha1.ResourceBinding{}
			if c.cp.Get(ctx, client.ObjectKey{Namespace: scaleFailoverNS, Name: names.Binding("Deployment", d.Name)}, b) == nil {
				mark(2, !slices.ContainsFunc(b.Spec.Clusters, func(tc workv1alpha1.TargetCluster) bool { return slices.Contains(lost, tc.Name) }))
			}
		}
		mark(3, t[2] != 0 && board.availableReplicas(scaleFailoverNS, "spread", survivors) == want)
		return t[0] != 0 && t[1] != 0 && t[3] != 0
	})
	if err != nil {
		return fmt.Errorf("failover of %d lost clusters: %w (so far %v; %d of %d replicas available on the others)", len(lost), err, t, board.availableReplicas(scaleFailoverNS, "spread", survivors), want)
	}
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	fmt.Fprintf(out, "5. %d clusters lost at once (%d replicas divided over %d members; stopping them took %s): all not Ready after %s, all tainted after %s, binding re-placed after %s, all %d replicas available on the other %d after %s (%s after the taint)\n",
		len(lost), want, len(c.members), ms(stopped), ms(t[0]), ms(t[1]), ms(t[2]), want, len(survivors), ms(t[3]), ms(t[3]-t[1]))
	return nil
}

// idleCPU is the cores a process used over d.
func idleCPU(ctx context.Context, pid int, d time.Duration) float64 {
	before := cpuSeconds(pid)
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return (cpuSeconds(pid) - before) / d.Seconds()
}

// managerPIDs are the running controller-manager replicas by component name.
func managerPIDs(lf *localfleet.LocalFleet) map[string]int {
	pids := map[string]int{}
	for _, s := range lf.Status() {
		if strings.HasPrefix(s.Name, "flotilla-controller-manager") && s.PID > 0 {
			pids[s.Name] = s.PID
		}
	}
	return pids
}

// shareOfReplicas says what each sharded replica holds beyond its idle memory, and its share
// of what they hold together (issue goal: each <= 60% with 2).
func shareOfReplicas(lf *localfleet.LocalFleet, idle map[string]int64, objects int, when string) string {
	grown := map[string]int64{}
	var sum int64
	for name, pid := range managerPIDs(lf) {
		grown[name] = max(currentRSS(pid)-idle[name], 0)
		sum += grown[name]
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(grown)) {
		share := 0.0
		if sum > 0 {
			share = float64(grown[name]) * 100 / float64(sum)
		}
		parts = append(parts, fmt.Sprintf("%s +%d MiB (%.1f KiB per member object, %.0f%%)", name, grown[name]>>20, float64(grown[name])/1024/float64(objects), share))
	}
	return "by replica, " + when + " minus idle: " + strings.Join(parts, "; ")
}

func managerPID(lf *localfleet.LocalFleet) int {
	for _, s := range lf.Status() {
		if s.Name == "flotilla-controller-manager" {
			return s.PID
		}
	}
	return 0
}

// currentRSS is a process's resident memory now.
func currentRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// memberBoard follows every member's Deployments and keeps, per object, what the scale bench
// asks: when it first existed and first ran available, its replicas and its change annotation.
type memberBoard struct {
	mu      sync.Mutex
	objects map[boardKey]*boardEntry
	// per namespace: objects seen, objects available
	exist, available map[string]int
	onEvent          func(member string, d *appsv1.Deployment, now time.Time)
}

type boardKey struct{ member, ns, name string }

type boardEntry struct {
	seen, firstAvailable time.Time
	available            bool
	replicas, ready      int32
	change               string
	changedAt            time.Time // when change took its value
}

func newMemberBoard(onEvent func(string, *appsv1.Deployment, time.Time)) *memberBoard {
	return &memberBoard{objects: map[boardKey]*boardEntry{}, exist: map[string]int{}, available: map[string]int{}, onEvent: onEvent}
}

// follow watches every member until ctx ends; it returns once each member was listed.
func (b *memberBoard) follow(ctx context.Context, members map[string]kubernetes.Interface) {
	var listed sync.WaitGroup
	listed.Add(len(members))
	for m, cs := range members {
		go func() {
			var once sync.Once
			for ctx.Err() == nil {
				list, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
				if err != nil {
					time.Sleep(time.Second) // a stopped member: it may come back
					continue
				}
				for i := range list.Items {
					b.note(m, &list.Items[i])
				}
				once.Do(listed.Done)
				w, err := cs.AppsV1().Deployments("").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
				if err != nil {
					continue
				}
				for ev := range w.ResultChan() {
					if d, ok := ev.Object.(*appsv1.Deployment); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
						b.note(m, d)
					}
				}
				w.Stop()
			}
		}()
	}
	listed.Wait()
}

func (b *memberBoard) note(member string, d *appsv1.Deployment) {
	now := time.Now()
	if b.onEvent != nil {
		b.onEvent(member, d, now)
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	st := d.Status
	available := st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == want && st.AvailableReplicas == want && st.Replicas == want
	b.mu.Lock()
	defer b.mu.Unlock()
	k := boardKey{member, d.Namespace, d.Name}
	e := b.objects[k]
	if e == nil {
		e = &boardEntry{seen: now}
		b.objects[k] = e
		b.exist[d.Namespace]++
	}
	if available && e.firstAvailable.IsZero() {
		e.firstAvailable = now
		b.available[d.Namespace]++
	}
	if c := d.Annotations[changeKey]; c != e.change {
		e.change, e.changedAt = c, now
	}
	e.available, e.replicas, e.ready = available, want, st.AvailableReplicas
}

func (b *memberBoard) waitAvailable(ctx context.Context, ns string, n int, timeout time.Duration) error {
	err := poll(ctx, timeout, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.available[ns] >= n
	})
	if err != nil {
		b.mu.Lock()
		defer b.mu.Unlock()
		return fmt.Errorf("%d of %d member objects in %s available, %d exist: %w", b.available[ns], n, ns, b.exist[ns], err)
	}
	return nil
}

// spans are when, since a start, the last member object of a namespace first existed and
// first ran available.
type spans struct{ exist, available time.Duration }

func (b *memberBoard) span(ns string, start time.Time) spans {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s spans
	for k, e := range b.objects {
		if k.ns != ns {
			continue
		}
		s.exist = max(s.exist, e.seen.Sub(start))
		s.available = max(s.available, e.firstAvailable.Sub(start))
	}
	return s
}

// spread says when the first, the median and the 90th percentile member object of ns ran
// available.
func (b *memberBoard) spread(ns string, start time.Time) string {
	b.mu.Lock()
	var at []time.Duration
	for k, e := range b.objects {
		if k.ns == ns && !e.firstAvailable.IsZero() {
			at = append(at, e.firstAvailable.Sub(start))
		}
	}
	b.mu.Unlock()
	return propagated{arrivals: sorted(at)}.spread()
}

func sorted(d []time.Duration) []time.Duration { slices.Sort(d); return d }

// lagging says, for a bench that timed out, how many objects each member lacks.
func (b *memberBoard) lagging(ns string, members []string, want map[string]int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	have := map[string]int{}
	for k, e := range b.objects {
		if k.ns == ns && e.available {
			have[k.member]++
		}
	}
	var parts []string
	for _, m := range members {
		if have[m] < want[m] {
			parts = append(parts, fmt.Sprintf("%s %d/%d", m, have[m], want[m]))
		}
	}
	if len(parts) > 10 {
		parts = append(parts[:10], fmt.Sprintf("and %d more members", len(parts)-10))
	}
	return "available per lagging member: " + strings.Join(parts, ", ")
}

// changed counts the members whose object ns/name carries the change annotation value.
func (b *memberBoard) changed(ns, name, value string, members []string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := 0
	for _, m := range members {
		if e := b.objects[boardKey{m, ns, name}]; e != nil && e.change == value {
			k++
		}
	}
	return k
}

// changeSpan is when the first and the last of members showed their object's current change.
func (b *memberBoard) changeSpan(ns, name string, members []string) (first, last time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range members {
		e := b.objects[boardKey{m, ns, name}]
		if e == nil {
			continue
		}
		if first.IsZero() || e.changedAt.Before(first) {
			first = e.changedAt
		}
		if e.changedAt.After(last) {
			last = e.changedAt
		}
	}
	return first, last
}

// availableReplicas sums the available replicas of ns/name on the given members.
func (b *memberBoard) availableReplicas(ns, name string, members []string) int32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sum int32
	for _, m := range members {
		if e := b.objects[boardKey{m, ns, name}]; e != nil && e.available {
			sum += e.ready
		}
	}
	return sum
}
