package clustercache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
)

// ErrNotConnected is returned for a member the cache has no connection to.
var ErrNotConnected = errors.New("member cluster is not connected")

// Options tune probing.
type Options struct {
	// ProbePeriod is the time between two probes of a member.
	ProbePeriod time.Duration
	// ProbeTimeout bounds one probe.
	ProbeTimeout time.Duration
	// FailureThreshold is how many consecutive failed probes make a member NotReady.
	FailureThreshold int
	// DiscoveryInterval is how often a Ready member's served APIs are re-read regardless of
	// change. A CRD or APIService change in the member triggers a read at once; this is the
	// safety net for changes the watch cannot see (an aggregated API that starts serving).
	DiscoveryInterval time.Duration
	// MemberQPS and MemberBurst limit each member client; 0 means 500 and 1000.
	MemberQPS   float32
	MemberBurst int
	// Clock is injected by tests; nil means the real clock.
	Clock clock.WithTicker
}

// DefaultOptions are the production probe settings.
func DefaultOptions() Options {
	return Options{ProbePeriod: 10 * time.Second, ProbeTimeout: 5 * time.Second, FailureThreshold: 3, DiscoveryInterval: 5 * time.Minute}
}

// Validate names the option that is out of range.
func (o Options) Validate() error {
	switch {
	case o.ProbePeriod <= 0:
		return fmt.Errorf("--probe-period %s: must be greater than zero, e.g. 10s", o.ProbePeriod)
	case o.ProbeTimeout <= 0 || o.ProbeTimeout > o.ProbePeriod:
		return fmt.Errorf("--probe-timeout %s: must be greater than zero and at most --probe-period (%s)", o.ProbeTimeout, o.ProbePeriod)
	case o.FailureThreshold < 1:
		return fmt.Errorf("--failure-threshold %d: must be at least 1", o.FailureThreshold)
	case o.DiscoveryInterval < o.ProbePeriod:
		return fmt.Errorf("--discovery-interval %s: must be at least --probe-period (%s), e.g. 5m", o.DiscoveryInterval, o.ProbePeriod)
	}
	return nil
}

// Cache holds one connection per member cluster.
type Cache struct {
	opts   Options
	events chan event.GenericEvent

	mu      sync.Mutex
	members map[string]*member
	// reported is the health Pull members' agents report; the cache holds no connection to them.
	reported map[string]Health
	// mappers are the REST mappers, shared by members serving the same APIs.
	mappers *mapperPool
}

// New returns an empty cache.
func New(opts Options) *Cache {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.DiscoveryInterval == 0 {
		opts.DiscoveryInterval = DefaultOptions().DiscoveryInterval
	}
	return &Cache{opts: opts, events: make(chan event.GenericEvent, 1024), members: map[string]*member{}, mappers: newMapperPool()}
}

// Events delivers one event per probe of a member (and per agent report), for the cluster
// controller to watch.
func (c *Cache) Events() <-chan event.GenericEvent { return c.events }

// Report takes the health a Pull member's agent reports of its member.
func (c *Cache) Report(name string, h Health) {
	c.mu.Lock()
	if c.reported == nil {
		c.reported = map[string]Health{}
	}
	c.reported[name] = h
	c.mu.Unlock()
	// Never blocks the agent's request: a full channel means the controller has work queued
	// for the cluster anyway, and it requeues Pull members before their silence limit.
	select {
	case c.events <- event.GenericEvent{Object: &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}}:
	default:
	}
}

// Reported returns the latest health the member's agent reported, and false before any.
func (c *Cache) Reported(name string) (Health, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.reported[name]
	return h, ok
}

// ForgetReported drops an unjoined Pull member's health.
func (c *Cache) ForgetReported(name string) {
	c.mu.Lock()
	delete(c.reported, name)
	c.mu.Unlock()
}

// Member is a connection to one member cluster.
type Member struct {
	Name      string
	Config    *rest.Config
	Clientset kubernetes.Interface
	Dynamic   dynamic.Interface
}

type member struct {
	Member
	fingerprint string
	token       *swappableToken
	cancel      context.CancelFunc
	factory     informers.SharedInformerFactory
	objects     *objectWatches
	// apiFactory watches the member's CRDs and APIServices; apisChanged carries their changes
	// to the probe loop, which then reads discovery without waiting for DiscoveryInterval.
	apiFactory  metadatainformer.SharedInformerFactory
	apisChanged chan struct{}
	apisWatched atomic.Bool // the watch listed once, so it sees every later change

	mu     sync.RWMutex
	health Health
}

