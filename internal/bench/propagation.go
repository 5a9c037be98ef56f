// Package bench measures Flotilla on a running local fleet and prints figures. It is a
// command, not a test: nothing here asserts, and machines here are shared and noisy, so every
// figure is read from one run that also measures its own ceiling.
//
// The propagation bench compares Flotilla with a plain server-side-apply client writing the
// same objects to the same member apiservers (32 requests in flight per member), in the same
// run. Templates are Deployments with zero replicas, so the figures measure propagation and
// status aggregation, not the members' pod churn.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

const inFlightPerMember = 32

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// PropagationOptions say what to measure.
type PropagationOptions struct {
	Templates      int // how many Deployments
	LatencySamples int // single-template changes timed after the bulk run
}

// Propagation runs the propagation bench against a started and joined local fleet.
func Propagation(ctx context.Context, lf *localfleet.LocalFleet, managerPID int, o PropagationOptions, out io.Writer) error {
	c, err := newClients(lf)
	if err != nil {
		return err
	}
	members, memberDyn, memberCS, cp := c.members, c.memberDyn, c.memberCS, c.cp
	n := o.Templates
	fmt.Fprintf(out, "== propagation: %d Deployments to %d clusters (%d member objects)\n", n, len(members), n*len(members))

	// The ceiling: a plain server-side-apply client, all members at once.
	ceilingNS := fmt.Sprintf("ceiling-%d", n)
	for _, m := range members {
		if err := ensureNS(ctx, memberCS[m], ceilingNS); err != nil {
			return err
		}
	}
	cpuCeiling := fleetCPU(lf)
	ceilingBefore, err := fleetWrites(ctx, lf)
	if err != nil {
		return err
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(members))
	for _, m := range members {
		wg.Go(func() {
			errs <- forEachParallel(n, inFlightPerMember, func(i int) error {
				obj := deployment(ceilingNS, i)
				u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
				if err != nil {
					return err
				}
				_, err = memberDyn[m].Resource(deploymentsGVR).Namespace(ceilingNS).Apply(ctx, obj.Name, &unstructured.Unstructured{Object: u},
					metav1.ApplyOptions{FieldManager: "bench-ceiling", Force: true})
				return err
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return fmt.Errorf("ceiling client: %w", err)
		}
	}
	ceiling := time.Since(start)
	ceilingRate := float64(n*len(members)) / ceiling.Seconds()
	fmt.Fprintf(out, "plain SSA client (ceiling):    %7.1fs  %7.1f objects/s\n", ceiling.Seconds(), ceilingRate)
	fmt.Fprintf(out, "  CPU seconds while it ran:    %s\n", cpuCeiling.since(fleetCPU(lf)))
	// The members' controllers react to the ceiling's Deployments after it finished; let them
	// finish before Flotilla is timed, so it does not pay for them.
	settled, err := waitQuiet(ctx, lf)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  members settled after it in: %7.1fs\n", settled.Seconds())
	ceilingAfter, err := fleetWrites(ctx, lf)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  writes to the members per member object until settled: %s\n", ceilingAfter["members"].since(ceilingBefore["members"], n*len(members)))
	fmt.Fprintf(out, "  %s per member object until settled: %s\n", readsOf("members"), ceilingAfter[readsOf("members")].since(ceilingBefore[readsOf("members")], n*len(members)))
	// The members' own work for these objects (their apiservers taking the objects and their
	// controllers' status writes) is the same whoever writes the objects; on this machine's
	// cores it bounds how fast any writer that runs beside the members can be.
	memberWork := cpuCeiling.members(fleetCPU(lf))
	floor := time.Duration(memberWork / float64(goruntime.NumCPU()) * float64(time.Second))
	fmt.Fprintf(out, "  members' own CPU for them:   %7.1fs  (%.1fs of %d cores: a writer the members keep up with reaches at most %.2f of the ceiling)\n",
		memberWork, floor.Seconds(), goruntime.NumCPU(), ceiling.Seconds()/floor.Seconds())

	// Flotilla: templates in the control plane, one policy duplicating them everywhere.
	ns := fmt.Sprintf("bench-%d", n)
	if err := cp.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: ns},
		Spec:       policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}}},
	}
	if err := cp.Create(ctx, policy); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	cpuBefore := cpuSeconds(managerPID)
	cpuFleet := fleetCPU(lf)
	writesBefore, err := fleetWrites(ctx, lf)
	if err != nil {
		return err
	}
	start = time.Now()
	wait := watchPropagation(ctx, c, ns, n, start)
	if err := forEachParallel(n, inFlightPerMember, func(i int) error { return cp.Create(ctx, deployment(ns, i)) }); err != nil {
		return fmt.Errorf("creating templates: %w", err)
	}
	created := time.Since(start)
	done, err := wait()
	if err != nil {
		return err
	}
	applied, aggregated := done.applied(), done.aggregated
	cpu := cpuSeconds(managerPID) - cpuBefore
	fleetSpent := cpuFleet.since(fleetCPU(lf))
	writesAfter, err := fleetWrites(ctx, lf)
	if err != nil {
		return err
	}
	rate := float64(n*len(members)) / applied.Seconds()
	fmt.Fprintf(out, "templates created in:          %7.1fs\n", created.Seconds())
	fmt.Fprintf(out, "all applied in the members:    %7.1fs  %7.1f objects/s  (%.2f of the ceiling)\n", applied.Seconds(), rate, rate/ceilingRate)
	fmt.Fprintf(out, "  member objects arrived:      %s\n", done.spread())
	fmt.Fprintf(out, "all statuses aggregated:       %7.1fs\n", aggregated.Seconds())
	// The ceiling's clock stops before its members' controllers have reacted; Flotilla's runs
	// while they react to its applies. Compared end state to end state:
	settledCeiling := ceiling + settled
	fmt.Fprintf(out, "ceiling until members settled:  %7.1fs  (%.2f of it: Flotilla until statuses aggregated)\n",
		settledCeiling.Seconds(), settledCeiling.Seconds()/aggregated.Seconds())
	fmt.Fprintf(out, "controller-manager CPU:        %7.1fs  peak RSS %d MiB\n", cpu, peakRSS(managerPID)>>20)
	fmt.Fprintf(out, "  CPU seconds until aggregated: %s\n", fleetSpent)
	for _, where := range []string{"control plane", "members"} {
		fmt.Fprintf(out, "  writes to the %s per member object: %s\n", where, writesAfter[where].since(writesBefore[where], n*len(members)))
	}
	for _, where := range []string{"control plane", "members"} {
		fmt.Fprintf(out, "  %s per member object: %s\n", readsOf(where), writesAfter[readsOf(where)].since(writesBefore[readsOf(where)], n*len(members)))
	}

	if o.LatencySamples > 0 {
		lat, err := changeLatency(ctx, memberCS, cp, ns, n, o.LatencySamples)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "change -> all members applied: p50 %s  p99 %s  (%d single-template changes, %d templates in place)\n",
			lat[len(lat)/2].Round(time.Millisecond), lat[(len(lat)*99)/100].Round(time.Millisecond), len(lat), n)
	}
	return nil
}

