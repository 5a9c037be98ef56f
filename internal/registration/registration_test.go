package registration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// Re-joining a cluster (a second `flotilla up` over kept state) races the controller-manager,
// which writes the Cluster as it starts: a conflict is read again and retried, keeping what the
// Cluster holds that the join does not set (taints, the deletion policy).
func TestRejoinRetriesAConflict(t *testing.T) {
	ctx := context.Background()
	stored := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "east"},
		Spec: clusterv1alpha1.ClusterSpec{Endpoint: "https://old:6443", SyncMode: clusterv1alpha1.SyncModePush, Description: "production, US East"}}
	conflicts := 0
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(stored).Build(), interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if _, ok := obj.(*clusterv1alpha1.Cluster); ok && conflicts == 0 {
				conflicts++
				// The controller-manager wrote the Cluster meanwhile (a taint, say).
				cur := &clusterv1alpha1.Cluster{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
					return err
				}
				cur.Spec.Taints = []clusterv1alpha1.Taint{{Key: "example.com/maintenance", Effect: clusterv1alpha1.TaintEffectNoSchedule}}
				if err := c.Update(ctx, cur); err != nil {
					return err
				}
				return apierrors.NewConflict(clusterv1alpha1.GroupVersion.WithResource("clusters").GroupResource(), obj.GetName(), nil)
			}
			return c.Update(ctx, obj, opts...)
		},
	})
	existing := &clusterv1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: "east"}, existing); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kube.SystemNamespace, Name: SecretName("east")}}
	got, err := writeCluster(ctx, c, existing, JoinOptions{Name: "east", Labels: map[string]string{"region": "use1"}}, "https://new:6443", secret)
	if err != nil {
		t.Fatalf("re-join after a conflict: %v", err)
	}
	if conflicts != 1 || got.Spec.Endpoint != "https://new:6443" || got.Labels["region"] != "use1" || got.Spec.Description != "production, US East" {
		t.Fatalf("after %d conflicts: %+v %v, want the new endpoint and labels, the description kept", conflicts, got.Spec, got.Labels)
	}
	if len(got.Spec.Taints) != 1 {
		t.Fatalf("taints %v: the controller-manager's taint written meanwhile was lost", got.Spec.Taints)
	}
}
