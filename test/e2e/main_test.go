// Package e2e runs Flotilla's scenarios against a local fleet of real Kubernetes clusters,
// started once for the test binary by the same package `flotilla up` uses. The tools must be
// built first (`make e2e` does it); FLOTILLA_BIN_DIR points at them.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/config/crd"
	"github.com/flotilla-dev/flotilla/internal/cli"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// Probe settings of the test fleet's controller-manager: a member is NotReady after about
// period x threshold + timeout.
const (
	probePeriod      = time.Second
	probeTimeout     = time.Second
	failureThreshold = 2
	// failoverGrace: how long a member stays not Ready before its Divided replicas move.
	failoverGrace = 5 * time.Second
)

var (
	fleet       *localfleet.LocalFleet
	cp          client.Client
	binDir      string
	flotillaBin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	ctx := context.Background()
	var err error
	if binDir, err = toolsDir(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "flotilla-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if keep := os.Getenv("FLOTILLA_E2E_KEEP_LOGS"); keep != "" { // for debugging a failed run
		defer func() { _ = os.CopyFS(keep, os.DirFS(filepath.Join(tmp, "fleet", "logs"))) }()
	}
	if flotillaBin, err = buildFlotilla(tmp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	members := localfleet.DefaultFleet()
	if docsScreenshotsDir() != "" { // the docs' screenshots show a realistic fleet, not the tests'
		if members, err = localfleet.ParseFleet([]byte(docsFleetYAML)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fleet, err = startFleet(ctx, filepath.Join(tmp, "fleet"), members)
	if fleet != nil {
		defer func() { _ = fleet.Down(false) }()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the local fleet:", err)
		return 1
	}
	if cp, err = controlPlaneClient(fleet); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// toolsDir finds the tools `make tools` built; without them nothing here can run, which is an
// error, not a skip.
func toolsDir() (string, error) {
	dir := os.Getenv("FLOTILLA_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		return "", fmt.Errorf("no kube-apiserver in %s: run `make tools` (or `make e2e`) first", dir)
	}
	return dir, nil
}

// buildFlotilla builds the binary under test, so the controller-manager the fleet runs is this
// tree's code, and the small supervisor beside it, which the fleet then runs its components
// under, as after `make build`.
func buildFlotilla(dir string) (string, error) {
	out := filepath.Join(dir, "flotilla")
	for pkg, bin := range map[string]string{"cmd/flotilla": out, "cmd/" + localfleet.SupervisorBinaryName: filepath.Join(dir, localfleet.SupervisorBinaryName)} {
		cmd := exec.Command("go", "build", "-o", bin, "github.com/flotilla-dev/flotilla/"+pkg)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("building %s: %w", pkg, err)
		}
	}
	return out, nil
}

func startFleet(ctx context.Context, stateDir string, f *localfleet.Fleet, managerArgs ...string) (*localfleet.LocalFleet, error) {
	lf, err := localfleet.Open(localfleet.Options{
		StateDir: stateDir, BinDir: binDir, Fleet: f, CRDs: crd.YAML(), Out: os.Stdout,
		Manager: &localfleet.ManagerCommand{Binary: flotillaBin, Args: append([]string{
			"--probe-period=" + probePeriod.String(), "--probe-timeout=" + probeTimeout.String(),
			fmt.Sprintf("--failure-threshold=%d", failureThreshold), "--failover-grace-period=" + failoverGrace.String(), "--zap-log-level=info",
			// Far beyond any test's wait: a CRD installed in a member must become usable
			// through the member's CRD watch, not through the periodic re-read.
			"--discovery-interval=10m",
			// The platform's own namespace in the tests: its templates skip the Pod Security check.
			"--pod-security-exempt-namespaces=tw-platform",
		}, managerArgs...)},
	})
	if err != nil {
		return nil, err
	}
	if _, err := lf.Up(ctx); err != nil {
		return lf, err
	}
	c, err := controlPlaneClient(lf)
	if err != nil {
		return lf, err
	}
	return lf, lf.Join(ctx, c, os.Stdout, 3*time.Minute)
}

func controlPlaneClient(lf *localfleet.LocalFleet) (client.Client, error) {
	cfg, err := lf.RESTConfig("")
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: kube.Scheme})
}

func memberClient(t *testing.T, name string) client.Client {
	t.Helper()
	cfg, err := fleet.RESTConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: kube.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// flotilla runs the command line in-process, as a user would type it, against the test fleet.
func flotilla(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := cli.NewRootCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append(args, "--state-dir", fleet.StateDir(), "--bin-dir", binDir))
	err := cmd.ExecuteContext(context.Background())
	return out.String() + errOut.String(), err
}

func readyCondition(t *testing.T, name string) *metav1.Condition {
	t.Helper()
	cl := &clusterv1alpha1.Cluster{}
	if err := cp.Get(context.Background(), client.ObjectKey{Name: name}, cl); err != nil {
		return nil
	}
	return meta.FindStatusCondition(cl.Status.Conditions, clusterv1alpha1.ConditionReady)
}

func readyStatus(t *testing.T, name string) metav1.ConditionStatus {
	if c := readyCondition(t, name); c != nil {
		return c.Status
	}
	return ""
}

func newG(t *testing.T) gomega.Gomega {
	g := gomega.NewWithT(t)
	g.SetDefaultEventuallyTimeout(90 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	return g
}