// clients talk to the fleet's apiservers without client-side throttling, as a bench must.
type clients struct {
	members    []string
	memberDyn  map[string]dynamic.Interface
	memberCS   map[string]kubernetes.Interface
	memberMeta map[string]metadata.Interface
	cp         client.Client
	cpCS       kubernetes.Interface
}

func newClients(lf *localfleet.LocalFleet) (*clients, error) {
	c := &clients{members: lf.Fleet().Names(), memberDyn: map[string]dynamic.Interface{},
		memberCS: map[string]kubernetes.Interface{}, memberMeta: map[string]metadata.Interface{}}
	sort.Strings(c.members)
	unthrottled := func(member string) (*rest.Config, error) {
		cfg, err := lf.RESTConfig(member)
		if err != nil {
			return nil, err
		}
		cfg = rest.CopyConfig(cfg)
		cfg.QPS, cfg.Burst = 1000, 2000
		return cfg, nil
	}
	for _, m := range c.members {
		cfg, err := unthrottled(m)
		if err != nil {
			return nil, err
		}
		if c.memberDyn[m], err = dynamic.NewForConfig(cfg); err != nil {
			return nil, err
		}
		if c.memberCS[m], err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, err
		}
		if c.memberMeta[m], err = metadata.NewForConfig(cfg); err != nil {
			return nil, err
		}
	}
	cfg, err := unthrottled("")
	if err != nil {
		return nil, err
	}
	if c.cp, err = client.New(cfg, client.Options{Scheme: kube.Scheme}); err != nil {
		return nil, err
	}
	if c.cpCS, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

func deployment(ns string, i int) *appsv1.Deployment {
	labels := map[string]string{"app": fmt.Sprintf("bench-%d", i)}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%04d", i), Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			},
		},
	}
}

