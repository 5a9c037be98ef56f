// Package agent is flotilla-agent, which runs in a Pull member and dials out to the control
// plane (package pull serves it): it registers once with a bootstrap token for a client
// certificate naming its cluster, follows its cluster's Works into a local store (package
// worksync, as a sharded manager's replica follows the leader), applies them to its own
// member with the controller-manager's executor (server-side apply, field manager flotilla,
// the same drift rules, Retain and interpreters), reports their status back and sends a
// heartbeat with its member's health.
//
// Disconnected, it keeps going on what it last received: the Works stay applied, drift is
// put back, health is observed locally; the status it could not send is sent, newest per
// Work, when the control plane answers again.
//
// It must not reach any control-plane API but the agent endpoint, nor any cluster but its own.
package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/execute"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/luavm"
	"github.com/flotilla-dev/flotilla/internal/pull"
	"github.com/flotilla-dev/flotilla/internal/workstore"
	"github.com/flotilla-dev/flotilla/internal/worksync"
)

// Options configure an agent.
type Options struct {
	// Cluster is the name the member was joined under.
	Cluster string
	// ControlPlane is the agent endpoint, https://HOST:PORT.
	ControlPlane string
	// CAFile holds the CA of the endpoint's serving certificate; empty: the system roots.
	CAFile string
	// BootstrapToken registers the agent when its state directory holds no identity.
	BootstrapToken string
	// StateDir keeps the agent's key and certificate, unless IdentitySecret is set.
	StateDir string
	// IdentitySecret, NAMESPACE/NAME, keeps them in a Secret of the member instead (an agent
	// run as a Deployment).
	IdentitySecret string
	// HeartbeatInterval is how often the agent reports; 0 is DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// MetricsAddress and HealthAddress serve metrics and /healthz, /readyz; "0" turns off.
	MetricsAddress, HealthAddress string
	Version                       string
}

// Validate names the option that is missing or wrong.
func (o Options) Validate() error {
	switch {
	case o.Cluster == "":
		return errors.New("--cluster: give the name the member was joined under (flotilla join NAME --mode Pull)")
	case len(o.ControlPlane) < 9 || o.ControlPlane[:8] != "https://":
		return fmt.Errorf("--control-plane %q: give the agent endpoint as https://HOST:PORT (the controller-manager's --agent-bind-address)", o.ControlPlane)
	case o.StateDir == "" && o.IdentitySecret == "":
		return errors.New("--state-dir or --identity-secret: give a directory, or a Secret of the member, that outlives restarts for the agent's key and certificate")
	case o.IdentitySecret != "" && !validSecretRef(o.IdentitySecret):
		return fmt.Errorf("--identity-secret %q: give NAMESPACE/NAME of a Secret in the member, for example flotilla-system/flotilla-agent-identity", o.IdentitySecret)
	case o.HeartbeatInterval < 0 || (o.HeartbeatInterval > 0 && o.HeartbeatInterval < time.Second):
		return fmt.Errorf("--heartbeat-interval %s: give at least 1s (default %s); the control plane accepts about one heartbeat a second", o.HeartbeatInterval, DefaultHeartbeatInterval)
	}
	return nil
}

// controlPlaneClients are the agent's two clients of the control plane: one with no
// certificate (registration), one presenting what certificate returns at each handshake.
// Neither follows a redirect: the token and certificate go only to --control-plane.
func controlPlaneClients(base *tls.Config, certificate func() *tls.Certificate) (anonymous, withCert *http.Client) {
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	anonymous = &http.Client{Timeout: 30 * time.Second, CheckRedirect: noRedirect,
		Transport: &http.Transport{TLSClientConfig: base.Clone(), Proxy: http.ProxyFromEnvironment}}
	tc := base.Clone()
	tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := certificate(); c != nil {
			return c, nil
		}
		return &tls.Certificate{}, nil
	}
	// No overall timeout: the Works stream lasts (worksync watches its idleness instead).
	withCert = &http.Client{CheckRedirect: noRedirect, Transport: &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment,
		ResponseHeaderTimeout: 30 * time.Second}}
	return anonymous, withCert
}

