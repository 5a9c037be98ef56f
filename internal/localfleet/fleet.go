package localfleet

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// FleetAPIVersion and FleetKind identify a fleet file.
const (
	FleetAPIVersion = "flotilla.dev/v1alpha1"
	FleetKind       = "Fleet"
	// maxFullMembers bounds members of the full profile (about 570 MiB each); maxMembers
	// bounds all members, slim ones included (about one port and two processes each).
	maxFullMembers = 64
	maxMembers     = 250
	maxNodes       = 500
)

// Profile is what runs for a member cluster.
type Profile string

const (
	// ProfileFull runs kube-apiserver, kube-controller-manager, kube-scheduler and kwok: pods
	// are scheduled and simulated, every workload controller runs.
	ProfileFull Profile = "full"
	// ProfileSlim runs a kube-apiserver with small caches and kwok only: no controller
	// creates ReplicaSets or pods; kwok Stages move Deployments, StatefulSets, DaemonSets and
	// Jobs to Available or Complete. For scale work: about a third of a full member's memory.
	ProfileSlim Profile = "slim"
)

// ParseProfile checks a profile name given on the command line or in a fleet file.
func ParseProfile(s string) (Profile, error) {
	switch p := Profile(s); p {
	case ProfileFull, ProfileSlim:
		return p, nil
	}
	return "", fmt.Errorf("%q: use %s or %s", s, ProfileFull, ProfileSlim)
}

// Fleet describes the member clusters of a local fleet.
type Fleet struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Profile is the profile of every member that names none: full (the default) or slim.
	Profile Profile  `json:"profile,omitempty"`
	Members []Member `json:"members"`
	// Manager holds settings of the controller-manager `flotilla up` starts; flags of `up`
	// given explicitly win over them.
	Manager *ManagerSettings `json:"manager,omitempty"`
}

// ManagerSettings are the controller-manager settings a fleet file may give, each the
// manager flag of the same name: durations as Go durations ("30s", "2m").
type ManagerSettings struct {
	ProbePeriod         string `json:"probePeriod,omitempty"`
	ProbeTimeout        string `json:"probeTimeout,omitempty"`
	FailureThreshold    int    `json:"failureThreshold,omitempty"`
	DiscoveryInterval   string `json:"discoveryInterval,omitempty"`
	FailoverGracePeriod string `json:"failoverGracePeriod,omitempty"`
	// LogLevel is debug, info or error, or a positive integer for more verbose debug logs.
	LogLevel string `json:"logLevel,omitempty"`
	// Replicas of the controller-manager (1 to MaxManagerReplicas); more than one share the
	// member clusters (--shard-identity manager-1, manager-2, ...).
	Replicas int `json:"replicas,omitempty"`
}

// MaxManagerReplicas bounds the controller-manager replicas of a local fleet.
const MaxManagerReplicas = 8

// ReplicaIdentity is the shard identity of the controller-manager replica i (from 1).
func ReplicaIdentity(i int) string { return fmt.Sprintf("manager-%d", i) }

// Member is one member cluster of a local fleet.
type Member struct {
	// Name is the cluster's name, a DNS label.
	Name string `json:"name"`
	// Labels become the Cluster's metadata labels (region, zone, env, ...).
	Labels map[string]string `json:"labels,omitempty"`
	// Description, ShortName and Environment become the Cluster's spec fields of the same name.
	Description string `json:"description,omitempty"`
	ShortName   string `json:"shortName,omitempty"`
	Environment string `json:"environment,omitempty"`
	// Profile is full or slim; the fleet's profile when unset.
	Profile Profile `json:"profile,omitempty"`
	// Mode is Push (the default: the controller-manager applies to the member) or Pull: the
	// member is joined with `flotilla join --mode Pull`, the control plane gets no kubeconfig
	// of it, and a supervised `flotilla agent` in its place dials the manager's agent endpoint.
	Mode string `json:"mode,omitempty"`
	// Nodes is how many kwok nodes the member gets; 2 when unset.
	Nodes int `json:"nodes,omitempty"`
	// NodeCapacity is each node's capacity; 8 CPU, 32Gi, 110 pods when unset.
	NodeCapacity NodeCapacity `json:"nodeCapacity,omitempty"`
}

// NodeCapacity is the allocatable of one simulated node.
type NodeCapacity struct {
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
	Pods   string `json:"pods,omitempty"`
}