func ensureNS(ctx context.Context, cs kubernetes.Interface, ns string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func forEachParallel(n, parallel int, fn func(int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first error
	var mu sync.Mutex
	for range parallel {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// watchPropagation starts watching, before the templates are written, until every member holds
// n Deployments in ns and every template's status observed its generation; wait returns when
// they do. It watches rather than polls: a list of every
// Deployment every few hundred milliseconds would load the apiservers being measured, and
// would see the end late. Members are watched for metadata only, which is all a count needs.
func watchPropagation(ctx context.Context, c *clients, ns string, n int, start time.Time) (wait func() (propagated, error)) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	var mu sync.Mutex
	var result propagated
	var first error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil && err != nil {
			first = err
		}
	}
	var wg sync.WaitGroup
	// The templates are written once every watch has listed, so an arrival is never stamped
	// late by a list that came after it.
	var listed sync.WaitGroup
	listed.Add(len(c.memberMeta) + 1)
	for name, mc := range c.memberMeta {
		wg.Go(func() {
			deployments := mc.Resource(deploymentsGVR).Namespace(ns)
			lw := &cache.ListWatch{
				ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return deployments.List(ctx, o)
				},
				WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					return deployments.Watch(ctx, o)
				},
			}
			var once sync.Once
			markListed := func() { once.Do(listed.Done) }
			seen := map[string]bool{}
			see := func(name string) {
				if !seen[name] {
					seen[name] = true
					mu.Lock()
					result.arrivals = append(result.arrivals, time.Since(start))
					mu.Unlock()
				}
			}
			all := func() bool { return len(seen) >= n }
			_, err := watchtools.UntilWithSync(ctx, lw, &metav1.PartialObjectMetadata{}, func(store cache.Store) (bool, error) {
				defer markListed()
				for _, o := range store.List() {
					see(o.(metav1.Object).GetName())
				}
				return all(), nil
			}, func(e watch.Event) (bool, error) {
				if o, ok := e.Object.(metav1.Object); ok && e.Type == watch.Added {
					see(o.GetName())
				}
				return all(), nil
			})
			markListed() // also when it never listed
			if err != nil {
				fail(fmt.Errorf("watching %s: %d of %d Deployments: %w", name, len(seen), n, err))
				return
			}
		})
	}
	wg.Go(func() {
		templates := c.cpCS.AppsV1().Deployments(ns)
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return templates.List(ctx, o) },
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return templates.Watch(ctx, o)
			},
		}
		var once sync.Once
		markListed := func() { once.Do(listed.Done) }
		done := map[string]bool{}
		note := func(d *appsv1.Deployment) {
			done[d.Name] = d.Status.ObservedGeneration >= d.Generation
		}
		count := func() bool {
			all := 0
			for _, ok := range done {
				if ok {
					all++
				}
			}
			return all >= n
		}
		_, err := watchtools.UntilWithSync(ctx, lw, &appsv1.Deployment{}, func(store cache.Store) (bool, error) {
			defer markListed()
			for _, o := range store.List() {
				note(o.(*appsv1.Deployment))
			}
			return count(), nil
		}, func(e watch.Event) (bool, error) {
			if d, ok := e.Object.(*appsv1.Deployment); ok && e.Type != watch.Deleted {
				note(d)
			}
			return count(), nil
		})
		markListed()
		if err != nil {
			fail(fmt.Errorf("watching the templates' status: %w", err))
			return
		}
		mu.Lock()
		result.aggregated = time.Since(start)
		mu.Unlock()
	})
	listed.Wait()
	return func() (propagated, error) {
		defer cancel()
		wg.Wait()
		if first != nil {
			return propagated{}, first
		}
		slices.Sort(result.arrivals)
		return result, nil
	}
}

// propagated is when each member object arrived, and when every template's status was
// aggregated, since the templates were first written.
type propagated struct {
	arrivals   []time.Duration // sorted
	aggregated time.Duration
}

// applied is when the last member object arrived.
func (p propagated) applied() time.Duration { return p.arrivals[len(p.arrivals)-1] }

// spread says when the first, the median and the 90th percentile member object arrived.
func (p propagated) spread() string {
	at := func(q float64) float64 { return p.arrivals[int(q*float64(len(p.arrivals)-1))].Seconds() }
	return fmt.Sprintf("first %.1fs, half %.1fs, 90%% %.1fs", at(0), at(0.5), at(0.9))
}

