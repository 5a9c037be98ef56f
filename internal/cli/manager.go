package cli

import (
	"flag"
	"fmt"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flotilla-dev/flotilla/internal/analysis"
	"github.com/flotilla-dev/flotilla/internal/luavm"
	"github.com/flotilla-dev/flotilla/internal/manager"
)

func newControllerManagerCommand(g *globals) *cobra.Command {
	o := manager.DefaultOptions()
	var probe probeFlags
	var metricsSecure bool
	zapOpts := zap.Options{}
	var analysisAllowCIDRs []string
	analysisPodSecurity := string(o.Analysis.PodSecurity)
	luaConcurrent, luaMemory, luaCallMemory := o.Lua.MaxConcurrentCalls, o.Lua.MaxMemory>>20, o.LuaCallMemory>>20
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run Flotilla's controllers against the control plane (leader-elected)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			cfg, err := g.controlPlaneConfig()
			if err != nil {
				return err
			}
			qps, burst := o.Probe.MemberQPS, o.Probe.MemberBurst
			o.Probe = probe.options()
			o.Probe.MemberQPS, o.Probe.MemberBurst = qps, burst
			if luaConcurrent < 1 || luaMemory < 1 || luaCallMemory < 1 || luaCallMemory > luaMemory {
				return fmt.Errorf("--lua-max-concurrent-calls, --lua-max-memory-mib and --lua-call-max-memory-mib must be positive, and a call's memory at most the process's")
			}
			o.Lua = luavm.ProcessLimits{MaxConcurrentCalls: luaConcurrent, MaxMemory: luaMemory << 20}
			o.LuaCallMemory = luaCallMemory << 20
			if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 || o.Probe.MemberQPS <= 0 || o.Probe.MemberBurst < 1 {
				return fmt.Errorf("--kube-api-qps, --kube-api-burst, --member-api-qps and --member-api-burst must be positive")
			}
			if cmd.Flags().Changed("metrics-secure") {
				o.MetricsSecure = &metricsSecure
			}
			if o.Analysis, err = analysis.ParseSettings(analysisAllowCIDRs, analysisPodSecurity); err != nil {
				return err
			}
			return manager.Run(ctrl.SetupSignalHandler(), cfg, o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.MetricsAddress, "metrics-bind-address", o.MetricsAddress, "address of the Prometheus /metrics endpoint (loopback unless told otherwise, e.g. :8080 for every interface); 0 disables it")
	fs.StringVar(&o.HealthProbeAddress, "health-probe-bind-address", o.HealthProbeAddress, "address of /healthz and /readyz (loopback unless told otherwise, e.g. :8081 for every interface)")
	fs.BoolVar(&metricsSecure, "metrics-secure", false, "serve /metrics over HTTPS to clients whose bearer token the control plane authenticates and authorizes for GET /metrics (TokenReview, SubjectAccessReview); default: on unless --metrics-bind-address is a loopback address")
	fs.StringVar(&o.PodSecurityLevel, "pod-security-level", o.PodSecurityLevel, "Pod Security level (privileged, baseline or restricted) that workloads of namespaced templates must meet before they are written to a member (whichever policy places them), and that member namespaces Flotilla creates for them enforce")
	fs.StringSliceVar(&o.AllowExecPlugins, "allow-exec-plugin", nil, "exec credential plugin (command base name) member kubeconfigs may use; none by default, since it runs on this host with this process's rights")
	fs.StringSliceVar(&o.PodSecurityExemptNamespaces, "pod-security-exempt-namespaces", o.PodSecurityExemptNamespaces, "control-plane namespaces whose templates are the platform's and skip the Pod Security check (comma-separated; none by default)")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "elect a leader so only one replica acts")
	fs.DurationVar(&o.DriftCheckInterval, "drift-check-interval", o.DriftCheckInterval, "how often every Work is compared with its member objects besides the member events, as a safety net for drift (changes made by hand in a member); 0 turns it off, else at least 10s")
	fs.DurationVar(&o.FailoverGracePeriod, "failover-grace-period", o.FailoverGracePeriod, "how long a cluster may stay not Ready before it is tainted unreachable and its Divided replicas move to healthy clusters")
	fs.StringVar(&o.HistoryDSN, "history-dsn", "", "history store: sqlite:///PATH (default: history.db in the user cache directory's flotilla) or postgres://USER@HOST/DB (PostgreSQL, for several replicas)")
	fs.DurationVar(&o.HistoryRetention, "history-retention", o.HistoryRetention, "history records older than this are pruned; 0 keeps them")
	fs.IntVar(&o.HistoryMaxRecords, "history-max-records-per-team", o.HistoryMaxRecords, "the newest records kept of each team (control-plane namespace), so one team's volume never pushes out another's history; 0 keeps all")
	fs.IntVar(&o.HistoryMaxRecords, "history-max-records", o.HistoryMaxRecords, "the newest records kept")
	_ = fs.MarkDeprecated("history-max-records", "it bounds each team's records now: use --history-max-records-per-team")
	fs.StringVar(&o.Inventory.Address, "inventory-bind-address", "", "address of the inventory API (HTTPS), e.g. 127.0.0.1:8443; off when empty")
	fs.StringVar(&o.Inventory.CertFile, "inventory-tls-cert-file", "", "TLS certificate of the inventory API")
	fs.StringVar(&o.Inventory.KeyFile, "inventory-tls-key-file", "", "TLS key of the inventory API")
	fs.StringVar(&o.Inventory.ClientCAFile, "inventory-client-ca-file", "", "accept client certificates of this CA (the control plane's client CA); bearer tokens are checked with TokenReview")
	fs.StringSliceVar(&o.Inventory.AuditClientNames, "audit-webhook-client-names", nil, "take the control plane's audit events (its --audit-webhook-config-file pointing at https://INVENTORY/audit/v1/events, with internal/audit/policy.yaml as --audit-policy-file) from client certificates with these common names, so history names the user behind each change; off when empty")
	fs.BoolVar(&o.Inventory.Dashboard, "dashboard", false, "serve the web dashboard at https://INVENTORY/dashboard/ (needs --inventory-bind-address); users log in with bearer tokens and read and act with them")
	fs.BoolVar(&o.GitWebhookRequireSignature, "git-webhook-require-signature", false, "refuse unsigned git push webhooks (POST /hooks/git) for every Team; without it, pushes for the Applications of a Team that names no spec.webhook.secretRef need no signature")
	fs.StringVar(&o.GitCacheDir, "git-cache-dir", "", "directory for the git trees Applications render from (default: the user cache directory's flotilla/git)")
	fs.Int64Var(&o.Git.MaxFetchMiB, "git-max-fetch-mib", o.Git.MaxFetchMiB, "MiB one git listing or fetch of an Application may receive")
	fs.IntVar(&o.Git.MaxObjects, "git-max-objects", o.Git.MaxObjects, "objects one fetched pack (and files one checkout) may hold")
	fs.Int64Var(&o.Git.MaxFileMiB, "git-max-file-mib", o.Git.MaxFileMiB, "MiB one file of a fetched repository may have once inflated")
	fs.Int64Var(&o.Git.MaxCheckoutMiB, "git-max-checkout-mib", o.Git.MaxCheckoutMiB, "MiB of files one checked-out commit may hold")
	fs.Int64Var(&o.Git.TeamCacheMiB, "git-team-cache-mib", o.Git.TeamCacheMiB, "MiB of git trees one team keeps cached; its least recently used go first")
	fs.StringVar(&o.PprofAddress, "pprof-bind-address", "", "address of net/http/pprof for profiling; off when empty")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "queries per second to the control plane")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "burst of queries to the control plane")
	o.Probe.MemberQPS, o.Probe.MemberBurst = 500, 1000
	fs.Float32Var(&o.Probe.MemberQPS, "member-api-qps", o.Probe.MemberQPS, "queries per second to each member")
	fs.IntVar(&o.Probe.MemberBurst, "member-api-burst", o.Probe.MemberBurst, "burst of queries to each member")
	fs.IntVar(&luaConcurrent, "lua-max-concurrent-calls", luaConcurrent, "interpreter customization script calls that run at once, others wait; the default is 2*GOMAXPROCS, at least 4")
	fs.Int64Var(&luaMemory, "lua-max-memory-mib", luaMemory, "estimated MiB all running script calls may allocate together; a call that would pass it fails")
	fs.Int64Var(&luaCallMemory, "lua-call-max-memory-mib", luaCallMemory, "estimated MiB one script call may allocate")
	fs.StringArrayVar(&analysisAllowCIDRs, "analysis-allow-cidr", nil, "a CIDR every analysis template may reach, repeatable (by default a namespace's templates reach public addresses only, ClusterAnalysisTemplates also private and loopback ones; link-local and metadata addresses only through this flag)")
	fs.StringVar(&analysisPodSecurity, "analysis-pod-security-level", analysisPodSecurity, "Pod Security level (privileged, baseline or restricted) the Job pods of a namespace's analysis templates must meet; member namespaces Flotilla creates for them are labelled to enforce it")
	probe.add(cmd)
	goflags := flag.NewFlagSet("zap", flag.ContinueOnError)
	zapOpts.BindFlags(goflags)
	fs.AddGoFlagSet(goflags)
	return cmd
}