// DefaultHeartbeatInterval is how often an agent reports unless told otherwise; the
// controller-manager's default --agent-silence-limit is a few of them.
const DefaultHeartbeatInterval = 10 * time.Second

// Agent is one running flotilla-agent.
type Agent struct {
	opts Options
	id   *identity
	// anonymous registers (no client certificate); client carries the agent's certificate.
	anonymous, client *http.Client
	facts             ownClusterFacts
	journal           *journal
	// interpreters are the built-in ones and the platform's customizations, loaded while
	// customizationsVersion names what the control plane last said.
	interpreters          *interpret.Registry
	customizations        map[string]bool
	customizationsVersion string
	customizationsMu      sync.Mutex
	// lastCustomizations is the list last put in force, kept in the snapshot.
	lastCustomizations *configv1alpha1.ResourceInterpreterCustomizationList
}

// Run registers when needed and then applies the cluster's Works until ctx ends.
func Run(ctx context.Context, member *rest.Config, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	log := logf.FromContext(ctx).WithName("agent").WithValues("cluster", o.Cluster)
	var store identityStore = fileStore{dir: o.StateDir}
	if o.IdentitySecret != "" {
		kc, err := kubernetes.NewForConfig(member)
		if err != nil {
			return err
		}
		ns, name, _ := strings.Cut(o.IdentitySecret, "/")
		store = secretStore{kube: kc, namespace: ns, name: name}
	}
	a := &Agent{opts: o, id: &identity{store: store}, journal: &journal{}}
	a.facts = ownClusterFacts{name: o.Cluster, ask: func(ctx context.Context) (pull.ClusterState, error) {
		var state pull.ClusterState
		return state, a.get(ctx, pull.ClusterPath, &state)
	}}
	roots, err := serverRoots(o.CAFile)
	if err != nil {
		return err
	}
	a.anonymous, a.client = controlPlaneClients(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}, a.id.certificate)

	ok, err := a.id.load(ctx, time.Now())
	if err != nil {
		return err
	}
	if !ok && o.BootstrapToken == "" {
		return fmt.Errorf("%s holds no identity and no bootstrap token was given: give --bootstrap-token-file with the token `flotilla join %s --mode Pull` printed", store, o.Cluster)
	}
	for !ok {
		err := a.register(ctx)
		if err == nil {
			log.Info("Registered with the control plane", "certificateNotAfter", a.id.leaf().NotAfter)
			break
		}
		if final(err) || ctx.Err() != nil {
			return err // a refused token stays refused
		}
		log.Info("The control plane is not reachable yet; registering again in 10s", "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
		}
	}

	mgr, err := ctrl.NewManager(member, ctrl.Options{
		Scheme:                 kube.Scheme,
		Metrics:                metricsserver.Options{BindAddress: orOff(o.MetricsAddress)},
		HealthProbeBindAddress: orOff(o.HealthAddress),
		Logger:                 log,
	})
	if err != nil {
		return fmt.Errorf("the member's API server: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	members := clustercache.New(clustercache.DefaultOptions())
	if err := members.Connect(ctx, o.Cluster, member, "local"); err != nil {
		return err
	}
	go drainProbeEvents(ctx, members)
	mirror := workstore.New()
	luavm.SetProcessLimits(luavm.ProcessLimits{})
	a.interpreters, a.customizations = interpret.NewRegistry(luavm.Limits{}), map[string]bool{}
	// Customized kinds are judged by their customization from the first Work on, when the
	// control plane answers now; else from the first heartbeat that gets through.
	customized := a.loadCustomizations(ctx, a.interpreters, a.customizations) == nil
	// What the agent last received, should the control plane be away now: applied at once.
	restored, err := a.restoreSnapshot(ctx, mirror, customized)
	if err != nil {
		log.Error(err, "Reading the snapshot of the last Works; starting without it")
	} else if n := mirror.Len(); n > 0 {
		log.Info("Restored the last Works received", "works", n, "customizations", restored)
	}
	customized = customized || restored
	if err := (&execute.Executor{Client: mirror.Client(mgr.GetClient()), Works: mirror, Members: members,
		Interpreters: a.interpreters, Agent: true, Clusters: a.facts, EveryReplica: true, Recorder: a.journal,
		DriftCheckInterval: execute.DefaultDriftCheckInterval}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the executor: %w", err)
	}
	if err := mgr.Add(kube.Runnable(func(ctx context.Context) error { a.keepSnapshots(ctx, mirror, 5*time.Second); return nil }, false)); err != nil {
		return err
	}
	upstream := &worksync.Remote{Base: o.ControlPlane, Client: a.client}
	runner := &worksync.Runner{Ring: ownCluster(o.Cluster), Mirror: mirror, Fixed: upstream}
	// No Work is applied before the platform's customizations are in force: a custom kind's
	// Retain (fields the member owns) must hold from the first apply.
	if err := mgr.Add(kube.Runnable(func(ctx context.Context) error {
		for !customized {
			log.Info("Waiting for the platform's customizations before applying Works; retrying in 10s")
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(10 * time.Second):
			}
			customized = a.loadCustomizations(ctx, a.interpreters, a.customizations) == nil
		}
		return runner.Start(ctx)
	}, false)); err != nil {
		return err
	}
	if err := mgr.Add(kube.Runnable(func(ctx context.Context) error { a.heartbeats(ctx, members); return nil }, false)); err != nil {
		return err
	}
	log.Info("Applying the cluster's Works", "controlPlane", o.ControlPlane)
	return mgr.Start(ctx)
}

