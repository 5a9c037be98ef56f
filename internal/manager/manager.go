// Package manager assembles Flotilla's controller-manager: one controller-runtime manager with
// leader election, Prometheus metrics and health probes, the clustercache that owns member
// connections, and every controller. It holds wiring only; behaviour lives in the capability
// packages it registers.
package manager

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flotilla-dev/flotilla/internal/analysisrun"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/flotilla-dev/flotilla/internal/appdeps"
	"github.com/flotilla-dev/flotilla/internal/application"
	"github.com/flotilla-dev/flotilla/internal/appsource"
	"github.com/flotilla-dev/flotilla/internal/customization"
	"github.com/flotilla-dev/flotilla/internal/failover"
	"github.com/flotilla-dev/flotilla/internal/historian"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/luavm"
	"github.com/flotilla-dev/flotilla/internal/targeting"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/flotilla-dev/flotilla/internal/analysis"
	"github.com/flotilla-dev/flotilla/internal/audit"
	"github.com/flotilla-dev/flotilla/internal/binding"
	"github.com/flotilla-dev/flotilla/internal/cluster"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/detector"
	"github.com/flotilla-dev/flotilla/internal/execute"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/release"
	"github.com/flotilla-dev/flotilla/internal/render"
	"github.com/flotilla-dev/flotilla/internal/scheduler"
	"github.com/flotilla-dev/flotilla/internal/shard"
	"github.com/flotilla-dev/flotilla/internal/statusboard"
	"github.com/flotilla-dev/flotilla/internal/team"
	"github.com/flotilla-dev/flotilla/internal/workstore"
	"github.com/flotilla-dev/flotilla/internal/worksync"
)

// Options configure the controller-manager.
type Options struct {
	MetricsAddress     string
	HealthProbeAddress string
	// MetricsSecure serves metrics over HTTPS to authenticated, authorized clients only; nil
	// means secure unless MetricsAddress is a loopback address.
	MetricsSecure *bool
	// PodSecurityLevel is what workloads placed by namespaced PropagationPolicies must meet and
	// what member namespaces Flotilla creates for them enforce.
	PodSecurityLevel string
	// AllowExecPlugins names the exec credential plugins member kubeconfigs may use.
	AllowExecPlugins []string
	// PodSecurityExemptNamespaces are control-plane namespaces whose templates are not checked.
	PodSecurityExemptNamespaces []string
	LeaderElection              bool
	LeaderElectionID            string
	Probe                       clustercache.Options
	// KubeAPIQPS and KubeAPIBurst limit the control-plane client.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// PprofAddress serves net/http/pprof when set.
	PprofAddress string
	// FailoverGracePeriod is how long a cluster may stay not Ready before it is tainted
	// unreachable and its Divided replicas move.
	FailoverGracePeriod time.Duration
	// Lua bounds the interpreter customization scripts of the process together;
	// LuaCallMemory bounds the estimated memory of one call.
	Lua           luavm.ProcessLimits
	LuaCallMemory int64
	// Analysis holds the ranges analysis may reach beyond the egress rules and the Pod Security
	// level of a namespace's analysis Jobs.
	Analysis analysis.Settings
	// DriftCheckInterval is how often every Work is compared with its member objects without
	// a member event (a safety net under the member informers); 0 turns it off.
	DriftCheckInterval time.Duration
	// GitCacheDir holds the git trees Applications are rendered from.
	GitCacheDir string
	// Git bounds what one repository of an Application may cost (see appsource.Bounds).
	Git GitOptions
	// HistoryDSN is the history store: sqlite://PATH (default, in the user cache directory)
	// or postgres://...; HistoryRetention and HistoryMaxRecords (per team) bound it (0:
	// unbounded).
	HistoryDSN        string
	HistoryRetention  time.Duration
	HistoryMaxRecords int
	// Inventory serves the inventory API when its address is set.
	Inventory InventoryOptions
	// Agents is the endpoint Pull members' agents dial.
	Agents AgentOptions
	// Shard splits the member clusters between replicas when its Identity is set.
	Shard ShardOptions
	// GitWebhookRequireSignature refuses unsigned git push webhooks, also for the Applications
	// of Teams that name no webhook secret (spec.webhook.secretRef).
	GitWebhookRequireSignature bool
	// MemoryLimitMiB is the Go heap's soft limit; 0: 90% of the container's memory limit,
	// if any, unless GOMEMLIMIT is set (see memory.go).
	MemoryLimitMiB int64
}

