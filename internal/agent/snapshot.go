package agent

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/customization"
	"github.com/flotilla-dev/flotilla/internal/workstore"
)

// The agent keeps a snapshot of its last Works and the platform's customizations beside its
// identity, so an agent restarted while the control plane is unreachable applies and corrects
// what it last received instead of nothing. It holds the Secrets the Works apply to this
// member, so it is kept as privately as they are (a 0600 file, or a Secret of the member).
const snapshotFile = "works.json.gz"

// snapshot is what is kept.
type snapshot struct {
	Works          []*workv1alpha1.Work                                 `json:"works"`
	Customizations *configv1alpha1.ResourceInterpreterCustomizationList `json:"customizations,omitempty"`
}

// maxSnapshotSecretBytes keeps a snapshot in a Secret under the API server's 1 MiB limit.
const maxSnapshotSecretBytes = 900 << 10

func (f fileStore) readSnapshot(context.Context) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(f.dir, snapshotFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

func (f fileStore) writeSnapshot(_ context.Context, data []byte) error {
	tmp := filepath.Join(f.dir, snapshotFile+".new")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(f.dir, snapshotFile))
}

func (s secretStore) readSnapshot(ctx context.Context) ([]byte, error) {
	sec, err := s.kube.CoreV1().Secrets(s.namespace).Get(ctx, s.name+"-works", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return sec.Data[snapshotFile], nil
}

func (s secretStore) writeSnapshot(ctx context.Context, data []byte) error {
	if len(data) > maxSnapshotSecretBytes {
		return errors.New("the snapshot of the Works is over 900 KiB, more than a Secret holds; it is not kept (give the agent --state-dir on a volume instead)")
	}
	sec := applycorev1.Secret(s.name+"-works", s.namespace).WithType(corev1.SecretTypeOpaque).WithData(map[string][]byte{snapshotFile: data})
	_, err := s.kube.CoreV1().Secrets(s.namespace).Apply(ctx, sec, metav1.ApplyOptions{FieldManager: "flotilla-agent", Force: true})
	return err
}

// restoreSnapshot puts the kept Works into mirror and, unless the control plane's are in
// force already (customized), the kept customizations; it says whether it restored those.
func (a *Agent) restoreSnapshot(ctx context.Context, mirror *workstore.Store, customized bool) (bool, error) {
	raw, err := a.id.store.readSnapshot(ctx)
	if err != nil || raw == nil {
		return false, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return false, err
	}
	var snap snapshot
	if err := json.NewDecoder(io.LimitReader(zr, 512<<20)).Decode(&snap); err != nil {
		return false, err
	}
	for _, w := range snap.Works {
		if err := mirror.Mirror(w); err != nil {
			return false, err
		}
	}
	if snap.Customizations == nil || customized {
		return false, nil
	}
	a.customizationsMu.Lock()
	defer a.customizationsMu.Unlock()
	if err := customization.Load(ctx, listed{snap.Customizations}, a.interpreters); err != nil {
		return false, err
	}
	a.lastCustomizations = snap.Customizations
	for _, c := range snap.Customizations.Items {
		a.customizations[c.Name] = true
	}
	return true, nil
}

// keepSnapshots writes the snapshot again whenever the mirror changed, at most every interval.
func (a *Agent) keepSnapshots(ctx context.Context, mirror *workstore.Store, interval time.Duration) {
	log := logf.FromContext(ctx).WithName("agent")
	changed := make(chan struct{}, 1)
	go func() {
		_ = mirror.Follow(ctx, func(*workv1alpha1.Work) bool { return true }, func(workstore.Event) error {
			select {
			case changed <- struct{}{}:
			default:
			}
			return nil
		})
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	dirty, failing := false, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			dirty = true
			continue
		case <-t.C:
		}
		if !dirty {
			continue
		}
		a.customizationsMu.Lock()
		snap := snapshot{Works: mirror.Snapshot(), Customizations: a.lastCustomizations}
		a.customizationsMu.Unlock()
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		err := json.NewEncoder(zw).Encode(&snap)
		if err == nil {
			err = zw.Close()
		}
		if err == nil {
			err = a.id.store.writeSnapshot(ctx, buf.Bytes())
		}
		switch {
		case err != nil && !failing:
			log.Error(err, "Keeping a snapshot of the Works for a restart while disconnected")
			failing = true
		case err == nil:
			dirty, failing = false, false
		}
	}
}
