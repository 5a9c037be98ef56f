package manager

import (
	"flag"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flotilla-dev/flotilla/internal/analysis"
	"github.com/flotilla-dev/flotilla/internal/cluster"
	"github.com/flotilla-dev/flotilla/internal/clustercache"
	"github.com/flotilla-dev/flotilla/internal/luavm"
	"github.com/flotilla-dev/flotilla/internal/pull"
)

// Flags are the controller-manager's settings as command-line flags, the same for `flotilla
// controller-manager` and the flotilla-controller-manager binary: Bind them to a flag set,
// parse, then Options checks them and gives the Options to Run.
type Flags struct {
	o                   Options
	metricsSecure       bool
	zap                 zap.Options
	analysisAllowCIDRs  []string
	analysisPodSecurity string
	luaConcurrent       int
	luaMemory           int64
	luaCallMemory       int64
}

// NewFlags holds the defaults.
func NewFlags() *Flags {
	o := DefaultOptions()
	o.Probe.MemberQPS, o.Probe.MemberBurst = 500, 1000
	return &Flags{o: o, analysisPodSecurity: string(o.Analysis.PodSecurity),
		luaConcurrent: o.Lua.MaxConcurrentCalls, luaMemory: o.Lua.MaxMemory >> 20, luaCallMemory: o.LuaCallMemory >> 20}
}