// ShardOptions say how this replica shares the member clusters with the others.
type ShardOptions struct {
	Identity       string
	Address        string
	PeerCAFile     string
	PeerServerName string
}

// InventoryOptions say where and how the inventory API is served.
type InventoryOptions struct {
	Address      string // host:port; empty: not served
	CertFile     string // TLS serving certificate and key (required with Address)
	KeyFile      string
	ClientCAFile string // accept client certificates of this CA (the control plane's client CA)
	// AuditClientNames are the client certificate common names whose audit event batches
	// are taken at /audit/v1/events (the control plane's audit webhook); none: not served.
	AuditClientNames []string
	// Dashboard serves the web dashboard at /dashboard/ on the same address; users log in
	// with bearer tokens and act with them (see package dashboard).
	Dashboard bool
}

// GitOptions are appsource.Bounds as flags give them: sizes in MiB.
type GitOptions struct {
	MaxFetchMiB    int64 // --git-max-fetch-mib
	MaxObjects     int   // --git-max-objects
	MaxFileMiB     int64 // --git-max-file-mib
	MaxCheckoutMiB int64 // --git-max-checkout-mib
	TeamCacheMiB   int64 // --git-team-cache-mib
}

// bounds checks the options and turns them into the Fetcher's bounds; an error names the flag.
func (g GitOptions) bounds() (appsource.Bounds, error) {
	for _, f := range []struct {
		flag string
		v    int64
	}{
		{appsource.FlagMaxFetchMiB, g.MaxFetchMiB}, {appsource.FlagMaxObjects, int64(g.MaxObjects)}, {appsource.FlagMaxFileMiB, g.MaxFileMiB},
		{appsource.FlagMaxCheckoutMiB, g.MaxCheckoutMiB}, {appsource.FlagTeamCacheMiB, g.TeamCacheMiB},
	} {
		if f.v <= 0 || f.v > 1<<30 {
			return appsource.Bounds{}, fmt.Errorf("%s %d: give a positive number (a bound on what one Application's repository may cost)", f.flag, f.v)
		}
	}
	return appsource.Bounds{MaxFetchBytes: g.MaxFetchMiB << 20, MaxObjects: g.MaxObjects, MaxFileBytes: g.MaxFileMiB << 20,
		MaxCheckoutBytes: g.MaxCheckoutMiB << 20, TeamCacheBytes: g.TeamCacheMiB << 20}, nil
}

// DefaultOptions are the production defaults.
func DefaultOptions() Options {
	return Options{
		// Loopback unless told otherwise: metrics and health say what runs where.
		MetricsAddress:     "127.0.0.1:8080",
		HealthProbeAddress: "127.0.0.1:8081",
		PodSecurityLevel:   render.DefaultPodSecurityLevel,
		LeaderElection:     true,
		LeaderElectionID:   "flotilla-controller-manager",
		Probe:              clustercache.DefaultOptions(),
		KubeAPIQPS:         500,
		KubeAPIBurst:       1000,
		// Several probe periods past not Ready: a member restart does not move workloads.
		FailoverGracePeriod: time.Minute,
		Lua:                 luavm.DefaultProcessLimits(),
		LuaCallMemory:       luavm.DefaultLimits().MaxMemory,
		Analysis:            analysis.DefaultSettings(),
		DriftCheckInterval:  execute.DefaultDriftCheckInterval,
		HistoryRetention:    90 * 24 * time.Hour,
		HistoryMaxRecords:   1_000_000,
		Git: GitOptions{
			MaxFetchMiB: appsource.DefaultMaxFetchBytes >> 20, MaxObjects: appsource.DefaultMaxFetchObjects,
			MaxFileMiB: appsource.DefaultMaxFetchFileBytes >> 20, MaxCheckoutMiB: appsource.DefaultMaxCheckoutBytes >> 20,
			TeamCacheMiB: appsource.DefaultTeamCacheBytes >> 20,
		},
	}
}

