// Package testenv starts a real control plane for controller tests: etcd and kube-apiserver
// from bin/ (built by `make tools`, no downloader) with Flotilla's CRDs installed, through
// controller-runtime's envtest. It sits between the pure unit tests and the full e2e suite:
// a controller, a status writer or a CEL rule is tested against the real API server's
// validation, server-side apply and field ownership, in seconds. It owns no production code.
package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/flotilla-dev/flotilla/internal/kube"
)

// root is the repository's root directory.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BinDir is where the control-plane binaries are: $FLOTILLA_BIN_DIR, else the repository's bin/.
func BinDir() string {
	if d := os.Getenv("FLOTILLA_BIN_DIR"); d != "" {
		return d
	}
	return filepath.Join(root(), "bin")
}

// Start starts etcd and kube-apiserver with the CRDs of config/crd/bases and stops them when
// the test ends. Without the binaries the test fails saying how to build them (`make test`
// builds them first).
func Start(t testing.TB) (*rest.Config, client.Client) {
	t.Helper()
	bin := BinDir()
	for _, tool := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			t.Fatalf("testenv: %s not in %s: run make tools (make test does) to build the control plane these tests run on", tool, bin)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths:     []string{filepath.Join(root(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("testenv: starting etcd and kube-apiserver from %s: %v", bin, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("testenv: stopping: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: kube.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c
}

// StartBare starts etcd and a kube-apiserver that nothing of Flotilla's was put into, the way
// `flotilla install` meets a new cluster, and stops them when the test ends. flags are set on
// the kube-apiserver (name without dashes to value). It returns the environment, whose
// AddUser makes identities with no rights, and an admin (system:masters) config.
func StartBare(t testing.TB, flags map[string]string) (*envtest.Environment, *rest.Config) {
	t.Helper()
	bin := BinDir()
	for _, tool := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			t.Fatalf("testenv: %s not in %s: run make tools (make test does) to build the control plane these tests run on", tool, bin)
		}
	}
	env := &envtest.Environment{BinaryAssetsDirectory: bin}
	args := env.ControlPlane.GetAPIServer().Configure()
	for k, v := range flags {
		args.Set(k, v)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("testenv: starting etcd and kube-apiserver from %s: %v", bin, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("testenv: stopping: %v", err)
		}
	})
	return env, cfg
}