// Connect makes sure the cache holds a connection to the member with the given config.
// fingerprint identifies the credentials; a changed fingerprint replaces the connection, unless
// only the bearer token changed (a renewal), which the connection takes in place.
// It returns at once; probing runs in the member's own goroutine until Disconnect.
func (c *Cache) Connect(ctx context.Context, name string, cfg *rest.Config, fingerprint string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.members[name]; ok {
		if m.fingerprint == fingerprint {
			return nil
		}
		if m.token.swap(cfg) {
			m.fingerprint = fingerprint
			return nil
		}
		m.stop()
		delete(c.members, name)
	}
	cfg = rest.CopyConfig(cfg)
	token := withSwappableToken(cfg)
	cfg.QPS, cfg.Burst = c.opts.MemberQPS, c.opts.MemberBurst
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 500, 1000
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building client for cluster %s: %w", name, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building dynamic client for cluster %s: %w", name, err)
	}
	// A detached context: the member lives until Disconnect, not until the caller's request ends.
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m := &member{
		Member:      Member{Name: name, Config: cfg, Clientset: cs, Dynamic: dyn},
		fingerprint: fingerprint,
		token:       token,
		cancel:      cancel,
		health:      Health{Readiness: ReadinessUnknown},
		apisChanged: make(chan struct{}, 1),
	}
	m.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0)
	// Pods are stripped to what the summary needs: a member's pods can be many.
	_ = m.factory.Core().V1().Pods().Informer().SetTransform(stripPod)
	_ = m.factory.Core().V1().Nodes().Informer()
	m.factory.Start(mctx.Done())
	m.initObjectWatches(c.mappers)
	m.watchServedAPIs(mctx)
	c.members[name] = m
	go c.probeLoop(mctx, m)
	return nil
}

// Disconnect stops probing a member and drops its connection and informers. The member leaves
// the cache first and is stopped outside its lock: stopping waits for its informers to end,
// and every other member's lookups would wait with it.
func (c *Cache) Disconnect(name string) {
	c.mu.Lock()
	m, ok := c.members[name]
	delete(c.members, name)
	c.mu.Unlock()
	if ok {
		m.stop()
	}
	forgetMetrics(name)
}

func (m *member) stop() {
	m.cancel()
	m.factory.Shutdown()
	close(m.objects.stop)
	m.objects.factory.Shutdown()
	if m.apiFactory != nil {
		m.apiFactory.Shutdown()
	}
}

// Get returns the connection to a member.
func (c *Cache) Get(name string) (Member, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.members[name]
	if !ok {
		return Member{}, fmt.Errorf("cluster %s: %w", name, ErrNotConnected)
	}
	return m.Member, nil
}

// Health returns the member's latest health, and false when the member is not connected.
func (c *Cache) Health(name string) (Health, bool) {
	c.mu.Lock()
	m, ok := c.members[name]
	c.mu.Unlock()
	if !ok {
		return Health{}, false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.health, true
}

// Connected lists the names of connected members.
func (c *Cache) Connected() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.members))
	for n := range c.members {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (c *Cache) probeLoop(ctx context.Context, m *member) {
	log := logf.FromContext(ctx).WithValues("cluster", m.Name)
	ticker := c.opts.Clock.NewTicker(c.opts.ProbePeriod)
	defer ticker.Stop()
	// Why this probe reads discovery even when it is fresh: nothing, a watched API change,
	// or the re-check after an API change the first read did not show yet.
	const periodic, apiChange, apiRecheck = 0, 1, 2
	reason := periodic
	var recheck <-chan time.Time
	var lastChangeRead time.Time
	for {
		changed := c.probe(ctx, m, reason != periodic)
		switch {
		case reason == apiChange && !changed:
			recheck = c.opts.Clock.After(apiChangeRecheck)
		case reason != periodic || changed:
			recheck = nil
		}
		reason = periodic
		obj := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: m.Name}}
		select {
		case c.events <- event.GenericEvent{Object: obj}:
		case <-ctx.Done():
			return
		}
		select {
		case <-ctx.Done():
			log.V(1).Info("Stopped probing member")
			return
		case <-ticker.C():
		case <-recheck:
			reason = apiRecheck
		case <-m.apisChanged:
			wait := max(apiChangeSettle, apiChangeMinGap-c.opts.Clock.Since(lastChangeRead))
			select {
			case <-c.opts.Clock.After(wait):
			case <-ctx.Done():
				return
			}
			lastChangeRead = c.opts.Clock.Now()
			select { // changes during the settle time are covered by this read
			case <-m.apisChanged:
			default:
			}
			log.V(1).Info("Served APIs changed; reading discovery")
			reason = apiChange
		}
	}
}

