package inventory

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/match"
)

// byAffinity places a binding on every cluster the spec's affinity selects, one replica each.
type byAffinity struct{}

func (byAffinity) Preview(_ context.Context, _ workv1alpha1.Binding, spec *policyv1alpha1.PropagationSpec, clusters []clusterv1alpha1.Cluster) ([]workv1alpha1.TargetCluster, error) {
	var out []workv1alpha1.TargetCluster
	for _, c := range clusters {
		a := spec.Placement.ClusterAffinity
		if (a.LabelSelector != nil && match.Labels(a.LabelSelector, c.Labels)) || (a.LabelSelector == nil && slices.Contains(a.ClusterNames, c.Name)) {
			out = append(out, workv1alpha1.TargetCluster{Name: c.Name, Replicas: 1})
		}
	}
	return out, nil
}

func TestWhatIfTargetsPlansEachSelectedApplication(t *testing.T) {
	region := func(rs ...string) policyv1alpha1.LabelSelector {
		return policyv1alpha1.LabelSelector{MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "region", Operator: "In", Values: rs}}}
	}
	tier := func(v string) policyv1alpha1.LabelSelector {
		return policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"tier": policyv1alpha1.LabelValue(v)}}
	}
	app := func(ns, name, t string) *appsv1alpha1.Application {
		return &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"tier": t}},
			Status: appsv1alpha1.ApplicationStatus{Objects: []appsv1alpha1.ApplicationObject{{APIVersion: "apps/v1", Kind: "Deployment", Name: name}}}}
	}
	binding := func(ns, name string, ref workv1alpha1.PolicyReference, on ...string) workv1alpha1.ResourceBinding {
		b := workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-deployment"},
			Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}, PolicyRef: ref}}
		for _, c := range on {
			b.Spec.Clusters = append(b.Spec.Clusters, workv1alpha1.TargetCluster{Name: c, Replicas: 1})
		}
		return b
	}
	clusters := []clusterv1alpha1.Cluster{
		{ObjectMeta: metav1.ObjectMeta{Name: "east", Labels: map[string]string{"region": "us-east"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "west", Labels: map[string]string{"region": "us-west"}}},
	}
	stored := &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: region("us-east"), DeletionPolicy: policyv1alpha1.DeletionDelete}}
	objs := []client.Object{stored, app("shop", "web", "web"), app("shop", "api", "api"), app("other", "web", "web"), &clusters[0], &clusters[1]}
	bindings := []workv1alpha1.ResourceBinding{
		binding("shop", "web", workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "app-web"}, "east"),
		binding("shop", "api", workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "by-hand"}, "east"),
		binding("other", "web", workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "other", Name: "app-web"}, "east"),
	}
	s := &Server{Client: fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(objs...).Build(), Preview: byAffinity{}}

	cases := []struct {
		name     string
		proposed client.Object
		scope    []string
		want     []string // NAMESPACE/NAME +ADDED -REMOVED or !ERROR-PART
	}{
		{name: "widened: web gains west",
			proposed: &appsv1alpha1.TargetPolicy{ObjectMeta: stored.ObjectMeta, Spec: appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: region("us-east", "us-west")}},
			want:     []string{"shop/web +west"}},
		{name: "moved to api: web runs nowhere, api is planned with its generated policy",
			proposed: &appsv1alpha1.TargetPolicy{ObjectMeta: stored.ObjectMeta, Spec: appsv1alpha1.TargetSpec{AppSelector: tier("api"), ClusterSelector: region("us-west")}},
			want:     []string{"shop/api +west -east", "shop/web !Application shop/web: no TargetPolicy"}},
		{name: "a platform policy reaches only the namespaces in scope", scope: []string{"other"},
			proposed: &appsv1alpha1.ClusterTargetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "everywhere"}, Spec: appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: region("us-west")}},
			want:     []string{"other/web +west -east"}},
		{name: "a conflict names both policies", scope: []string{"shop"},
			proposed: &appsv1alpha1.ClusterTargetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "orphan-all"},
				Spec: appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: region("us-west"), DeletionPolicy: policyv1alpha1.DeletionOrphan}},
			want: []string{"shop/web !Application shop/web: target policies TargetPolicy shop/web and ClusterTargetPolicy orphan-all both set spec.deletionPolicy"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.scope == nil {
				c.scope = []string{"shop"}
			}
			out := WhatIf{}
			if err := s.whatIfTargets(context.Background(), &out, c.proposed, c.scope, bindings, clusters); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ch := range out.Changes {
				line := ch.Namespace + "/" + ch.Name
				if ch.Error != "" {
					line += " !" + ch.Error
				} else {
					if len(ch.Added) > 0 {
						line += " +" + strings.Join(ch.Added, ",")
					}
					if len(ch.Removed) > 0 {
						line += " -" + strings.Join(ch.Removed, ",")
					}
				}
				got = append(got, line)
			}
			if len(got) != len(c.want) {
				t.Fatalf("changes %q, want %q", got, c.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], c.want[i]) {
					t.Errorf("change %d: %q, want %q", i, got[i], c.want[i])
				}
			}
		})
	}
}