// final says whether a refusal will not change by asking again (a bad, used or expired token,
// or a cluster that is not a Pull member); anything else is retried.
func final(err error) bool {
	var r *refusal
	return errors.As(err, &r) && (r.status == http.StatusBadRequest || r.status == http.StatusUnauthorized || r.status == http.StatusForbidden)
}

func validSecretRef(ref string) bool {
	ns, name, ok := strings.Cut(ref, "/")
	return ok && len(validation.IsDNS1123Label(ns)) == 0 && len(validation.IsDNS1123Subdomain(name)) == 0
}

func orOff(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}

func serverRoots(caFile string) (*x509.CertPool, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", caFile)
	}
	return pool, nil
}

// drainProbeEvents discards the cache's probe events: the agent has no cluster controller,
// its heartbeat reads the health itself.
func drainProbeEvents(ctx context.Context, members *clustercache.Cache) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-members.Events():
		}
	}
}

// ownCluster is the agent's share of the fleet: its cluster, always; its one upstream is the
// control plane.
type ownCluster string

func (c ownCluster) Held() []string { return []string{string(c)} }
func (c ownCluster) Leader() (string, string, bool) {
	return "control-plane", "", true
}
func (c ownCluster) Watch() <-chan struct{} { return nil }

// ownClusterFacts answers the executor about the agent's own cluster, a Pull cluster. Whether
// it is being unjoined, and with which policy, is asked of the control plane before a deleted
// Work's objects are removed: a cluster the control plane refuses was unjoined (what runs
// stays), and no answer is an error (nothing is deleted on a guess).
type ownClusterFacts struct {
	name string
	ask  func(context.Context) (pull.ClusterState, error)
}

func (f ownClusterFacts) Pull(_ context.Context, name string) bool { return name == f.name }

func (f ownClusterFacts) Unjoining(ctx context.Context, name string) (bool, clusterv1alpha1.ClusterDeletionPolicy, error) {
	if name != f.name {
		return false, "", fmt.Errorf("the agent of cluster %s knows no cluster %s", f.name, name)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	state, err := f.ask(cctx)
	cancel()
	switch {
	case err != nil && !final(err):
		return false, "", fmt.Errorf("asking the control plane about cluster %s: %w", f.name, err)
	case err != nil: // refused: the cluster was unjoined, and this agent with it
		return true, clusterv1alpha1.ClusterDeletionOrphan, nil
	case !state.Unjoining:
		return false, "", nil
	case state.DeletionPolicy == "":
		return true, clusterv1alpha1.ClusterDeletionOrphan, nil
	}
	return true, state.DeletionPolicy, nil
}
