package bench

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// memberTimeline records, per member, when a Deployment first showed an image and when it
// first ran that image fully available.
type memberTimeline struct {
	mu        sync.Mutex
	applied   map[string]map[string]time.Time // image -> cluster -> time
	available map[string]map[string]time.Time
}

func (m *memberTimeline) record(cluster string, d *appsv1.Deployment, now time.Time) {
	image := d.Spec.Template.Spec.Containers[0].Image
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.applied[image] == nil {
		m.applied[image], m.available[image] = map[string]time.Time{}, map[string]time.Time{}
	}
	if _, seen := m.applied[image][cluster]; !seen {
		m.applied[image][cluster] = now
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	st := d.Status
	if _, seen := m.available[image][cluster]; !seen && st.ObservedGeneration >= d.Generation &&
		st.UpdatedReplicas == want && st.AvailableReplicas == want && st.Replicas == want {
		m.available[image][cluster] = now
	}
}

func (m *memberTimeline) at(kind map[string]map[string]time.Time, image, cluster string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := kind[image][cluster]
	return t, ok
}

// Release measures the release controller on a started and joined local fleet: the overhead
// per wave (from the previous wave's last cluster running the new revision available, as the
// member shows it, to the next wave's first apply) and the time from abort to every updated
// cluster applied back on the stable revision.
func Release(ctx context.Context, lf *localfleet.LocalFleet, rounds int, out io.Writer) error {
	members := lf.Fleet().Names()
	sort.Strings(members)
	cpCfg, err := lf.RESTConfig("")
	if err != nil {
		return err
	}
	cp, err := client.New(cpCfg, client.Options{Scheme: kube.Scheme})
	if err != nil {
		return err
	}
	ns := "bench-release"
	if err := cp.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	var waves []policyv1alpha1.Wave
	for _, m := range members {
		waves = append(waves, policyv1alpha1.Wave{Name: m, ClusterNames: []string{m}})
	}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Rollout:           &policyv1alpha1.RolloutStrategy{Waves: waves},
		},
	}
	if err := cp.Create(ctx, policy); err != nil {
		return err
	}
	web := deployment(ns, 0)
	web.Name, web.Spec.Replicas = "web", ptr.To[int32](2)
	if err := cp.Create(ctx, web); err != nil {
		return err
	}
	timeline := &memberTimeline{applied: map[string]map[string]time.Time{}, available: map[string]map[string]time.Time{}}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	for _, m := range members {
		cfg, err := lf.RESTConfig(m)
		if err != nil {
			return err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		go watchDeployment(wctx, cs, ns, "web", func(d *appsv1.Deployment) { timeline.record(m, d, time.Now()) })
	}
	image := func(i int) string { return fmt.Sprintf("registry.example/app:%d", i) }
	waitAll := func(kind map[string]map[string]time.Time, img string, clusters []string, limit time.Duration) error {
		deadline := time.Now().Add(limit)
		for time.Now().Before(deadline) {
			all := true
			for _, c := range clusters {
				if _, ok := timeline.at(kind, img, c); !ok {
					all = false
				}
			}
			if all {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		return fmt.Errorf("%s not reached in %v by %v", img, limit, clusters)
	}
	if err := waitAll(timeline.available, image(1), members, 3*time.Minute); err != nil {
		return err
	}
	setImage := func(img string) error {
		cur := &appsv1.Deployment{}
		if err := cp.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = img
		return cp.Update(ctx, cur)
	}
	fmt.Fprintf(out, "== release: 1 Deployment (2 replicas), %d waves of one cluster each, no gates\n", len(members))
	var overheads []time.Duration
	rev := 1
	for r := 0; r < rounds; r++ {
		rev++
		start := time.Now()
		if err := setImage(image(rev)); err != nil {
			return err
		}
		if err := waitAll(timeline.available, image(rev), members, 3*time.Minute); err != nil {
			return err
		}
		for i := 1; i < len(members); i++ {
			healthy, _ := timeline.at(timeline.available, image(rev), members[i-1])
			next, _ := timeline.at(timeline.applied, image(rev), members[i])
			overheads = append(overheads, next.Sub(healthy))
		}
		first, _ := timeline.at(timeline.applied, image(rev), members[0])
		last, _ := timeline.at(timeline.available, image(rev), members[len(members)-1])
		fmt.Fprintf(out, "round %d: change -> first apply %s, change -> last wave available %s\n", r+1,
			first.Sub(start).Round(time.Millisecond), last.Sub(start).Round(time.Millisecond))
	}
	sort.Slice(overheads, func(i, j int) bool { return overheads[i] < overheads[j] })
	fmt.Fprintf(out, "overhead per wave (previous wave available in its member -> next wave's first apply): p50 %s  max %s  (%d transitions)\n",
		overheads[len(overheads)/2].Round(time.Millisecond), overheads[len(overheads)-1].Round(time.Millisecond), len(overheads))

	// Abort: hold the first wave with a manual approval, then abort it.
	cur := &policyv1alpha1.PropagationPolicy{}
	if err := cp.Get(ctx, client.ObjectKeyFromObject(policy), cur); err != nil {
		return err
	}
	cur.Spec.Rollout.Waves[0].Gates.ManualApproval = true
	if err := cp.Update(ctx, cur); err != nil {
		return err
	}
	var aborts []time.Duration
	stable := image(rev)
	for r := 0; r < rounds; r++ {
		rev++
		if err := setImage(image(rev)); err != nil {
			return err
		}
		if err := waitAll(timeline.available, image(rev), members[:1], 3*time.Minute); err != nil {
			return err
		}
		rels := &rolloutv1alpha1.ReleaseList{}
		if err := cp.List(ctx, rels, client.InNamespace(ns)); err != nil {
			return err
		}
		var rel *rolloutv1alpha1.Release
		for i := range rels.Items {
			if rels.Items[i].Spec.Revision == int64(rev) {
				rel = &rels.Items[i]
			}
		}
		if rel == nil {
			return fmt.Errorf("no release for revision %d", rev)
		}
		timeline.mu.Lock()
		delete(timeline.applied, stable) // the way back counts from now
		delete(timeline.available, stable)
		timeline.mu.Unlock()
		start := time.Now()
		patch := client.MergeFrom(rel.DeepCopy())
		rel.Spec.Abort = true
		if err := cp.Patch(ctx, rel, patch); err != nil {
			return err
		}
		if err := waitAll(timeline.applied, stable, members[:1], time.Minute); err != nil {
			return err
		}
		back, _ := timeline.at(timeline.applied, stable, members[0])
		aborts = append(aborts, back.Sub(start))
		// The template goes back too, so the next round starts from stable again.
		if err := setImage(stable); err != nil {
			return err
		}
		rev++
		time.Sleep(2 * time.Second)
	}
	sort.Slice(aborts, func(i, j int) bool { return aborts[i] < aborts[j] })
	fmt.Fprintf(out, "abort -> updated clusters applied back on stable: p50 %s  max %s  (%d aborts)\n",
		aborts[len(aborts)/2].Round(time.Millisecond), aborts[len(aborts)-1].Round(time.Millisecond), len(aborts))
	return nil
}

func watchDeployment(ctx context.Context, cs kubernetes.Interface, ns, name string, seen func(*appsv1.Deployment)) {
	for ctx.Err() == nil {
		w, err := cs.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok {
				seen(d)
			}
		}
	}
}
