package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/customization"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/luavm"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// An agent restarted while the control plane is away starts from the Works and customizations
// it last received, kept privately beside its identity.
func TestARestartedAgentStartsFromItsLastWorks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	bundled, err := customization.Bundled()
	if err != nil || len(bundled) == 0 {
		t.Fatalf("bundled customizations: %v", err)
	}
	newAgent := func() *Agent {
		return &Agent{id: &identity{store: fileStore{dir: dir}}, interpreters: interpret.NewRegistry(luavm.Limits{}), customizations: map[string]bool{}}
	}
	first := newAgent()
	first.lastCustomizations = &configv1alpha1.ResourceInterpreterCustomizationList{Items: bundled[:1]}
	mirror := workstore.New()
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: "flotilla-es-edge", Name: "shop.web", UID: "u1", Finalizers: []string{"work.flotilla.dev/executor"}},
		Spec: workv1alpha1.WorkSpec{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"shop"},"data":{"k":"dg=="}}`)}}}}}
	if err := mirror.Mirror(w); err != nil {
		t.Fatal(err)
	}
	go first.keepSnapshots(ctx, mirror, 20*time.Millisecond)
	var info os.FileInfo
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if info, err = os.Stat(filepath.Join(dir, snapshotFile)); err == nil {
			break
		}
	}
	if info == nil {
		t.Fatalf("no snapshot was written: %v", err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("the snapshot (it holds Secrets) is %v; want 0600", info.Mode().Perm())
	}
	cancel()

	second, restored := newAgent(), workstore.New()
	ok, err := second.restoreSnapshot(context.Background(), restored, false)
	if err != nil || !ok {
		t.Fatalf("restoring: %v, customizations restored %v", err, ok)
	}
	got := &workv1alpha1.Work{}
	if err := restored.Client(nil).Get(context.Background(), client.ObjectKeyFromObject(w), got); err != nil {
		t.Fatalf("the Work is not back: %v", err)
	}
	if got.UID != "u1" || len(got.Finalizers) != 1 || string(got.Spec.Manifests[0].Raw) != string(w.Spec.Manifests[0].Raw) {
		t.Errorf("the Work came back as %+v", got)
	}
	if !second.customizations[bundled[0].Name] {
		t.Errorf("the customization %s is not in force after the restart", bundled[0].Name)
	}
	// With the control plane's customizations in force already, the kept ones are not put back.
	third := newAgent()
	if ok, err := third.restoreSnapshot(context.Background(), workstore.New(), true); err != nil || ok {
		t.Errorf("restoring over the control plane's customizations: %v %v; want none restored", ok, err)
	}
}