// DefaultFleet is the fleet `flotilla up` starts without a fleet file: three members in
// distinct regions and environments.
func DefaultFleet() *Fleet {
	f := &Fleet{APIVersion: FleetAPIVersion, Kind: FleetKind, Members: []Member{
		{Name: "east", Labels: map[string]string{"region": "us-east", "zone": "us-east-1a", "env": "prod"},
			ShortName: "use1", Environment: "prod", Description: "production, US East"},
		{Name: "west", Labels: map[string]string{"region": "us-west", "zone": "us-west-2a", "env": "prod"},
			ShortName: "usw2", Environment: "prod", Description: "production, US West"},
		{Name: "europe", Labels: map[string]string{"region": "eu-central", "zone": "eu-central-1a", "env": "staging"},
			ShortName: "euc1", Environment: "staging", Description: "staging, EU Central"},
	}}
	f.applyDefaults()
	return f
}

// GeneratedFleet is a fleet of n members of one profile named member-01.. spread over three
// regions; the bench and `flotilla up --members` use it. An empty profile is full.
func GeneratedFleet(n int, profile Profile) *Fleet {
	regions := []string{"us-east", "us-west", "eu-central"}
	f := &Fleet{APIVersion: FleetAPIVersion, Kind: FleetKind, Profile: profile}
	for i := range n {
		f.Members = append(f.Members, Member{
			Name:   fmt.Sprintf("member-%02d", i+1),
			Labels: map[string]string{"region": regions[i%len(regions)], "env": "bench"},
		})
	}
	f.applyDefaults()
	return f
}

// LoadFleetFile reads, defaults and validates a fleet file.
func LoadFleetFile(path string) (*Fleet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading fleet file: %w", err)
	}
	f, err := ParseFleet(data)
	if err != nil {
		return nil, fmt.Errorf("fleet file %s: %w", path, err)
	}
	return f, nil
}

// ParseFleet decodes a fleet definition strictly (unknown fields are errors), applies defaults
// and validates it.
func ParseFleet(data []byte) (*Fleet, error) { return ParseFleetWithProfile(data, "") }

// ParseFleetWithProfile is ParseFleet with a profile (`up --profile`) that wins over the
// fleet file's own; members that name a profile keep theirs.
func ParseFleetWithProfile(data []byte, profile Profile) (*Fleet, error) {
	var f Fleet
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("not a valid fleet definition: %w", err)
	}
	if profile != "" {
		f.Profile = profile
	}
	f.applyDefaults()
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

func (f *Fleet) applyDefaults() {
	if f.APIVersion == "" {
		f.APIVersion = FleetAPIVersion
	}
	if f.Kind == "" {
		f.Kind = FleetKind
	}
	for i := range f.Members {
		m := &f.Members[i]
		// Copied only when the fleet names one, so a fleet saved before profiles existed
		// still compares equal to the same fleet file read again.
		if m.Profile == "" {
			m.Profile = f.Profile
		}
		if m.Nodes == 0 {
			m.Nodes = 2
		}
		if m.NodeCapacity.CPU == "" {
			m.NodeCapacity.CPU = "8"
		}
		if m.NodeCapacity.Memory == "" {
			m.NodeCapacity.Memory = "32Gi"
		}
		if m.NodeCapacity.Pods == "" {
			m.NodeCapacity.Pods = "110"
		}
	}
}

