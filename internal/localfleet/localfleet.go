package localfleet

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/flotilla-dev/flotilla/internal/audit"
	"github.com/flotilla-dev/flotilla/internal/supervisor"
)

// ControlPlaneName is the name of the control plane's kubeconfig and components.
const ControlPlaneName = "flotilla"

// Tools the fleet runs, expected in Options.BinDir.
var requiredTools = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// kwok stage files copied next to the tools by `make tools`: the node stages every member's
// kwok plays, then the pod stages only full members need (slim ones have no pods).
var (
	kwokNodeStages = []string{"node-initialize.yaml", "node-heartbeat-with-lease.yaml"}
	kwokStages     = append(slices.Clip(kwokNodeStages), "pod-ready.yaml", "pod-complete.yaml", "pod-delete.yaml")
)

// controlPlaneControllers are the only controllers of the control plane's
// kube-controller-manager: no workload controller may act on templates there.
const controlPlaneControllers = "namespace,garbagecollector,serviceaccount,serviceaccount-token,clusterrole-aggregation"

// ErrToolsMissing says the local fleet's binaries have not been built.
var ErrToolsMissing = errors.New("local fleet tools are missing: run `make tools` to build them into bin/")

// Options configure a local fleet.
type Options struct {
	// StateDir holds the fleet's data, kubeconfigs, pid files and logs.
	StateDir string
	// BinDir holds the tools built by `make tools`.
	BinDir string
	// Fleet is the fleet to start the first time; nil means the fleet saved in StateDir, or
	// DefaultFleet when there is none.
	Fleet *Fleet
	// CRDs is a multi-document YAML of CustomResourceDefinitions installed in the control plane.
	CRDs []byte
	// Manager, when set, is started as the fleet's controller-manager.
	Manager *ManagerCommand
	// Out receives one progress line per component; nil discards them.
	Out io.Writer
}

// ManagerCommand is how to run Flotilla's controller-manager.
type ManagerCommand struct {
	// Binary is the absolute path of the flotilla binary.
	Binary string
	// Args are appended after `controller-manager --kubeconfig ... --*-bind-address ...
	// --analysis-allow-cidr=127.0.0.1/32` (analysis may reach the fleet's loopback servers).
	Args []string
	// Replicas, when positive, is how many replicas run, sharing the member clusters; else the
	// fleet file's manager.replicas, else as many as last started, else one.
	Replicas int
}

// LocalFleet is a handle on the fleet in one state directory.
type LocalFleet struct {
	opts  Options
	state state
	out   *progress
}

type state struct {
	Fleet *Fleet `json:"fleet"`
	Ports ports  `json:"ports"`
	// ManagerBinary is the controller-manager binary last started, so `down` can recognise
	// the process without being told.
	ManagerBinary string `json:"managerBinary,omitempty"`
	// ManagerArgs are the settings the controller-manager was last started with (probe,
	// failover, log level), for `flotilla status`.
	ManagerArgs []string `json:"managerArgs,omitempty"`
	// ManagerReplicas is how many controller-manager replicas run (0: one).
	ManagerReplicas int `json:"managerReplicas,omitempty"`
}

// ManagerSettings are the settings the controller-manager was last started with.
func (f *LocalFleet) ManagerSettings() []string { return f.state.ManagerArgs }

type ports struct {
	EtcdClient     int `json:"etcdClient"`
	EtcdPeer       int `json:"etcdPeer"`
	ControlPlane   int `json:"controlPlane"`
	ManagerMetrics int `json:"managerMetrics"`
	ManagerHealth  int `json:"managerHealth"`
	Inventory      int `json:"inventory,omitempty"`
	// Agent is the manager's agent endpoint, where Pull members' agents dial in.
	Agent   int            `json:"agent,omitempty"`
	Members map[string]int `json:"members"`
	// Replicas are the addresses of controller-manager replicas 2, 3, ...
	Replicas []replicaPorts `json:"replicas,omitempty"`
}

type replicaPorts struct {
	Metrics   int `json:"metrics"`
	Health    int `json:"health"`
	Inventory int `json:"inventory"`
}

// Open reads the fleet saved in opts.StateDir, or prepares a new one. It starts nothing.
func Open(opts Options) (*LocalFleet, error) {
	if opts.StateDir == "" {
		return nil, errors.New("state directory is empty: pass --state-dir or set XDG_STATE_HOME")
	}
	abs, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	opts.StateDir = abs
	if opts.BinDir != "" {
		if opts.BinDir, err = filepath.Abs(opts.BinDir); err != nil {
			return nil, err
		}
	}
	f := &LocalFleet{opts: opts, out: &progress{w: opts.Out}}
	data, err := os.ReadFile(f.statePath())
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &f.state); err != nil {
			return nil, fmt.Errorf("state file %s is damaged (%v): remove the state directory or run `flotilla down --purge`", f.statePath(), err)
		}
		if opts.Fleet != nil && !sameFleet(opts.Fleet, f.state.Fleet) {
			return nil, fmt.Errorf("state directory %s already holds a fleet with members %v: run `flotilla down --purge` first or pass another --state-dir", abs, f.state.Fleet.Names())
		}
	case errors.Is(err, os.ErrNotExist):
		f.state.Fleet = opts.Fleet
		if f.state.Fleet == nil {
			f.state.Fleet = DefaultFleet()
		}
	default:
		return nil, err
	}
	return f, nil
}