// probe checks /readyz within the probe timeout, then refreshes version, discovery and the
// informer-fed summaries. rediscover reads discovery even when it is fresh; the result says
// whether the served APIs changed.
func (c *Cache) probe(ctx context.Context, m *member, rediscover bool) (apisChanged bool) {
	start := c.opts.Clock.Now()
	pctx, cancel := context.WithTimeout(ctx, c.opts.ProbeTimeout)
	defer cancel()
	err := m.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").Do(pctx).Error()
	var version string
	if err == nil {
		var info struct {
			GitVersion string `json:"gitVersion"`
		}
		var raw []byte
		raw, err = m.Clientset.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(pctx)
		if err == nil {
			err = json.Unmarshal(raw, &info)
			version = info.GitVersion
		}
	}
	if ctx.Err() != nil {
		return false // disconnected while probing
	}
	observeProbe(m.Name, c.opts.Clock.Since(start), err)

	m.mu.RLock()
	prev := m.health
	m.mu.RUnlock()
	next := nextHealth(prev, probeResult{at: c.opts.Clock.Now(), err: err}, c.opts.FailureThreshold)
	if err == nil {
		next.Version = version
		interval := c.opts.DiscoveryInterval
		if !m.apisWatched.Load() {
			interval = min(interval, unwatchedDiscoveryInterval)
		}
		if rediscover || prev.Readiness != ReadinessReady || c.opts.Clock.Since(prev.LastDiscovery) >= interval {
			if apis, derr := readAPIEnablements(m.Clientset.Discovery()); derr == nil {
				apisChanged = !apiequality.Semantic.DeepEqual(prev.APIEnablements, apis)
				next.APIEnablements, next.LastDiscovery = apis, c.opts.Clock.Now()
			} else {
				logf.FromContext(ctx).V(1).Info("Discovery failed", "cluster", m.Name, "error", derr.Error())
			}
		}
		// A fresh connection's informers sync within moments; waiting for them (bounded by
		// the probe timeout) lets the first probe report nodes and capacity.
		m.factory.WaitForCacheSync(pctx.Done())
		next.Nodes, next.Resources = m.summaries()
	}
	setReadyMetric(m.Name, next.Readiness)
	m.mu.Lock()
	m.health = next
	m.mu.Unlock()
	return apisChanged
}

// readAPIEnablements lists what the member serves, sorted so status stays stable. Partial
// discovery failures (an aggregated API that is down) keep the groups that answered.
func readAPIEnablements(d discovery.DiscoveryInterface) ([]clusterv1alpha1.APIEnablement, error) {
	_, lists, err := d.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, err
	}
	var out []clusterv1alpha1.APIEnablement
	for _, l := range lists {
		e := clusterv1alpha1.APIEnablement{GroupVersion: l.GroupVersion}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") { // subresources such as deployments/status
				continue
			}
			e.Resources = append(e.Resources, clusterv1alpha1.APIResource{Name: r.Name, Kind: r.Kind})
		}
		sort.Slice(e.Resources, func(i, j int) bool { return e.Resources[i].Name < e.Resources[j].Name })
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GroupVersion < out[j].GroupVersion })
	return out, nil
}

// stripPod keeps only what the resource summary reads of a pod.
func stripPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion},
		Spec:       corev1.PodSpec{NodeName: pod.Spec.NodeName, Overhead: pod.Spec.Overhead},
		Status:     corev1.PodStatus{Phase: pod.Status.Phase},
	}
	for _, ctr := range pod.Spec.InitContainers {
		slim.Spec.InitContainers = append(slim.Spec.InitContainers, corev1.Container{Name: ctr.Name, Resources: corev1.ResourceRequirements{Requests: ctr.Resources.Requests}, RestartPolicy: ctr.RestartPolicy})
	}
	for _, ctr := range pod.Spec.Containers {
		slim.Spec.Containers = append(slim.Spec.Containers, corev1.Container{Name: ctr.Name, Resources: corev1.ResourceRequirements{Requests: ctr.Resources.Requests}})
	}
	return slim, nil
}