// Validate reports every problem of the fleet, each naming the field and the fix.
func (f *Fleet) Validate() error {
	var errs []error
	if f.APIVersion != FleetAPIVersion {
		errs = append(errs, fmt.Errorf("apiVersion %q: must be %s", f.APIVersion, FleetAPIVersion))
	}
	if f.Kind != FleetKind {
		errs = append(errs, fmt.Errorf("kind %q: must be %s", f.Kind, FleetKind))
	}
	if len(f.Members) == 0 {
		errs = append(errs, errors.New("members: list at least one member cluster"))
	}
	if m := f.Manager; m != nil {
		for field, v := range map[string]string{"manager.probePeriod": m.ProbePeriod, "manager.probeTimeout": m.ProbeTimeout,
			"manager.discoveryInterval": m.DiscoveryInterval, "manager.failoverGracePeriod": m.FailoverGracePeriod} {
			if d, err := time.ParseDuration(v); v != "" && (err != nil || d <= 0) {
				errs = append(errs, fmt.Errorf("%s %q: give a positive Go duration such as 30s or 2m", field, v))
			}
		}
		if m.FailureThreshold < 0 {
			errs = append(errs, fmt.Errorf("manager.failureThreshold %d: give a positive count of failed probes", m.FailureThreshold))
		}
		if err := ValidLogLevel(m.LogLevel); m.LogLevel != "" && err != nil {
			errs = append(errs, fmt.Errorf("manager.logLevel: %w", err))
		}
		if m.Replicas < 0 || m.Replicas > MaxManagerReplicas {
			errs = append(errs, fmt.Errorf("manager.replicas %d: give 1 to %d (more than one share the member clusters)", m.Replicas, MaxManagerReplicas))
		}
	}
	if f.Profile != "" {
		if _, err := ParseProfile(string(f.Profile)); err != nil {
			errs = append(errs, fmt.Errorf("profile %w", err))
		}
	}
	if len(f.Members) > maxMembers {
		errs = append(errs, fmt.Errorf("members: %d members, at most %d fit on one machine", len(f.Members), maxMembers))
	}
	if full := len(f.Members) - f.slimMembers(); full > maxFullMembers {
		errs = append(errs, fmt.Errorf("members: %d members of the full profile, at most %d fit on one machine; give the others profile: slim", full, maxFullMembers))
	}
	seen := map[string]int{}
	shortNames := map[string]int{}
	for i, m := range f.Members {
		field := fmt.Sprintf("members[%d]", i)
		for _, msg := range validation.IsDNS1123Label(m.Name) {
			errs = append(errs, fmt.Errorf("%s.name %q: %s", field, m.Name, msg))
		}
		if m.Name == ControlPlaneName {
			errs = append(errs, fmt.Errorf("%s.name %q: reserved for the control plane; choose another name", field, m.Name))
		}
		if j, dup := seen[m.Name]; dup {
			errs = append(errs, fmt.Errorf("%s.name %q: already used by members[%d]; member names must be unique", field, m.Name, j))
		}
		seen[m.Name] = i
		for f, v := range map[string]string{"shortName": m.ShortName, "environment": m.Environment} {
			if v == "" {
				continue
			}
			for _, msg := range validation.IsDNS1123Label(v) {
				errs = append(errs, fmt.Errorf("%s.%s %q: %s", field, f, v, msg))
			}
		}
		if j, dup := shortNames[m.ShortName]; dup && m.ShortName != "" {
			errs = append(errs, fmt.Errorf("%s.shortName %q: already used by members[%d]; short names must be unique", field, m.ShortName, j))
		}
		shortNames[m.ShortName] = i
		if m.Profile != "" {
			if _, err := ParseProfile(string(m.Profile)); err != nil {
				errs = append(errs, fmt.Errorf("%s.profile %w", field, err))
			}
		}
		if m.Mode != "" && m.Mode != "Push" && m.Mode != "Pull" {
			errs = append(errs, fmt.Errorf("%s.mode %q: use Push (the controller-manager applies to the member) or Pull (an agent in the member dials in)", field, m.Mode))
		}
		if len(m.Description) > 1024 {
			errs = append(errs, fmt.Errorf("%s.description: %d characters, at most 1024", field, len(m.Description)))
		}
		keys := make([]string, 0, len(m.Labels))
		for k := range m.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, msg := range validation.IsQualifiedName(k) {
				errs = append(errs, fmt.Errorf("%s.labels: key %q: %s", field, k, msg))
			}
			for _, msg := range validation.IsValidLabelValue(m.Labels[k]) {
				errs = append(errs, fmt.Errorf("%s.labels[%q]: value %q: %s", field, k, m.Labels[k], msg))
			}
		}
		if m.Nodes < 1 || m.Nodes > maxNodes {
			errs = append(errs, fmt.Errorf("%s.nodes: %d is out of range; use 1 to %d", field, m.Nodes, maxNodes))
		}
		for _, c := range [][2]string{{"cpu", m.NodeCapacity.CPU}, {"memory", m.NodeCapacity.Memory}, {"pods", m.NodeCapacity.Pods}} {
			name, v := c[0], c[1]
			q, err := resource.ParseQuantity(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.nodeCapacity.%s %q: not a quantity; write it like 8, 500m or 32Gi", field, name, v))
			} else if q.Sign() <= 0 {
				errs = append(errs, fmt.Errorf("%s.nodeCapacity.%s %q: must be greater than zero", field, name, v))
			}
		}
	}
	return errors.Join(errs...)
}

// Slim reports whether the member runs the slim profile.
func (m Member) Slim() bool { return m.Profile == ProfileSlim }

// Pull says whether the member's agent pulls its Works.
func (m Member) Pull() bool { return m.Mode == "Pull" }

func (f *Fleet) slimMembers() int {
	n := 0
	for _, m := range f.Members {
		if m.Slim() {
			n++
		}
	}
	return n
}

// Member returns the member with the given name.
func (f *Fleet) Member(name string) (Member, bool) {
	for _, m := range f.Members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// Names lists the members' names in fleet order.
func (f *Fleet) Names() []string {
	names := make([]string, len(f.Members))
	for i, m := range f.Members {
		names[i] = m.Name
	}
	return names
}

// ValidLogLevel checks a controller-manager log level: debug, info, error, or a positive
// integer (more verbose debug logs).
func ValidLogLevel(level string) error {
	switch level {
	case "debug", "info", "error":
		return nil
	}
	if n, err := strconv.Atoi(level); err == nil && n > 0 {
		return nil
	}
	return fmt.Errorf("%q: use debug, info, error or a positive integer", level)
}
