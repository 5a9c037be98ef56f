package cli

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// conflictingClient serves binding and its template; the first `conflicts` writes of the
// template lose a race: someone else writes it first (here a scale) and the write gets a
// Conflict. writes counts every write the command attempted.
func conflictingClient(t *testing.T, binding *workv1alpha1.ResourceBinding, tmpl *appsv1.Deployment, conflicts int, writes *int) client.Client {
	t.Helper()
	lose := func(ctx context.Context, c client.WithWatch, obj client.Object) error {
		*writes++
		if *writes > conflicts {
			return nil
		}
		current := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
			return err
		}
		*current.Spec.Replicas++
		if err := c.Update(ctx, current); err != nil {
			return err
		}
		return apierrors.NewConflict(appsv1.Resource("deployments"), obj.GetName(), nil)
	}
	return fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(binding, tmpl).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := lose(ctx, c, obj); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := lose(ctx, c, obj); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
}

func webBinding(spec workv1alpha1.ResourceBindingSpec) *workv1alpha1.ResourceBinding {
	spec.Clusters = []workv1alpha1.TargetCluster{{Name: "east", Replicas: 2}, {Name: "west", Replicas: 2}}
	spec.Replicas = 4
	if spec.Resource.Kind == "" {
		spec.Resource = workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	}
	return &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-deployment"}, Spec: spec}
}

// annotatedTemplate is the template shop/web with annotations.
func annotatedTemplate(annotations map[string]string) *appsv1.Deployment {
	d := webTemplate("registry.example/web:1")
	d.Annotations = annotations
	return d
}

// suspend, unsuspend and unmanage write the template's switch annotations (the detector
// copies them into the binding) and retry a write that lost a race: the second attempt
// re-reads the template, so the switch lands and the other change survives, in exactly two
// writes.
func TestSyncSwitchesRetryOnConflict(t *testing.T) {
	tests := []struct {
		verb        string
		clusters    []string
		annotations map[string]string
		wantMsg     string
		wantSuspend *workv1alpha1.Suspension
		wantUnmgd   []string
	}{
		{verb: "suspend", clusters: []string{"west"}, wantMsg: "suspended in west", wantSuspend: &workv1alpha1.Suspension{Clusters: []string{"west"}}},
		{verb: "suspend", wantMsg: "suspended in every cluster", wantSuspend: &workv1alpha1.Suspension{Dispatching: true}},
		{verb: "unsuspend", clusters: []string{"east"}, annotations: map[string]string{workv1alpha1.SuspendAnnotation: "east,west"},
			wantMsg: "writes resumed in east", wantSuspend: &workv1alpha1.Suspension{Clusters: []string{"west"}}},
		{verb: "unsuspend", annotations: map[string]string{workv1alpha1.SuspendAnnotation: "*"}, wantMsg: "writes resumed in every cluster"},
		{verb: "unmanage", clusters: []string{"east"}, wantMsg: "handed back to unmanaged in east", wantUnmgd: []string{"east"}},
	}
	for _, tt := range tests {
		t.Run(tt.verb+" "+tt.wantMsg, func(t *testing.T) {
			writes := 0
			c := conflictingClient(t, webBinding(workv1alpha1.ResourceBindingSpec{}), annotatedTemplate(tt.annotations), 1, &writes)
			msg, err := switchSync(context.Background(), c, "deployment", "web", "shop", tt.clusters, switchNamed(t, tt.verb).apply)
			if err != nil {
				t.Fatal(err)
			}
			if msg != tt.wantMsg {
				t.Errorf("message %q, want %q", msg, tt.wantMsg)
			}
			if writes != 2 {
				t.Errorf("%d writes attempted, want 2 (one conflict, one retry)", writes)
			}
			got := &appsv1.Deployment{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "web"}, got); err != nil {
				t.Fatal(err)
			}
			suspend, unmanaged := workv1alpha1.SwitchesFrom(got.Annotations)
			if diff := cmp.Diff(tt.wantSuspend, suspend); diff != "" {
				t.Errorf("suspend (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantUnmgd, unmanaged); diff != "" {
				t.Errorf("unmanaged clusters (-want +got):\n%s", diff)
			}
			// The retry started from the other writer's change, not from the stale copy.
			if *got.Spec.Replicas != 5 {
				t.Errorf("replicas %d, want 5: the concurrent change was lost", *got.Spec.Replicas)
			}
		})
	}
}

// A binding that keeps changing under the command gives up after the retry budget with the
// conflict, and changes nothing.
func TestSyncSwitchGivesUpAfterRepeatedConflicts(t *testing.T) {
	writes := 0
	c := conflictingClient(t, webBinding(workv1alpha1.ResourceBindingSpec{}), annotatedTemplate(nil), 1000, &writes)
	_, err := switchSync(context.Background(), c, "deployment", "web", "shop", []string{"west"}, switchNamed(t, "suspend").apply)
	if !apierrors.IsConflict(err) {
		t.Fatalf("error = %v, want the conflict", err)
	}
	if writes != retry.DefaultRetry.Steps {
		t.Errorf("%d writes attempted, want %d", writes, retry.DefaultRetry.Steps)
	}
	got := &appsv1.Deployment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "web"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[workv1alpha1.SuspendAnnotation] != "" {
		t.Errorf("suspended (%q) after giving up", got.Annotations[workv1alpha1.SuspendAnnotation])
	}
}