// Bind adds every flag to fs, zap's logging flags (--zap-log-level, ...) included.
func (f *Flags) Bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.o.MetricsAddress, "metrics-bind-address", f.o.MetricsAddress, "address of the Prometheus /metrics endpoint (loopback unless told otherwise, e.g. :8080 for every interface); 0 disables it")
	fs.StringVar(&f.o.HealthProbeAddress, "health-probe-bind-address", f.o.HealthProbeAddress, "address of /healthz and /readyz (loopback unless told otherwise, e.g. :8081 for every interface)")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", false, "serve /metrics over HTTPS to clients whose bearer token the control plane authenticates and authorizes for GET /metrics (TokenReview, SubjectAccessReview); default: on unless --metrics-bind-address is a loopback address")
	fs.StringVar(&f.o.PodSecurityLevel, "pod-security-level", f.o.PodSecurityLevel, "Pod Security level (privileged, baseline or restricted) that workloads of namespaced templates must meet before they are written to a member (whichever policy places them), and that member namespaces Flotilla creates for them enforce")
	fs.StringSliceVar(&f.o.AllowExecPlugins, "allow-exec-plugin", nil, "exec credential plugin (command base name) member kubeconfigs may use; none by default, since it runs on this host with this process's rights")
	fs.StringSliceVar(&f.o.PodSecurityExemptNamespaces, "pod-security-exempt-namespaces", f.o.PodSecurityExemptNamespaces, "control-plane namespaces whose templates are the platform's and skip the Pod Security check (comma-separated; none by default)")
	fs.BoolVar(&f.o.LeaderElection, "leader-elect", f.o.LeaderElection, "elect a leader so only one replica acts")
	fs.DurationVar(&f.o.DriftCheckInterval, "drift-check-interval", f.o.DriftCheckInterval, "how often every Work is compared with its member objects besides the member events, as a safety net for drift (changes made by hand in a member); 0 turns it off, else at least 10s")
	fs.DurationVar(&f.o.FailoverGracePeriod, "failover-grace-period", f.o.FailoverGracePeriod, "how long a cluster may stay not Ready before it is tainted unreachable and its Divided replicas move to healthy clusters")
	fs.StringVar(&f.o.HistoryDSN, "history-dsn", "", "history store: sqlite:///PATH (default: history.db in the user cache directory's flotilla) or postgres://USER@HOST/DB (PostgreSQL, for several replicas)")
	fs.DurationVar(&f.o.HistoryRetention, "history-retention", f.o.HistoryRetention, "history records older than this are pruned; 0 keeps them")
	fs.IntVar(&f.o.HistoryMaxRecords, "history-max-records-per-team", f.o.HistoryMaxRecords, "the newest records kept of each team (control-plane namespace), so one team's volume never pushes out another's history; 0 keeps all")
	fs.IntVar(&f.o.HistoryMaxRecords, "history-max-records", f.o.HistoryMaxRecords, "the newest records kept")
	_ = fs.MarkDeprecated("history-max-records", "it bounds each team's records now: use --history-max-records-per-team")
	fs.StringVar(&f.o.Inventory.Address, "inventory-bind-address", "", "address of the inventory API (HTTPS), e.g. 127.0.0.1:8443; off when empty")
	fs.StringVar(&f.o.Inventory.CertFile, "inventory-tls-cert-file", "", "TLS certificate of the inventory API")
	fs.StringVar(&f.o.Inventory.KeyFile, "inventory-tls-key-file", "", "TLS key of the inventory API")
	fs.StringVar(&f.o.Inventory.ClientCAFile, "inventory-client-ca-file", "", "accept client certificates of this CA (the control plane's client CA); bearer tokens are checked with TokenReview")
	fs.StringSliceVar(&f.o.Inventory.AuditClientNames, "audit-webhook-client-names", nil, "take the control plane's audit events (its --audit-webhook-config-file pointing at https://INVENTORY/audit/v1/events, with internal/audit/policy.yaml as --audit-policy-file) from client certificates with these common names, so history names the user behind each change; off when empty")
	fs.BoolVar(&f.o.Inventory.Dashboard, "dashboard", false, "serve the web dashboard at https://INVENTORY/dashboard/ (needs --inventory-bind-address); users log in with bearer tokens and read and act with them")
	fs.BoolVar(&f.o.GitWebhookRequireSignature, "git-webhook-require-signature", false, "refuse unsigned git push webhooks (POST /hooks/git) for every Team; without it, pushes for the Applications of a Team that names no spec.webhook.secretRef need no signature")
	fs.StringVar(&f.o.GitCacheDir, "git-cache-dir", "", "directory for the git trees Applications render from (default: the user cache directory's flotilla/git)")
	fs.Int64Var(&f.o.Git.MaxFetchMiB, "git-max-fetch-mib", f.o.Git.MaxFetchMiB, "MiB one git listing or fetch of an Application may receive")
	fs.IntVar(&f.o.Git.MaxObjects, "git-max-objects", f.o.Git.MaxObjects, "objects one fetched pack (and files one checkout) may hold")
	fs.Int64Var(&f.o.Git.MaxFileMiB, "git-max-file-mib", f.o.Git.MaxFileMiB, "MiB one file of a fetched repository may have once inflated")
	fs.Int64Var(&f.o.Git.MaxCheckoutMiB, "git-max-checkout-mib", f.o.Git.MaxCheckoutMiB, "MiB of files one checked-out commit may hold")
	fs.Int64Var(&f.o.Git.TeamCacheMiB, "git-team-cache-mib", f.o.Git.TeamCacheMiB, "MiB of git trees one team keeps cached; its least recently used go first")
	fs.Int64Var(&f.o.MemoryLimitMiB, "memory-limit-mib", 0, "soft limit of the Go heap in MiB (the collector works harder near it; see runtime/debug.SetMemoryLimit); 0: 90% of the container's memory limit when there is one and GOMEMLIMIT is not set")
	fs.StringVar(&f.o.PprofAddress, "pprof-bind-address", "", "address of net/http/pprof for profiling; off when empty")
	fs.Float32Var(&f.o.KubeAPIQPS, "kube-api-qps", f.o.KubeAPIQPS, "queries per second to the control plane")
	fs.IntVar(&f.o.KubeAPIBurst, "kube-api-burst", f.o.KubeAPIBurst, "burst of queries to the control plane")
	fs.Float32Var(&f.o.Probe.MemberQPS, "member-api-qps", f.o.Probe.MemberQPS, "queries per second to each member")
	fs.IntVar(&f.o.Probe.MemberBurst, "member-api-burst", f.o.Probe.MemberBurst, "burst of queries to each member")
	fs.IntVar(&f.luaConcurrent, "lua-max-concurrent-calls", f.luaConcurrent, "interpreter customization script calls that run at once, others wait; the default is 2*GOMAXPROCS, at least 4")
	fs.Int64Var(&f.luaMemory, "lua-max-memory-mib", f.luaMemory, "estimated MiB all running script calls may allocate together; a call that would pass it fails")
	fs.Int64Var(&f.luaCallMemory, "lua-call-max-memory-mib", f.luaCallMemory, "estimated MiB one script call may allocate")
	fs.StringArrayVar(&f.analysisAllowCIDRs, "analysis-allow-cidr", nil, "a CIDR every analysis template may reach, repeatable (by default a namespace's templates reach public addresses only, ClusterAnalysisTemplates also private and loopback ones; link-local and metadata addresses only through this flag)")
	fs.StringVar(&f.analysisPodSecurity, "analysis-pod-security-level", f.analysisPodSecurity, "Pod Security level (privileged, baseline or restricted) the Job pods of a namespace's analysis templates must meet; member namespaces Flotilla creates for them are labelled to enforce it")
	fs.StringVar(&f.o.Agents.Address, "agent-bind-address", "", "address (host:port) where the agents of Pull members dial in, served over TLS with the inventory API's certificate; off when empty (Pull members cannot connect)")
	fs.DurationVar(&f.o.Agents.Silence, "agent-silence-limit", cluster.DefaultAgentSilence, "how long a Pull member's agent may stay silent before its Cluster is not Ready (agents report every 10s); failover's grace period counts from then")
	fs.DurationVar(&f.o.Agents.CertificateTTL, "agent-certificate-ttl", pull.DefaultCertificateTTL, "how long an agent's client certificate is valid; agents renew at two thirds of it")
	fs.StringVar(&f.o.Shard.Identity, "shard-identity", "", "split the member clusters between the controller-manager's replicas: this replica's name among them (unique, e.g. the pod name); off when empty (one replica works on every cluster). Needs --inventory-bind-address: the leader serves its Works to the others there")
	fs.StringVar(&f.o.Shard.Address, "shard-address", "", "host:port at which the other replicas reach this one's inventory address (default: --inventory-bind-address)")
	fs.StringVar(&f.o.Shard.PeerCAFile, "shard-peer-ca-file", "", "CA of the replicas' inventory serving certificates (default: --inventory-client-ca-file)")
	fs.StringVar(&f.o.Shard.PeerServerName, "shard-peer-server-name", "", "name the replicas' inventory serving certificates carry (default: the host of the leader's --shard-address)")
	BindProbeFlags(fs, &f.o.Probe)
	goflags := flag.NewFlagSet("zap", flag.ContinueOnError)
	f.zap.BindFlags(goflags)
	fs.AddGoFlagSet(goflags)
}