// changeLatency changes one template at a time and times until every member shows it.
func changeLatency(ctx context.Context, members map[string]kubernetes.Interface, cp client.Client, ns string, n, samples int) ([]time.Duration, error) {
	var out []time.Duration
	for s := range samples {
		name := fmt.Sprintf("app-%04d", (s*7919)%n)
		value := "change-" + strconv.Itoa(s)
		start := time.Now()
		patch := []byte(`{"metadata":{"annotations":{"bench/change":"` + value + `"}}}`)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := cp.Patch(ctx, d, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			return nil, err
		}
		for {
			seen := 0
			for _, cs := range members {
				got, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				if err == nil && got.Annotations["bench/change"] == value {
					seen++
				}
			}
			if seen == len(members) {
				break
			}
			if time.Since(start) > time.Minute {
				return nil, fmt.Errorf("change of %s not applied after a minute", name)
			}
			time.Sleep(10 * time.Millisecond)
		}
		out = append(out, time.Since(start))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// writeCounts are mutating apiserver requests by "verb resource".
type writeCounts map[string]float64

var requestTotal = regexp.MustCompile(`^apiserver_request_total\{(.*)\} ([0-9.e+]+)$`)
var metricLabel = regexp.MustCompile(`(\w+)="([^"]*)"`)

// readsOf is the key of the GET and LIST requests to where in fleetWrites' answer.
func readsOf(where string) string { return "reads from the " + where }

// fleetWrites reads the apiservers' request counters, summed over the members: the writes to
// the control plane and to the members, and their reads under readsOf.
func fleetWrites(ctx context.Context, lf *localfleet.LocalFleet) (map[string]writeCounts, error) {
	return apiserverWrites(ctx, lf, append([]string{""}, lf.Fleet().Names()...))
}

// apiserverWrites is fleetWrites of some of the fleet's apiservers: "" is the control plane's.
func apiserverWrites(ctx context.Context, lf *localfleet.LocalFleet, apiservers []string) (map[string]writeCounts, error) {
	out := map[string]writeCounts{"control plane": {}, "members": {}, readsOf("control plane"): {}, readsOf("members"): {}}
	for _, name := range apiservers {
		cfg, err := lf.RESTConfig(name)
		if err != nil {
			return nil, err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading apiserver metrics: %w", err)
		}
		where := "members"
		if name == "" {
			where = "control plane"
		}
		for line := range strings.SplitSeq(string(raw), "\n") {
			m := requestTotal.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			labels := map[string]string{}
			for _, l := range metricLabel.FindAllStringSubmatch(m[1], -1) {
				labels[l[1]] = l[2]
			}
			kind := where
			switch labels["verb"] {
			case "POST", "PUT", "PATCH", "APPLY", "DELETE":
			case "GET", "LIST":
				kind = readsOf(where)
			default:
				continue // WATCH: long-lived, counted once each
			}
			resource := labels["resource"]
			if labels["subresource"] != "" {
				resource += "/" + labels["subresource"]
			}
			v, _ := strconv.ParseFloat(m[2], 64)
			out[kind][labels["verb"]+" "+resource] += v
		}
	}
	return out, nil
}

// waitQuiet waits until the fleet's apiservers take fewer than 10 writes a second for two
// seconds in a row (leases and heartbeats go on), or a minute passed.
func waitQuiet(ctx context.Context, lf *localfleet.LocalFleet) (time.Duration, error) {
	start := time.Now()
	total := func() (float64, error) {
		w, err := fleetWrites(ctx, lf)
		sum := 0.0
		for _, where := range []string{"control plane", "members"} {
			for _, v := range w[where] {
				sum += v
			}
		}
		return sum, err
	}
	last, err := total()
	if err != nil {
		return 0, err
	}
	quiet := 0
	for quiet < 2 && time.Since(start) < time.Minute {
		time.Sleep(time.Second)
		now, err := total()
		if err != nil {
			return 0, err
		}
		if now-last < 10 {
			quiet++
		} else {
			quiet = 0
		}
		last = now
	}
	return time.Since(start), nil
}

// since prints the writes made after before, per member object, largest first.
func (after writeCounts) since(before writeCounts, objects int) string {
	type kv struct {
		k string
		v float64
	}
	var rows []kv
	total := 0.0
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			rows = append(rows, kv{k, d})
			total += d
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].v > rows[j].v })
	parts := []string{fmt.Sprintf("%.2f", total/float64(objects))}
	for i, r := range rows {
		if i == 8 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", r.k, r.v/float64(objects)))
	}
	return parts[0] + " (" + strings.Join(parts[1:], ", ") + ")"
}