// Run starts the controller-manager and blocks until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	if err := o.Probe.Validate(); err != nil {
		return err
	}
	if err := validateMemoryLimit(o.MemoryLimitMiB); err != nil {
		return err
	}
	setMemoryLimit(o.MemoryLimitMiB, ctrl.Log.WithName("setup"))
	if o.FailoverGracePeriod <= 0 {
		return fmt.Errorf("--failover-grace-period %s: give a positive duration, for example 1m (how long a cluster may stay not Ready before its replicas move)", o.FailoverGracePeriod)
	}
	if o.DriftCheckInterval < 0 || (o.DriftCheckInterval > 0 && o.DriftCheckInterval < 10*time.Second) {
		return fmt.Errorf("--drift-check-interval %s: give 0 (off) or at least 10s, for example 5m (how often every Work is compared with its member objects besides the member events)", o.DriftCheckInterval)
	}
	if _, err := render.ParsePodSecurityLevel(o.PodSecurityLevel); err != nil {
		return fmt.Errorf("--pod-security-level: %w", err)
	}
	for _, ns := range o.PodSecurityExemptNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("--pod-security-exempt-namespaces: %q is not a namespace name (%s)", ns, strings.Join(errs, "; "))
		}
	}
	for _, p := range o.AllowExecPlugins {
		if p == "" || strings.ContainsAny(p, "/ ") {
			return fmt.Errorf("--allow-exec-plugin: %q: give the plugin's command name without a path, e.g. aws-iam-authenticator", p)
		}
	}
	metricsOptions, err := o.metricsServerOptions()
	if err != nil {
		return err
	}
	gitCache := o.GitCacheDir
	if gitCache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		gitCache = filepath.Join(base, "flotilla", "git")
	}
	gitBounds, err := o.Git.bounds()
	if err != nil {
		return err
	}
	apps := &application.Controller{Config: cfg, Fetcher: &appsource.Fetcher{CacheDir: gitCache, RefsTTL: 2 * time.Second, Bounds: gitBounds}, Hooks: kube.NewQueueSource[reconcile.Request]()}
	// Push webhooks are served beside /metrics, behind the same authentication when secure.
	metricsOptions.ExtraHandlers = map[string]http.Handler{application.WebhookPath: apps.Webhook(application.RequireSignature(o.GitWebhookRequireSignature))}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	leaseDuration, renewDeadline, retryPeriod := 15*time.Second, 10*time.Second, 2*time.Second
	sharded := o.Shard.Identity != ""
	var leaderLock resourcelock.Interface
	if sharded {
		if err := o.checkShard(); err != nil {
			return err
		}
		if o.selfIssuedShardCertificates() {
			c, err := client.New(cfg, client.Options{Scheme: kube.Scheme})
			if err != nil {
				return err
			}
			cleanup, err := o.issueShardCertificate(ctx, secrets{c})
			if err != nil {
				return err
			}
			defer cleanup()
		}
		// The leader Lease names the replica itself, so the others find where it serves its Works.
		if leaderLock, err = shardLeaderLock(cfg, o.LeaderElectionID, o.Shard.Identity); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElectionResourceLockInterface: leaderLock,
		Scheme:                              kube.Scheme,
		Metrics:                             metricsOptions,
		HealthProbeBindAddress:              o.HealthProbeAddress,
		PprofBindAddress:                    o.PprofAddress,
		LeaderElection:                      o.LeaderElection,
		LeaderElectionID:                    o.LeaderElectionID,
		LeaderElectionNamespace:             kube.SystemNamespace,
		LeaderElectionReleaseOnCancel:       true,
		LeaseDuration:                       &leaseDuration,
		RenewDeadline:                       &renewDeadline,
		RetryPeriod:                         &retryPeriod,
		// Templates of any kind are read as unstructured objects; cache them like typed ones.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Cache: cache.Options{
			// What no controller reads never enters the cache (managedFields, last-applied).
			DefaultTransform: kube.TrimControlPlaneObject,
			ByObject: map[client.Object]cache.ByObject{
				// Secrets are templates too; service-account tokens never are, so they stay out of memory.
				&corev1.Secret{}: {Field: fields.OneTermNotEqualSelector("type", string(corev1.SecretTypeServiceAccountToken))},
			}},
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	recorders := map[string]*kube.DistinctRecorder{}
	recorder := func(name string) events.EventRecorder {
		if r, ok := recorders[name]; ok {
			return r
		}
		r := kube.NewDistinctRecorder(mgr.GetClient(), mgr.GetScheme(), name)
		recorders[name] = r
		if err := mgr.Add(r); err != nil { // fails only once the manager runs, not here
			ctrl.Log.Error(err, "Adding the event recorder", "controller", name)
		}
		return r
	}
	members := clustercache.New(o.Probe)
	// Works live in this process's memory (see package workstore); the controllers that
	// render, apply and read them reach them through this client.
	works := workstore.New()
	withWorks := works.Client(mgr.GetClient())
	// Sharded, the leader keeps the Works and each replica applies those of its clusters from
	// a mirror (package worksync); unsharded, the executor reads the store itself.
	executed, withExecuted := works, withWorks
	var ring *shard.Ring
	var worksServer *worksync.Server
	var analysisMembers analysis.Members = analysis.CacheMembers{Cache: members}
	if sharded {
		if ring, worksServer, executed, err = o.startShard(mgr, cfg, works); err != nil {
			return err
		}
		withExecuted = executed.Client(mgr.GetClient())
		analysisMembers = &memberClients{cache: members, reader: mgr.GetClient(), allowExecPlugins: o.AllowExecPlugins}
	}
	luavm.SetProcessLimits(o.Lua)
	interpreters := interpret.NewRegistry(luavm.Limits{MaxMemory: o.LuaCallMemory})
	if err := customization.Load(ctx, mgr.GetAPIReader(), interpreters); err != nil {
		return err
	}
	if err := (&customization.Controller{Client: mgr.GetClient(), Registry: interpreters,
		Recorder: recorder("flotilla-customization")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the customization controller: %w", err)
	}
	clusters := &cluster.Reconciler{
		Client:           withWorks,
		Cache:            members,
		Recorder:         recorder("flotilla-cluster-controller"),
		AllowExecPlugins: o.AllowExecPlugins,
	}
	if ring != nil {
		clusters.Shard, clusters.Leading = ring, leading(mgr)
	}
	clusters.AgentSilence = o.Agents.Silence
	if err := clusters.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the cluster controller: %w", err)
	}
	if err := (&detector.Detector{Client: mgr.GetClient(), Interpreters: interpreters, Recorder: recorder("flotilla-detector")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the detector: %w", err)
	}
	if err := (&team.Controller{Client: mgr.GetClient(), Recorder: recorder("flotilla-team")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the team controller: %w", err)
	}
	if err := detector.SetupUnplaced(mgr); err != nil {
		return err
	}
	if err := kube.IndexBindingsByPolicy(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexing bindings by policy: %w", err)
	}
	sched := &scheduler.Controller{Client: mgr.GetClient(), Recorder: recorder("flotilla-scheduler"), Interpreters: interpreters}
	if err := sched.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the scheduler: %w", err)
	}
	board := &statusboard.Board{} // the bindings' newest status, for history and releases before it is written
	if err := (&binding.Controller{Client: withWorks, Works: works, Board: board, Reader: mgr.GetAPIReader(), Interpreters: interpreters, Recorder: recorder("flotilla-binding"),
		PodSecurityLevel: o.PodSecurityLevel, PodSecurityExemptNamespaces: o.PodSecurityExemptNamespaces}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the binding controller: %w", err)
	}
	if err := (&binding.Failover{Client: withWorks, Works: works, Recorder: recorder("flotilla-failover")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the failover of bindings: %w", err)
	}
	if err := (&execute.Executor{Client: withExecuted, Works: executed, Members: members, Interpreters: interpreters,
		Recorder: recorder("flotilla-executor"), DriftCheckInterval: o.DriftCheckInterval, EveryReplica: sharded}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the executor: %w", err)
	}
	if err := (&release.Recorder{Client: mgr.GetClient(), Recorder: recorder("flotilla-release"), Interpreters: interpreters}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the release recorder: %w", err)
	}
	if err := (&release.Controller{Client: withWorks, Reader: mgr.GetAPIReader(), Recorder: recorder("flotilla-release"), Board: board}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the release controller: %w", err)
	}
	if err := (&analysisrun.Controller{Client: mgr.GetClient(), Members: pullAwareMembers{Members: analysisMembers, reader: mgr.GetClient()},
		PullJobs: workJobs{works: withWorks}, Recorder: recorder("flotilla-analysis"),
		Egress: analysis.NewEgress(o.Analysis.AllowCIDRs), PodSecurity: o.Analysis.PodSecurity}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the analysis controller: %w", err)
	}
	if err := (&failover.TaintController{Client: mgr.GetClient(), Recorder: recorder("flotilla-failover"),
		GracePeriod: o.FailoverGracePeriod}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the failover controller: %w", err)
	}
	historyDSN := o.HistoryDSN
	if historyDSN == "" {
		// The default lives beside the git cache; on a first start (a new pod's empty home)
		// its directory is made, as the git cache's is.
		dir := filepath.Dir(gitCache)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("the history store's directory %s: %w (give --history-dsn, or a writable home)", dir, err)
		}
		historyDSN = "sqlite://" + filepath.Join(dir, "history.db")
	}
	if o.HistoryRetention < 0 || o.HistoryMaxRecords < 0 {
		return fmt.Errorf("--history-retention %s, --history-max-records-per-team %d: give 0 (no bound) or a positive value, for example 720h and 1000000", o.HistoryRetention, o.HistoryMaxRecords)
	}
	store, err := historian.OpenLazy(ctx, historyDSN, ctrl.Log.WithName("history"))
	if err != nil {
		return err
	}
	defer store.Close()
	go historian.Retain(ctx, store, o.HistoryRetention, o.HistoryMaxRecords, 10*time.Minute, ctrl.Log.WithName("history"))
	var writers *audit.Log
	hist := &historian.Historian{Client: withWorks, Works: works, Board: board, Reader: mgr.GetAPIReader(), Store: store}
	if o.Inventory.Address != "" && len(o.Inventory.AuditClientNames) > 0 {
		writers = audit.NewLog(100_000)
		hist.Writers = writers
	}
	if err := hist.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the historian: %w", err)
	}
	if o.Agents.Address != "" {
		srv, err := o.agentServer(mgr, works, members, store, recorder("flotilla-pull"))
		if err != nil {
			return err
		}
		if err := mgr.Add(srv); err != nil {
			return err
		}
	}
	if o.Inventory.Address != "" {
		srv, err := o.Inventory.server(cfg, withWorks, mgr.GetCache(), store, sched, writers, worksServer)
		if err != nil {
			return err
		}
		if err := mgr.Add(srv); err != nil {
			return err
		}
	}
	apps.Client, apps.Mapper, apps.Recorder = mgr.GetClient(), mgr.GetRESTMapper(), recorder("flotilla-application")
	if err := apps.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the application controller: %w", err)
	}
	if err := (&targeting.Controller{Client: mgr.GetClient(), Recorder: recorder("flotilla-targeting")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the targeting controller: %w", err)
	}
	if err := (&appdeps.Controller{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the application dependencies controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