// BindProbeFlags adds the member health probe flags, which `flotilla up` also takes and hands
// to the controller-manager it starts.
func BindProbeFlags(fs *pflag.FlagSet, p *clustercache.Options) {
	fs.DurationVar(&p.ProbePeriod, "probe-period", 10*time.Second, "time between two health probes of a member")
	fs.DurationVar(&p.ProbeTimeout, "probe-timeout", 5*time.Second, "bound of one health probe")
	fs.IntVar(&p.FailureThreshold, "failure-threshold", 3, "consecutive failed probes that make a member NotReady")
	fs.DurationVar(&p.DiscoveryInterval, "discovery-interval", clustercache.DefaultOptions().DiscoveryInterval,
		"how often a member's served APIs are re-read even without a CRD or APIService change there (changes are read at once)")
}

// Logger is the logger the zap flags ask for.
func (f *Flags) Logger() logr.Logger { return zap.New(zap.UseFlagOptions(&f.zap)) }

// Options checks the parsed flags of fs and turns them into Options, naming a flag that is
// wrong and how to fix it.
func (f *Flags) Options(fs *pflag.FlagSet) (Options, error) {
	o := f.o
	if f.luaConcurrent < 1 || f.luaMemory < 1 || f.luaCallMemory < 1 || f.luaCallMemory > f.luaMemory {
		return o, fmt.Errorf("--lua-max-concurrent-calls, --lua-max-memory-mib and --lua-call-max-memory-mib must be positive, and a call's memory at most the process's")
	}
	o.Lua = luavm.ProcessLimits{MaxConcurrentCalls: f.luaConcurrent, MaxMemory: f.luaMemory << 20}
	o.LuaCallMemory = f.luaCallMemory << 20
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 || o.Probe.MemberQPS <= 0 || o.Probe.MemberBurst < 1 {
		return o, fmt.Errorf("--kube-api-qps, --kube-api-burst, --member-api-qps and --member-api-burst must be positive")
	}
	if fs.Changed("metrics-secure") {
		secure := f.metricsSecure
		o.MetricsSecure = &secure
	}
	if o.Agents.Silence < 2*time.Second {
		return o, fmt.Errorf("--agent-silence-limit %s: give at least 2s, and a few of the agents' --heartbeat-interval (default %s, agents report every 10s)", o.Agents.Silence, cluster.DefaultAgentSilence)
	}
	if o.Agents.CertificateTTL < 10*time.Minute || o.Agents.CertificateTTL > pull.MaxCertificateTTL {
		return o, fmt.Errorf("--agent-certificate-ttl %s: give between 10m and %s (default %s); agents renew at two thirds of it", o.Agents.CertificateTTL, pull.MaxCertificateTTL, pull.DefaultCertificateTTL)
	}
	var err error
	if o.Analysis, err = analysis.ParseSettings(f.analysisAllowCIDRs, f.analysisPodSecurity); err != nil {
		return o, err
	}
	return o, nil
}