// cpuByRole is CPU seconds per kind of fleet process, to show where a run's time went.
type cpuByRole map[string]float64

var roleOrder = []string{"control-plane-apiserver", "member-apiservers", "member-controllers", "etcd", "flotilla", "control-plane-kcm"}

func fleetCPU(lf *localfleet.LocalFleet) cpuByRole {
	out := cpuByRole{}
	for _, s := range lf.Status() {
		role := "control-plane-kcm"
		switch {
		case s.Tool == "etcd":
			role = "etcd"
		case s.Cluster == localfleet.ControlPlaneName && s.Tool == "kube-apiserver":
			role = "control-plane-apiserver"
		case s.Cluster == localfleet.ControlPlaneName && s.Tool != "kube-controller-manager":
			role = "flotilla"
		case s.Tool == "kube-apiserver":
			role = "member-apiservers"
		case s.Cluster != localfleet.ControlPlaneName:
			role = "member-controllers"
		}
		out[role] += cpuSeconds(s.PID)
	}
	return out
}

// members is the CPU seconds the member apiservers and controllers spent since before.
func (before cpuByRole) members(after cpuByRole) float64 {
	return after["member-apiservers"] - before["member-apiservers"] + after["member-controllers"] - before["member-controllers"]
}

func (before cpuByRole) since(after cpuByRole) string {
	var parts []string
	for _, r := range roleOrder {
		if d := after[r] - before[r]; d >= 0.05 {
			parts = append(parts, fmt.Sprintf("%s %.1f", r, d))
		}
	}
	return strings.Join(parts, ", ")
}

// cpuSeconds is the user+system CPU time of a process.
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// peakRSS is the high-water mark of a process's resident memory.
func peakRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// StartFleet starts a fresh fleet of full members for a bench in a temporary directory,
// joined and Ready.
func StartFleet(ctx context.Context, binDir, flotillaBin string, crds []byte, members int, managerArgs []string) (*localfleet.LocalFleet, func(), error) {
	return StartFleetOf(ctx, binDir, flotillaBin, crds, localfleet.GeneratedFleet(members, ""), managerArgs)
}

// StartFleetOf is StartFleet for a given fleet, for example slim members for scale work. The
// join waits 5 minutes and 3 seconds more per member: 100 slim members take minutes to start.
func StartFleetOf(ctx context.Context, binDir, flotillaBin string, crds []byte, fleet *localfleet.Fleet, managerArgs []string) (*localfleet.LocalFleet, func(), error) {
	return StartFleetShowing(ctx, binDir, flotillaBin, crds, fleet, managerArgs, io.Discard)
}

// StartFleetShowing is StartFleetOf that prints to out, every 10 s, how far the fleet got.
func StartFleetShowing(ctx context.Context, binDir, flotillaBin string, crds []byte, fleet *localfleet.Fleet, managerArgs []string, out io.Writer) (*localfleet.LocalFleet, func(), error) {
	progressOut := FleetProgress(out, len(fleet.Members))
	defer progressOut.Finish()
	dir, err := os.MkdirTemp("", "flotilla-bench-")
	if err != nil {
		return nil, nil, err
	}
	lf, err := localfleet.Open(localfleet.Options{
		StateDir: dir, BinDir: binDir, Fleet: fleet, CRDs: crds,
		Manager: &localfleet.ManagerCommand{Binary: flotillaBin, Args: managerArgs}, Out: progressOut,
	})
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = lf.Down(true) }
	if os.Getenv("FLOTILLA_BENCH_KEEP_STATE") == "1" {
		// To read the manager's and members' logs of a run afterwards: stopped, not removed.
		cleanup = func() {
			_ = lf.Down(false)
			fmt.Fprintf(os.Stderr, "the bench fleet's state (logs under its log directory) is kept in %s\n", dir)
		}
	}
	if _, err := lf.Up(ctx); err != nil {
		cleanup()
		return nil, nil, err
	}
	cfg, err := lf.RESTConfig("")
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: kube.Scheme})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	if err := lf.Join(ctx, c, progressOut, 5*time.Minute+3*time.Second*time.Duration(len(fleet.Members))); err != nil {
		cleanup()
		return nil, nil, err
	}
	return lf, cleanup, nil
}