func sameFleet(a, b *Fleet) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// Fleet is the fleet definition in use.
func (f *LocalFleet) Fleet() *Fleet { return f.state.Fleet }

// StateDir is the absolute state directory.
func (f *LocalFleet) StateDir() string { return f.opts.StateDir }

// Kubeconfig is the path of the admin kubeconfig of a member, or of the control plane when
// name is "" or ControlPlaneName.
func (f *LocalFleet) Kubeconfig(name string) string {
	if name == "" {
		name = ControlPlaneName
	}
	return filepath.Join(f.opts.StateDir, "kubeconfigs", name+".kubeconfig")
}

// RESTConfig loads the admin REST config of a member or of the control plane.
func (f *LocalFleet) RESTConfig(name string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", f.Kubeconfig(name))
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

// ManagerHealthAddress is the controller-manager's health probe address.
func (f *LocalFleet) ManagerHealthAddress() string {
	return fmt.Sprintf("127.0.0.1:%d", f.state.Ports.ManagerHealth)
}

// ManagerMetricsAddress is the controller-manager's metrics address.
func (f *LocalFleet) ManagerMetricsAddress() string {
	return fmt.Sprintf("127.0.0.1:%d", f.state.Ports.ManagerMetrics)
}

// InventoryURL is the inventory API the controller-manager serves.
func (f *LocalFleet) InventoryURL() string {
	return fmt.Sprintf("https://127.0.0.1:%d", f.state.Ports.Inventory)
}

// DashboardURL is the web dashboard the controller-manager serves (log in with a token).
func (f *LocalFleet) DashboardURL() string { return f.InventoryURL() + "/dashboard/" }

// CAFile is the fleet's CA: it signs the apiservers' and the inventory API's serving
// certificates and users' client certificates.
func (f *LocalFleet) CAFile() string { return f.pki().path(caCert) }

func (f *LocalFleet) statePath() string { return filepath.Join(f.opts.StateDir, "state.json") }
func (f *LocalFleet) pki() pki          { return pki{dir: filepath.Join(f.opts.StateDir, "pki")} }

func (f *LocalFleet) proc(name, tool string) process {
	bin := filepath.Join(f.opts.BinDir, tool)
	if tool == managerComponent {
		bin = f.state.ManagerBinary
		if f.opts.Manager != nil {
			bin = f.opts.Manager.Binary
		}
	}
	return process{
		name:       name,
		binary:     bin,
		pidFile:    supervisor.PIDPath(f.opts.StateDir, name),
		logFile:    filepath.Join(f.opts.StateDir, "logs", name+".log"),
		stateDir:   f.opts.StateDir,
		supervisor: f.supervisorBinary(),
		grace:      stopGrace(tool),
	}
}

const managerComponent = "flotilla-controller-manager"

// stopGrace is how long a component may take to exit after SIGTERM before it is killed.
// kube-apiserver keeps no local state and, measured here, takes a full minute to drain after
// SIGTERM, so it gets a short grace; etcd gets a long one to close its database cleanly.
func stopGrace(tool string) time.Duration {
	switch tool {
	case "kube-apiserver":
		return 3 * time.Second
	case "etcd":
		return 30 * time.Second
	default:
		return 10 * time.Second
	}
}

// Component is one process of the fleet.
type Component struct {
	Name    string // e.g. east-apiserver
	Cluster string // member name, or ControlPlaneName
	Tool    string // binary name
}

// Components lists every process of the fleet in start order.
func (f *LocalFleet) Components() []Component {
	cs := []Component{
		{Name: "etcd", Cluster: ControlPlaneName, Tool: "etcd"},
		{Name: ControlPlaneName + "-apiserver", Cluster: ControlPlaneName, Tool: "kube-apiserver"},
		{Name: ControlPlaneName + "-kube-controller-manager", Cluster: ControlPlaneName, Tool: "kube-controller-manager"},
	}
	for _, m := range f.state.Fleet.Members {
		cs = append(cs, memberComponents(m)...)
	}
	if f.opts.Manager != nil || f.state.ManagerBinary != "" {
		cs = append(cs, Component{Name: managerComponent, Cluster: ControlPlaneName, Tool: managerComponent})
		for i := 2; i <= f.managerReplicas(); i++ {
			cs = append(cs, Component{Name: replicaComponent(i), Cluster: ControlPlaneName, Tool: managerComponent})
		}
		for _, m := range f.state.Fleet.Members {
			if m.Pull() {
				cs = append(cs, Component{Name: pullAgentComponent(m.Name), Cluster: m.Name, Tool: managerComponent})
			}
		}
	}
	return cs
}

// replicaComponent names controller-manager replica i (from 2; the first is managerComponent).
func replicaComponent(i int) string { return fmt.Sprintf("%s-%d", managerComponent, i) }

// managerReplicas is how many controller-manager replicas the fleet runs: as asked, else the
// fleet file's number, else as many as last started, else one.
func (f *LocalFleet) managerReplicas() int {
	if f.opts.Manager != nil && f.opts.Manager.Replicas > 0 {
		return f.opts.Manager.Replicas
	}
	if m := f.state.Fleet.Manager; m != nil && m.Replicas > 0 {
		return m.Replicas
	}
	return max(f.state.ManagerReplicas, 1)
}

func memberComponents(m Member) []Component {
	name := m.Name
	if m.Slim() {
		return []Component{
			{Name: name + "-apiserver", Cluster: name, Tool: "kube-apiserver"},
			{Name: name + "-kwok", Cluster: name, Tool: "kwok"},
		}
	}
	return []Component{
		{Name: name + "-apiserver", Cluster: name, Tool: "kube-apiserver"},
		{Name: name + "-kube-controller-manager", Cluster: name, Tool: "kube-controller-manager"},
		{Name: name + "-kube-scheduler", Cluster: name, Tool: "kube-scheduler"},
		{Name: name + "-kwok", Cluster: name, Tool: "kwok"},
	}
}

// ComponentStatus is what `flotilla status` shows of a component.
type ComponentStatus struct {
	Component
	PID      int
	Running  bool
	RSSBytes int64
	Supervision
}

// Status reports each component's pid, liveness, resident memory and supervision.
func (f *LocalFleet) Status() []ComponentStatus {
	var out []ComponentStatus
	for _, c := range f.Components() {
		p := f.proc(c.Name, c.Tool)
		pid, ok := p.pid()
		st := ComponentStatus{Component: c, PID: pid, Running: ok, Supervision: p.supervision()}
		if ok {
			st.RSSBytes = processRSS(pid)
		}
		out = append(out, st)
	}
	return out
}

// Running reports whether every component of the fleet runs under its supervisor.
func (f *LocalFleet) Running() bool {
	for _, s := range f.Status() {
		if !s.Running || !s.Supervised {
			return false
		}
	}
	return true
}

// Initialized reports whether the state directory holds a fleet that was started before.
func (f *LocalFleet) Initialized() bool {
	_, err := os.Stat(f.statePath())
	return err == nil
}

func (f *LocalFleet) checkTools() error {
	var missing []string
	for _, t := range requiredTools {
		if _, err := os.Stat(filepath.Join(f.opts.BinDir, t)); err != nil {
			missing = append(missing, t)
		}
	}
	for _, s := range kwokStages {
		if _, err := os.Stat(filepath.Join(f.opts.BinDir, "kwok-stages", s)); err != nil {
			missing = append(missing, "kwok-stages/"+s)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w (missing in %s: %v)", ErrToolsMissing, f.opts.BinDir, missing)
	}
	return nil
}

// UpResult says what Up did.
type UpResult struct {
	AlreadyUp bool
	Duration  time.Duration
}

// Up starts every component that is not running, waits until each answers, creates the
// members' simulated nodes and installs the CRDs. When everything already runs it changes
// nothing and says so.
func (f *LocalFleet) Up(ctx context.Context) (UpResult, error) {
	start := time.Now()
	if f.Initialized() && f.Running() {
		f.out.linef("fleet in %s is already up (%d members): nothing to do", f.opts.StateDir, len(f.state.Fleet.Members))
		return UpResult{AlreadyUp: true}, nil
	}
	if err := f.checkTools(); err != nil {
		return UpResult{}, err
	}
	if err := f.prepare(); err != nil {
		return UpResult{}, err
	}
	if err := f.startEtcd(ctx); err != nil {
		return UpResult{}, err
	}
	clusters := append([]string{ControlPlaneName}, f.state.Fleet.Names()...)
	if err := f.startAPIServers(ctx, clusters); err != nil {
		return UpResult{}, err
	}
	if err := f.startCluster(ctx, ControlPlaneName); err != nil {
		return UpResult{}, err
	}
	done := f.out.step("flotilla-apis")
	err := f.installControlPlaneAPIs(ctx)
	done(err)
	if err != nil {
		return UpResult{}, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(f.state.Fleet.Members))
	slots := make(chan struct{}, memberStartsAtOnce)
	for i, m := range f.state.Fleet.Members {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			errs[i] = f.startCluster(ctx, m.Name)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return UpResult{}, err
	}
	if err := f.startManager(ctx); err != nil {
		return UpResult{}, err
	}
	d := time.Since(start)
	f.out.linef("fleet up in %.1fs: control plane and %d members; state in %s", d.Seconds(), len(f.state.Fleet.Members), f.opts.StateDir)
	return UpResult{Duration: d}, nil
}

// prepare assigns ports (keeping the saved ones while free), writes the PKI, kubeconfigs,
// kwok stages and the state file.
func (f *LocalFleet) prepare() error {
	// The state holds admin kubeconfigs, keys, the history and git caches: its owner's only.
	if err := os.MkdirAll(f.opts.StateDir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(f.opts.StateDir, 0o700); err != nil {
		return err
	}
	for _, d := range []string{"kubeconfigs", "logs", "pids", "etcd"} {
		if err := os.MkdirAll(filepath.Join(f.opts.StateDir, d), 0o700); err != nil {
			return err
		}
	}
	if err := f.pki().ensure(); err != nil {
		return fmt.Errorf("writing the fleet's certificates: %w", err)
	}
	p := &f.state.Ports
	taken := map[int]bool{}
	pick := func(saved *int, component string) error {
		running := f.componentRunning(component)
		if *saved != 0 && !taken[*saved] && (running || portFree(*saved)) {
			taken[*saved] = true
			return nil
		}
		port, err := freePort(taken)
		if err != nil {
			return err
		}
		*saved = port
		taken[port] = true
		return nil
	}
	if p.Members == nil {
		p.Members = map[string]int{}
	}
	steps := []struct {
		port      *int
		component string
	}{
		{&p.EtcdClient, "etcd"}, {&p.EtcdPeer, "etcd"},
		{&p.ControlPlane, ControlPlaneName + "-apiserver"},
		{&p.ManagerMetrics, managerComponent}, {&p.ManagerHealth, managerComponent}, {&p.Inventory, managerComponent}, {&p.Agent, managerComponent},
	}
	for _, s := range steps {
		if err := pick(s.port, s.component); err != nil {
			return err
		}
	}
	replicas := f.managerReplicas()
	if replicas > MaxManagerReplicas {
		return fmt.Errorf("manager.replicas %d: give 1 to %d", replicas, MaxManagerReplicas)
	}
	p.Replicas = p.Replicas[:min(len(p.Replicas), replicas-1)]
	for i := 2; i <= replicas; i++ {
		if len(p.Replicas) < i-1 {
			p.Replicas = append(p.Replicas, replicaPorts{})
		}
		r := &p.Replicas[i-2]
		for _, port := range []*int{&r.Metrics, &r.Health, &r.Inventory} {
			if err := pick(port, replicaComponent(i)); err != nil {
				return err
			}
		}
	}
	for _, m := range f.state.Fleet.Members {
		port := p.Members[m.Name]
		if err := pick(&port, m.Name+"-apiserver"); err != nil {
			return err
		}
		p.Members[m.Name] = port
	}
	if err := f.writeKubeconfig(ControlPlaneName, p.ControlPlane); err != nil {
		return err
	}
	if err := f.writeManagerKubeconfig(p.ControlPlane); err != nil {
		return err
	}
	if err := f.writeAuditConfig(p.Inventory); err != nil {
		return err
	}
	for _, m := range f.state.Fleet.Members {
		if err := f.writeKubeconfig(m.Name, p.Members[m.Name]); err != nil {
			return err
		}
	}
	if err := f.writeKwokStages(); err != nil {
		return err
	}
	if f.opts.Manager != nil {
		f.state.ManagerBinary = f.opts.Manager.Binary
	}
	return f.writeState()
}

func (f *LocalFleet) writeState() error {
	data, err := json.MarshalIndent(f.state, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(f.statePath(), data, 0o644)
}

func (f *LocalFleet) componentRunning(name string) bool {
	for _, c := range f.Components() {
		if c.Name == name {
			_, ok := f.proc(c.Name, c.Tool).pid()
			return ok
		}
	}
	return false
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func freePort(taken map[int]bool) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("finding a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !taken[port] {
			return port, nil
		}
	}
	return 0, errors.New("no free port on 127.0.0.1")
}

func (f *LocalFleet) writeKubeconfig(name string, port int) error {
	pk := f.pki()
	ca, err := os.ReadFile(pk.path(caCert))
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(pk.path(adminCert))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(pk.path(adminKey))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://127.0.0.1:%d", port), CertificateAuthorityData: ca}
	cfg.AuthInfos[name+"-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name + "-admin"}
	cfg.CurrentContext = name
	return clientcmd.WriteToFile(*cfg, f.Kubeconfig(name))
}

// managerKubeconfig is the controller-manager's own kubeconfig of the control plane: its
// certificate names it, so the admission policies can tell its writes from a user's.
func (f *LocalFleet) managerKubeconfig() string {
	return filepath.Join(f.opts.StateDir, "kubeconfigs", "flotilla-manager.kubeconfig")
}

func (f *LocalFleet) writeManagerKubeconfig(port int) error {
	pk := f.pki()
	ca, err := os.ReadFile(pk.path(caCert))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[ControlPlaneName] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://127.0.0.1:%d", port), CertificateAuthorityData: ca}
	cfg.AuthInfos["controller-manager"] = &clientcmdapi.AuthInfo{ClientCertificate: pk.path(managerCert), ClientKey: pk.path(managerKey)}
	cfg.Contexts[ControlPlaneName] = &clientcmdapi.Context{Cluster: ControlPlaneName, AuthInfo: "controller-manager"}
	cfg.CurrentContext = ControlPlaneName
	return clientcmd.WriteToFile(*cfg, f.managerKubeconfig())
}

func (f *LocalFleet) auditPolicyFile() string {
	return filepath.Join(f.opts.StateDir, "audit-policy.yaml")
}

func (f *LocalFleet) auditWebhookKubeconfig() string {
	return filepath.Join(f.opts.StateDir, "kubeconfigs", "audit-webhook.kubeconfig")
}

// writeAuditConfig points the control plane's audit webhook at the inventory API, so history
// can name the user behind each change.
func (f *LocalFleet) writeAuditConfig(inventoryPort int) error {
	if err := os.WriteFile(f.auditPolicyFile(), audit.Policy, 0o644); err != nil {
		return err
	}
	pk := f.pki()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["flotilla"] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://127.0.0.1:%d%s", inventoryPort, audit.Path), CertificateAuthority: pk.path(caCert)}
	cfg.AuthInfos["audit-webhook"] = &clientcmdapi.AuthInfo{ClientCertificate: pk.path(auditWebhookCert), ClientKey: pk.path(auditWebhookKey)}
	cfg.Contexts["audit"] = &clientcmdapi.Context{Cluster: "flotilla", AuthInfo: "audit-webhook"}
	cfg.CurrentContext = "audit"
	return clientcmd.WriteToFile(*cfg, f.auditWebhookKubeconfig())
}

func (f *LocalFleet) writeKwokStages() error {
	var buf bytes.Buffer
	for _, s := range kwokStages {
		data, err := os.ReadFile(filepath.Join(f.opts.BinDir, "kwok-stages", s))
		if err != nil {
			return err
		}
		buf.Write(data)
		buf.WriteString("\n---\n")
	}
	if err := os.WriteFile(filepath.Join(f.opts.StateDir, "kwok-stages.yaml"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	return f.writeSlimKwokStages()
}

func (f *LocalFleet) startEtcd(ctx context.Context) error {
	p := f.proc("etcd", "etcd")
	if p.running() {
		return nil
	}
	done := f.out.step("etcd")
	ports := f.state.Ports
	pk := f.pki()
	// etcd holds every Secret of every cluster: it serves TLS only and requires a client
	// certificate of the fleet's CA, so another local user (or an analysis aimed at
	// 127.0.0.1) reaches nothing.
	peer := fmt.Sprintf("https://127.0.0.1:%d", ports.EtcdPeer)
	client := fmt.Sprintf("https://127.0.0.1:%d", ports.EtcdClient)
	err := p.start(
		"--name=flotilla", "--data-dir="+filepath.Join(f.opts.StateDir, "etcd"),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=flotilla="+peer,
		"--cert-file="+pk.path(etcdServerCert), "--key-file="+pk.path(etcdServerKey),
		"--client-cert-auth", "--trusted-ca-file="+pk.path(etcdCACert),
		"--peer-cert-file="+pk.path(etcdServerCert), "--peer-key-file="+pk.path(etcdServerKey),
		"--peer-client-cert-auth", "--peer-trusted-ca-file="+pk.path(etcdCACert),
		"--quota-backend-bytes="+strconv.Itoa(8<<30),
		"--auto-compaction-mode=periodic", "--auto-compaction-retention=5m",
		"--unsafe-no-fsync", "--log-level=warn",
	)
	if err != nil {
		return err
	}
	etcdClient, err := f.tlsClient(etcdClientCert, etcdClientKey, etcdCACert)
	if err != nil {
		return err
	}
	err = waitFor(ctx, 60*time.Second, p, func(ctx context.Context) error {
		return httpOK(ctx, etcdClient, client+"/health")
	})
	done(err)
	return err
}

func (f *LocalFleet) apiserverPort(cluster string) int {
	if cluster == ControlPlaneName {
		return f.state.Ports.ControlPlane
	}
	return f.state.Ports.Members[cluster]
}

// apiserverStartsAtOnce bounds the apiservers starting together: each spends seconds of CPU
// and more memory starting than it keeps, so a hundred slim members started at once would
// thrash two cores and overshoot the machine's memory; the default fleet's four start together.
const apiserverStartsAtOnce = 8

// memberStartsAtOnce bounds the members whose other processes (kwok, and for a full member its
// controller-manager and scheduler), nodes and Flotilla identity start together: a hundred kwoks
// listing and creating nodes at once starved the shared etcd on two cores until its requests
// timed out (measured: 100 slim members, load average 75).
const memberStartsAtOnce = 16

// startAPIServers starts the apiservers together, at most apiserverStartsAtOnce until ready at
// a time, and waits for each to be ready: they spend most of their start on their own, so
// starting them together saves most of the time.
func (f *LocalFleet) startAPIServers(ctx context.Context, clusters []string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(clusters))
	slots := make(chan struct{}, apiserverStartsAtOnce)
	for i, c := range clusters {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			errs[i] = f.startAPIServer(ctx, c)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (f *LocalFleet) startAPIServer(ctx context.Context, cluster string) error {
	p := f.proc(cluster+"-apiserver", "kube-apiserver")
	if m, ok := f.state.Fleet.Member(cluster); ok && m.Slim() {
		p.env = slimAPIServerEnv
	}
	if !p.running() {
		pk := f.pki()
		issuer := fmt.Sprintf("https://%s.flotilla.local", cluster)
		var audited []string
		if cluster == ControlPlaneName {
			// Writes go to the inventory API in batches of at most a second, so history
			// names their users; while the manager is down the apiserver retries, then drops.
			audited = []string{"--audit-policy-file=" + f.auditPolicyFile(),
				"--audit-webhook-config-file=" + f.auditWebhookKubeconfig(),
				"--audit-webhook-mode=batch", "--audit-webhook-batch-max-wait=1s", "--audit-webhook-initial-backoff=1s"}
		}
		err := p.start(append([]string{
			fmt.Sprintf("--etcd-servers=https://127.0.0.1:%d", f.state.Ports.EtcdClient),
			"--etcd-cafile=" + pk.path(etcdCACert), "--etcd-certfile=" + pk.path(etcdClientCert), "--etcd-keyfile=" + pk.path(etcdClientKey),
			"--etcd-prefix=/" + cluster,
			"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", f.apiserverPort(cluster)),
			"--endpoint-reconciler-type=none",
			"--tls-cert-file=" + pk.path(serverCert), "--tls-private-key-file=" + pk.path(serverKey),
			"--client-ca-file=" + pk.path(caCert),
			"--service-account-issuer=" + issuer, "--api-audiences=" + issuer,
			"--service-account-key-file=" + pk.path(serviceAcPub),
			"--service-account-signing-key-file=" + pk.path(serviceAccountKey),
			"--service-cluster-ip-range=10.96.0.0/16",
			"--authorization-mode=" + f.authorizationModes(cluster),
			// Front-proxy flags let an aggregated apiserver or a webhook on 127.0.0.1 plug in.
			"--proxy-client-cert-file=" + pk.path(frontProxyClientCert),
			"--proxy-client-key-file=" + pk.path(frontProxyClientKey),
			"--requestheader-client-ca-file=" + pk.path(frontProxyCACert),
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-username-headers=X-Remote-User",
			// Off as on a hardened control plane; FLOTILLA_FLEET_PROFILING=1 turns it on to profile
			// an apiserver under a bench (/debug/pprof with the admin credentials).
			"--profiling=" + strconv.FormatBool(os.Getenv("FLOTILLA_FLEET_PROFILING") == "1"),
		}, append(audited, f.memberAPIServerArgs(cluster)...)...)...)
		if err != nil {
			return err
		}
	}
	done := f.out.step(cluster + "-apiserver")
	err := f.waitAPIServer(ctx, cluster, 180*time.Second)
	done(err)
	return err
}

// authorizationModes of a cluster's apiserver: a slim member has no kubelets, so no Node
// authorizer (whose graph watches every pod, node and volume).
func (f *LocalFleet) authorizationModes(cluster string) string {
	if m, ok := f.state.Fleet.Member(cluster); ok && m.Slim() {
		return "RBAC"
	}
	return "Node,RBAC"
}

// memberAPIServerArgs are the extra flags of a member's apiserver: those of its profile.
func (f *LocalFleet) memberAPIServerArgs(cluster string) []string {
	if m, ok := f.state.Fleet.Member(cluster); ok && m.Slim() {
		return slimAPIServerArgs()
	}
	return nil
}

func (f *LocalFleet) waitAPIServer(ctx context.Context, cluster string, timeout time.Duration) error {
	client, err := f.adminHTTPClient()
	if err != nil {
		return err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", f.apiserverPort(cluster))
	return waitFor(ctx, timeout, f.proc(cluster+"-apiserver", "kube-apiserver"), func(ctx context.Context) error {
		return httpOK(ctx, client, url)
	})
}

func (f *LocalFleet) adminHTTPClient() (*http.Client, error) {
	return f.tlsClient(adminCert, adminKey, caCert)
}

// tlsClient is an HTTPS client trusting caFile and presenting the given client certificate.
func (f *LocalFleet) tlsClient(certFile, keyFile, caFile string) (*http.Client, error) {
	pk := f.pki()
	cert, err := tls.LoadX509KeyPair(pk.path(certFile), pk.path(keyFile))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(pk.path(caFile))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}, Timeout: 5 * time.Second}, nil
}

// startCluster starts the components of a cluster that come after its apiserver.
func (f *LocalFleet) startCluster(ctx context.Context, cluster string) error {
	kubeconfig := f.Kubeconfig(cluster)
	pk := f.pki()
	kcmArgs := func(controllers string, qps int) []string {
		return []string{
			"--kubeconfig=" + kubeconfig, "--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
			"--controllers=" + controllers,
			fmt.Sprintf("--kube-api-qps=%d", qps), fmt.Sprintf("--kube-api-burst=%d", 2*qps),
			"--service-account-private-key-file=" + pk.path(serviceAccountKey),
			"--root-ca-file=" + pk.path(caCert),
			"--cluster-signing-cert-file=" + pk.path(caCert), "--cluster-signing-key-file=" + pk.path(caKey),
			"--use-service-account-credentials=false", "--cluster-name=" + cluster,
		}
	}
	if cluster == ControlPlaneName {
		return f.startOnce(cluster+"-kube-controller-manager", "kube-controller-manager", kcmArgs(controlPlaneControllers, 100)...)
	}
	m, _ := f.state.Fleet.Member(cluster)
	if m.Slim() {
		return f.startSlimMember(ctx, m)
	}
	if err := f.startOnce(cluster+"-kube-controller-manager", "kube-controller-manager", kcmArgs("*", 100)...); err != nil {
		return err
	}
	if err := f.startOnce(cluster+"-kube-scheduler", "kube-scheduler",
		"--kubeconfig="+kubeconfig, "--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
		"--kube-api-qps=100", "--kube-api-burst=200"); err != nil {
		return err
	}
	index := slices.Index(f.state.Fleet.Names(), cluster) + 1
	if err := f.startOnce(cluster+"-kwok", "kwok",
		"--kubeconfig="+kubeconfig, "--config="+filepath.Join(f.opts.StateDir, "kwok-stages.yaml"),
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		fmt.Sprintf("--node-ip=10.0.%d.1", index), fmt.Sprintf("--cidr=10.%d.0.0/16", 100+index),
		// A restarted kwok has a new identity and manages a node's pods only once the old
		// holder's lease expired: a short lease brings a restarted member's pods back quickly.
		"--node-lease-duration-seconds=10"); err != nil {
		return err
	}
	return f.finishMember(ctx, m)
}

// finishMember creates a started member's nodes and Flotilla's identity in it.
func (f *LocalFleet) finishMember(ctx context.Context, m Member) error {
	done := f.out.step(m.Name + "-nodes")
	err := f.ensureNodes(ctx, m)
	done(err)
	if err != nil {
		return err
	}
	if err := f.ensureAgent(ctx, m.Name); err != nil {
		return fmt.Errorf("granting Flotilla's agent identity in %s: %w", m.Name, err)
	}
	return nil
}

func (f *LocalFleet) startOnce(name, tool string, args ...string) error {
	p := f.proc(name, tool)
	if p.running() {
		return nil
	}
	if err := p.start(args...); err != nil {
		return err
	}
	f.out.linef("  %-36s started", name)
	return nil
}

func (f *LocalFleet) startManager(ctx context.Context) error {
	if f.opts.Manager == nil {
		return nil
	}
	replicas := f.managerReplicas()
	shardArgs := func(i int) []string {
		if replicas == 1 {
			return nil
		}
		return append([]string{"--shard-identity=" + ReplicaIdentity(i)}, replicaPprof(f.opts.Manager.Args, i)...)
	}
	p := f.proc(managerComponent, managerComponent)
	if !p.running() {
		args := append(f.managerArgs(f.ManagerHealthAddress(), f.ManagerMetricsAddress(), fmt.Sprintf("127.0.0.1:%d", f.state.Ports.Inventory), f.opts.StateDir),
			f.opts.Manager.Args...)
		// Agents dial the first replica; it leads unless it was killed (see docs/install.md).
		args = append(args, "--agent-bind-address="+f.agentAddress())
		if err := p.start(append(args, shardArgs(1)...)...); err != nil {
			return err
		}
		// Recorded when started: a manager already running keeps the settings it has.
		f.state.ManagerArgs, f.state.ManagerReplicas = f.opts.Manager.Args, replicas
		if err := f.writeState(); err != nil {
			return err
		}
	}
	if err := f.awaitManager(ctx, managerComponent, p, f.ManagerHealthAddress(), fmt.Sprintf("127.0.0.1:%d", f.state.Ports.Inventory)); err != nil {
		return err
	}
	for i := 2; i <= replicas; i++ {
		ports := f.state.Ports.Replicas[i-2]
		health, inventory := fmt.Sprintf("127.0.0.1:%d", ports.Health), fmt.Sprintf("127.0.0.1:%d", ports.Inventory)
		rp := f.proc(replicaComponent(i), managerComponent)
		if !rp.running() {
			dir := filepath.Join(f.opts.StateDir, replicaComponent(i))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			args := append(f.managerArgs(health, fmt.Sprintf("127.0.0.1:%d", ports.Metrics), inventory, dir), f.opts.Manager.Args...)
			if err := rp.start(append(args, shardArgs(i)...)...); err != nil {
				return err
			}
		}
		// The inventory API (with the leader's Works stream) listens on the leader only.
		if err := f.awaitManager(ctx, replicaComponent(i), rp, health, ""); err != nil {
			return err
		}
	}
	return nil
}

// replicaPprof moves a profiled manager's --pprof-bind-address to the next port for each
// further replica (host:port, port+1, ...), so every replica of a bench can be profiled.
func replicaPprof(args []string, replica int) []string {
	const flag = "--pprof-bind-address="
	if replica == 1 {
		return nil
	}
	for _, a := range slices.Backward(args) {
		if !strings.HasPrefix(a, flag) {
			continue
		}
		host, port, err := net.SplitHostPort(strings.TrimPrefix(a, flag))
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil || n == 0 {
			return nil // the manager refuses it, or picks a port itself
		}
		return []string{flag + net.JoinHostPort(host, strconv.Itoa(n+replica-1))}
	}
	return nil
}

// awaitManager waits until a controller-manager replica is ready and, given its address,
// serves its inventory API.
func (f *LocalFleet) awaitManager(ctx context.Context, name string, p process, health, inventory string) error {
	done := f.out.step(name)
	err := waitFor(ctx, 120*time.Second, p, func(ctx context.Context) error {
		if err := httpOK(ctx, http.DefaultClient, "http://"+health+"/readyz"); err != nil {
			return err
		}
		if inventory == "" {
			return nil
		}
		// The inventory API (and the audit webhook it takes) listens a moment after readyz.
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", inventory)
		if err != nil {
			return fmt.Errorf("the inventory API does not listen yet: %w", err)
		}
		return conn.Close()
	})
	done(err)
	return err
}

// managerArgs are the controller-manager's flags on this fleet: its addresses and where it
// keeps its git cache and history.
func (f *LocalFleet) managerArgs(health, metrics, inventory, stateDir string) []string {
	return []string{
		"controller-manager",
		"--kubeconfig=" + f.managerKubeconfig(),
		"--metrics-bind-address=" + metrics,
		"--health-probe-bind-address=" + health,
		// A local-fleet default: the demo's Prometheus and tests' servers listen on
		// 127.0.0.1 and are measured from a namespace's AnalysisTemplates. The fleet's etcd
		// there takes only client certificates, which analysis never presents.
		"--analysis-allow-cidr=127.0.0.1/32",
		"--git-cache-dir=" + filepath.Join(stateDir, "git"),
		"--history-dsn=sqlite://" + filepath.Join(stateDir, "history.db"),
		"--inventory-bind-address=" + inventory,
		"--inventory-tls-cert-file=" + f.pki().path(serverCert),
		"--inventory-tls-key-file=" + f.pki().path(serverKey),
		"--inventory-client-ca-file=" + f.pki().path(caCert),
		"--audit-webhook-client-names=" + auditWebhookUser,
		"--dashboard",
	}
}

// StopManager stops the controller-manager only (every replica; to restart it in a test).
func (f *LocalFleet) StopManager() error {
	var errs []error
	for i := f.managerReplicas(); i >= 2; i-- {
		_, err := f.proc(replicaComponent(i), managerComponent).stop(stopGrace(managerComponent))
		errs = append(errs, err)
	}
	_, err := f.proc(managerComponent, managerComponent).stop(stopGrace(managerComponent))
	return errors.Join(append(errs, err)...)
}

// StartManager starts the controller-manager again and waits until it is ready.
func (f *LocalFleet) StartManager(ctx context.Context) error { return f.startManager(ctx) }

// RestartManager restarts the controller-manager with extra flags after its own (a flag
// given again wins), for example another --history-dsn; with none, with its own settings.
func (f *LocalFleet) RestartManager(ctx context.Context, extra ...string) error {
	if f.opts.Manager == nil {
		return errors.New("this fleet runs no controller-manager")
	}
	if err := f.StopManager(); err != nil {
		return err
	}
	own := f.opts.Manager.Args
	f.opts.Manager.Args = append(slices.Clone(own), extra...)
	defer func() { f.opts.Manager.Args = own }()
	return f.startManager(ctx)
}

// StopMember stops every process of one member, as if the cluster went away: the apiserver
// first, so the member stops answering at once. Its data stays.
func (f *LocalFleet) StopMember(name string) error {
	m, ok := f.state.Fleet.Member(name)
	if !ok {
		return fmt.Errorf("no member %q in this fleet (members: %v)", name, f.state.Fleet.Names())
	}
	for _, c := range memberComponents(m) {
		stopped, err := f.proc(c.Name, c.Tool).stop(stopGrace(c.Tool))
		if err != nil {
			return err
		}
		if stopped {
			f.out.linef("  %-36s stopped", c.Name)
		}
	}
	return nil
}

// StartMember starts a stopped member again and waits until its apiserver answers.
func (f *LocalFleet) StartMember(ctx context.Context, name string) error {
	m, ok := f.state.Fleet.Member(name)
	if !ok {
		return fmt.Errorf("no member %q in this fleet (members: %v)", name, f.state.Fleet.Names())
	}
	if !f.componentRunning("etcd") {
		return errors.New("the fleet is down: run `flotilla up` first")
	}
	if !f.componentRunning(name+"-apiserver") && !m.Slim() {
		// Controllers that outlived their apiserver trail it for a minute or more after it
		// returns (client-go's watch backoff, caches older than their own writes): the garbage
		// collector leaves a deleted Deployment's ReplicaSets running. A member's control plane
		// comes back as a whole, as a real cluster's does after a partition.
		for _, c := range []string{name + "-kube-controller-manager", name + "-kube-scheduler"} {
			if err := f.StopComponent(c); err != nil {
				return err
			}
		}
	}
	if err := f.startAPIServer(ctx, name); err != nil {
		return err
	}
	return f.startCluster(ctx, name)
}

// Down stops every process the fleet started, members first and etcd last. With purge it
// also removes the state directory.
func (f *LocalFleet) Down(purge bool) error {
	cs := f.Components()
	slices.Reverse(cs)
	var errs []error
	stoppedAny := false
	for _, c := range cs {
		stopped, err := f.proc(c.Name, c.Tool).stop(stopGrace(c.Tool))
		if err != nil {
			errs = append(errs, err)
		}
		if stopped {
			stoppedAny = true
			f.out.linef("  %-36s stopped", c.Name)
		}
	}
	if !stoppedAny {
		f.out.linef("nothing was running in %s", f.opts.StateDir)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if purge {
		if err := os.RemoveAll(f.opts.StateDir); err != nil {
			return err
		}
		f.out.linef("removed %s", f.opts.StateDir)
	}
	return nil
}

// waitFor polls check until it succeeds, the timeout passes or the process dies; a dead
// process is reported with the end of its log.
func waitFor(ctx context.Context, timeout time.Duration, p process, check func(context.Context) error) error {
	since := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		if p.exitedEarly(since) {
			return fmt.Errorf("%s exited; the end of %s:\n%s", p.name, p.logFile, p.logTail(15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not become ready in %s (last error: %v); see %s", p.name, timeout, last, p.logFile)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func httpOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// StopComponent stops one process of the fleet by its component name (see Components), for
// fault injection finer than a whole member.
func (f *LocalFleet) StopComponent(name string) error {
	for _, c := range f.Components() {
		if c.Name == name {
			_, err := f.proc(c.Name, c.Tool).stop(stopGrace(c.Tool))
			return err
		}
	}
	return fmt.Errorf("no component %q in this fleet", name)
}
