// Package demo is what `flotilla demo` shows on the local fleet: a shop Deployment released in
// waves (east, then west, then the rest), each wave gated by a Prometheus analysis of the
// error rate of simulated traffic, whose errors depend on the image each member runs. A bad
// version is rolled back by itself after the first wave; a good one reaches every cluster.
//
// It owns the traffic simulator, the private Prometheus server and the demo's objects; it
// never drives a release itself (the controllers do).
package demo

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// Names of the demo's objects.
const (
	Namespace = "demo"
	App       = "shop"
)

// Images of the demo's three versions.
const (
	GoodImage   = "registry.example/shop:1.0"
	BadImage    = "registry.example/shop:1.1-bad"
	BetterImage = "registry.example/shop:1.2"
)

// ErrorRateQuery is the analysis query: the share of failed requests in the wave's clusters.
const ErrorRateQuery = `sum(rate(demo_requests_total{code="500",cluster=~"{{args.cluster-regex}}"}[5s])) / sum(rate(demo_requests_total{cluster=~"{{args.cluster-regex}}"}[5s]))`

// Objects are the demo's control-plane objects, in apply order.
func Objects(prometheusURL string) []client.Object {
	labels := map[string]string{"app": App}
	analysis := &rolloutv1alpha1.AnalysisTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "error-rate", Namespace: Namespace},
		Spec: rolloutv1alpha1.AnalysisTemplateSpec{
			Args: []rolloutv1alpha1.Argument{{Name: "cluster-regex"}},
			Metrics: []rolloutv1alpha1.Metric{{
				Name: "error-rate", InitialDelay: "6s", Interval: "2s", Count: ptr.To[int32](3),
				SuccessCondition: "result[0] < 0.05",
				Provider:         rolloutv1alpha1.MetricProvider{Prometheus: &rolloutv1alpha1.PrometheusMetric{Address: prometheusURL, Query: ErrorRateQuery}},
			}},
		},
	}
	gate := policyv1alpha1.Gates{Analysis: &policyv1alpha1.AnalysisGate{Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: "error-rate"}}}}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: App, Namespace: Namespace},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: App}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "canary", ClusterNames: []string{"east"}, Gates: gate},
				{Name: "west", ClusterNames: []string{"west"}, Gates: gate},
			}},
		},
	}
	shop := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: App, Namespace: Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: App, Image: GoodImage}}},
			},
		},
	}
	return []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, analysis, policy, shop}
}

// Apply creates the demo's objects, or brings them back to their first version.
func Apply(ctx context.Context, c client.Client, prometheusURL string) error {
	for _, o := range Objects(prometheusURL) {
		err := c.Create(ctx, o)
		if apierrors.IsAlreadyExists(err) {
			if _, isNS := o.(*corev1.Namespace); isNS {
				continue
			}
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := o.DeepCopyObject().(client.Object)
				if err := c.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
					return err
				}
				o.SetResourceVersion(cur.GetResourceVersion())
				return c.Update(ctx, o)
			})
		}
		if err != nil {
			return fmt.Errorf("applying %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// SetImage changes the shop's image in the control plane: a new revision, a new release.
// Flotilla writes the template's aggregated status meanwhile, so a conflict is retried.
func SetImage(ctx context.Context, c client.Client, image string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: App}, d); err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = image
		return c.Update(ctx, d)
	})
}
