package release

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// The released Deployment's pod selector is read from the template as every controller reads
// templates, unstructured: a typed read would cache every Deployment template a second time.
func TestPodSelectorReadsTheTemplateUnstructured(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	var typed []string
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(d).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*unstructured.Unstructured); !ok {
				typed = append(typed, key.String())
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	ctl := &Controller{Client: c}
	for _, tc := range []struct {
		name string
		want map[string]string
	}{{"web", map[string]string{"app": "web"}}, {"gone", nil}} {
		rel := &rolloutv1alpha1.Release{Spec: rolloutv1alpha1.ReleaseSpec{Resource: rolloutv1alpha1.ResourceReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: tc.name}}}
		got, err := ctl.podSelector(context.Background(), rel)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s: selector (-want +got):\n%s", tc.name, d)
		}
	}
	if len(typed) > 0 {
		t.Errorf("typed reads of templates: %v", typed)
	}
}
