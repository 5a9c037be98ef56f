package localfleet

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseFleet(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		wantErrs []string
	}{
		{name: "valid with defaults", yaml: `
apiVersion: flotilla.dev/v1alpha1
kind: Fleet
members:
- name: east
  labels: {region: us-east, env: prod}
- name: west
  nodes: 3
  nodeCapacity: {cpu: "4", memory: 16Gi, pods: "50"}
`},
		{name: "bad yaml", yaml: "members: [name: east", wantErrs: []string{"not a valid fleet definition"}},
		{name: "unknown field", yaml: "members:\n- name: east\n  nodez: 3\n", wantErrs: []string{"not a valid fleet definition", "nodez"}},
		{name: "no members", yaml: "members: []\n", wantErrs: []string{"members: list at least one member cluster"}},
		{name: "duplicate names", yaml: "members:\n- name: east\n- name: west\n- name: east\n",
			wantErrs: []string{`members[2].name "east": already used by members[0]; member names must be unique`}},
		{name: "name not a DNS label", yaml: "members:\n- name: East_1\n", wantErrs: []string{`members[0].name "East_1"`}},
		{name: "reserved name", yaml: "members:\n- name: flotilla\n", wantErrs: []string{`members[0].name "flotilla": reserved for the control plane`}},
		{name: "bad label key", yaml: "members:\n- name: east\n  labels: {\"bad key!\": x}\n", wantErrs: []string{`members[0].labels: key "bad key!"`}},
		{name: "bad label value", yaml: "members:\n- name: east\n  labels: {region: \"us east\"}\n", wantErrs: []string{`members[0].labels["region"]: value "us east"`}},
		{name: "nodes out of range", yaml: "members:\n- name: east\n  nodes: -1\n", wantErrs: []string{"members[0].nodes: -1 is out of range; use 1 to 500"}},
		{name: "bad capacity", yaml: "members:\n- name: east\n  nodeCapacity: {cpu: lots, memory: \"-1Gi\"}\n",
			wantErrs: []string{`members[0].nodeCapacity.cpu "lots": not a quantity`, `members[0].nodeCapacity.memory "-1Gi": must be greater than zero`}},
		{name: "unknown profile", yaml: "profile: tiny\nmembers:\n- name: east\n  profile: huge\n",
			wantErrs: []string{`profile "tiny": use full or slim`, `members[0].profile "huge": use full or slim`}},
		{name: "wrong kind", yaml: "kind: Cluster\nmembers:\n- name: east\n", wantErrs: []string{`kind "Cluster": must be Fleet`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFleet([]byte(tt.yaml))
			if len(tt.wantErrs) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if f.Members[0].Nodes != 2 || f.Members[0].NodeCapacity != (NodeCapacity{CPU: "8", Memory: "32Gi", Pods: "110"}) {
					t.Errorf("defaults not applied: %+v", f.Members[0])
				}
				if f.Members[1].Nodes != 3 || f.Members[1].NodeCapacity.CPU != "4" {
					t.Errorf("explicit values lost: %+v", f.Members[1])
				}
				return
			}
			if err == nil {
				t.Fatalf("expected errors %q, got none", tt.wantErrs)
			}
			for _, want := range tt.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestDefaultFleetIsValidAndDistinct(t *testing.T) {
	f := DefaultFleet()
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(f.Members) != 3 {
		t.Fatalf("default fleet has %d members, want 3", len(f.Members))
	}
	regions, envs := map[string]bool{}, map[string]bool{}
	for _, m := range f.Members {
		regions[m.Labels["region"]] = true
		envs[m.Labels["env"]] = true
	}
	if len(regions) != 3 || len(envs) < 2 {
		t.Errorf("default fleet regions %v envs %v: want distinct regions and more than one env", regions, envs)
	}
	if diff := cmp.Diff(f.Names(), []string{"east", "west", "europe"}); diff != "" {
		t.Error(diff)
	}
}

func TestUpWithoutToolsSaysRunMakeTools(t *testing.T) {
	lf, err := Open(Options{StateDir: t.TempDir(), BinDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = lf.Up(context.Background())
	if !errors.Is(err, ErrToolsMissing) || !strings.Contains(err.Error(), "run `make tools`") {
		t.Fatalf("Up without tools: got %v, want an error telling to run make tools", err)
	}
	if lf.Initialized() {
		t.Error("a failed Up must not leave a state file behind")
	}
}

func TestOpenRejectsAnotherFleetInTheSameStateDir(t *testing.T) {
	dir := t.TempDir()
	lf, err := Open(Options{StateDir: dir, Fleet: DefaultFleet()})
	if err != nil {
		t.Fatal(err)
	}
	lf.opts.BinDir = dir
	if err := lf.pki().ensure(); err != nil {
		t.Fatal(err)
	}
	if err := lf.writeState(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{StateDir: dir, Fleet: GeneratedFleet(2, "")}); err == nil || !strings.Contains(err.Error(), "down --purge") {
		t.Fatalf("opening a different fleet in a used state dir: got %v, want an error naming `down --purge`", err)
	}
	if _, err := Open(Options{StateDir: dir}); err != nil {
		t.Fatalf("reopening without a fleet must reuse the saved one: %v", err)
	}
}

func TestFleetProfiles(t *testing.T) {
	f, err := ParseFleet([]byte("profile: slim\nmembers:\n- name: east\n- name: west\n  profile: full\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Members[0].Slim() || f.Members[1].Slim() {
		t.Errorf("members %+v: want east slim from the fleet's profile and west full as it says", f.Members)
	}
	var names []string
	for _, c := range (&LocalFleet{state: state{Fleet: f}}).Components() {
		names = append(names, c.Name)
	}
	want := []string{"etcd", "flotilla-apiserver", "flotilla-kube-controller-manager", "east-apiserver", "east-kwok",
		"west-apiserver", "west-kube-controller-manager", "west-kube-scheduler", "west-kwok"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("components (-want +got):\n%s", diff)
	}

	if err := GeneratedFleet(maxMembers, ProfileSlim).Validate(); err != nil {
		t.Errorf("%d slim members: %v", maxMembers, err)
	}
	if err := GeneratedFleet(maxFullMembers+1, ProfileFull).Validate(); err == nil || !strings.Contains(err.Error(), "give the others profile: slim") {
		t.Errorf("%d full members: got %v, want an error suggesting the slim profile", maxFullMembers+1, err)
	}
	// A fleet saved before profiles existed is the same fleet when its file is read again.
	old := GeneratedFleet(2, "")
	if !sameFleet(old, GeneratedFleet(2, "")) || sameFleet(old, GeneratedFleet(2, ProfileSlim)) {
		t.Error("a fleet without profiles must equal itself and differ from its slim twin")
	}
}

func TestEachReplicaIsProfiledOnItsOwnPort(t *testing.T) {
	args := []string{"--pprof-bind-address=127.0.0.1:6000", "--pprof-bind-address=127.0.0.1:6060"}
	if got := replicaPprof(args, 1); got != nil {
		t.Errorf("the first replica keeps the flags as given; got %v", got)
	}
	if diff := cmp.Diff([]string{"--pprof-bind-address=127.0.0.1:6062"}, replicaPprof(args, 3)); diff != "" {
		t.Errorf("the third replica profiles two ports after the last flag given (-want +got):\n%s", diff)
	}
	for _, given := range [][]string{nil, {"--pprof-bind-address=127.0.0.1:0"}, {"--pprof-bind-address=nonsense"}} {
		if got := replicaPprof(given, 2); got != nil {
			t.Errorf("%v: nothing to move, got %v", given, got)
		}
	}
}
