package localfleet

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestABusyFleetIsAskedAgain: an etcd timeout passed on by a member apiserver (what a hundred
// members starting at once gave) is tried again until it passes; an error a retry cannot mend
// is returned at once.
func TestABusyFleetIsAskedAgain(t *testing.T) {
	calls := 0
	err := whileBusy(context.Background(), func() error {
		calls++
		if calls < 3 {
			return apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("busy twice, then fine: got %v after %d calls, want nil after 3", err, calls)
	}

	calls = 0
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "n", nil)
	if err := whileBusy(context.Background(), func() error { calls++; return invalid }); err != invalid || calls != 1 {
		t.Fatalf("an invalid object: got %v after %d calls, want it returned after 1", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls = 0
	timeout := apierrors.NewServerTimeout(schema.GroupResource{Resource: "nodes"}, "create", 1)
	if err := whileBusy(ctx, func() error { calls++; return timeout }); err != timeout || calls != 1 {
		t.Fatalf("a cancelled context: got %v after %d calls, want the last error after 1", err, calls)
	}
}
