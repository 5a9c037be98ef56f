package kube

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// A policy change reaches exactly the bindings it placed, through the index: a namespaced
// policy its namespace's, a cluster-wide one its own in every namespace and its cluster-scoped.
func TestBindingsOfPolicy(t *testing.T) {
	rb := func(ns, name string, ref workv1alpha1.PolicyReference) *workv1alpha1.ResourceBinding {
		return &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: workv1alpha1.ResourceBindingSpec{PolicyRef: ref}}
	}
	pp := workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "web"}
	other := workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "db"}
	cpp := workv1alpha1.PolicyReference{Kind: "ClusterPropagationPolicy", Name: "web"}
	c := fake.NewClientBuilder().WithScheme(Scheme).
		WithIndex(&workv1alpha1.ResourceBinding{}, PolicyIndex, func(o client.Object) []string {
			ref := o.(workv1alpha1.Binding).BindingSpec().PolicyRef
			return []string{policyKey(ref.Kind, ref.Namespace, ref.Name)}
		}).
		WithIndex(&workv1alpha1.ClusterResourceBinding{}, PolicyIndex, func(o client.Object) []string {
			ref := o.(workv1alpha1.Binding).BindingSpec().PolicyRef
			return []string{policyKey(ref.Kind, ref.Namespace, ref.Name)}
		}).
		WithObjects(rb("shop", "a", pp), rb("shop", "b", other), rb("blog", "c", cpp),
			&workv1alpha1.ClusterResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: workv1alpha1.ResourceBindingSpec{PolicyRef: cpp}}).Build()
	names := func(o client.Object) []string {
		var out []string
		for _, r := range BindingsOfPolicy(context.Background(), c, o) {
			out = append(out, r.Namespace+"/"+r.Name)
		}
		return out
	}
	if got := names(&policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}); len(got) != 1 || got[0] != "shop/a" {
		t.Errorf("PropagationPolicy shop/web: %v, want [shop/a]", got)
	}
	if got := names(&policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web"}}); len(got) != 2 || got[0] != "blog/c" || got[1] != "/d" {
		t.Errorf("ClusterPropagationPolicy web: %v, want [blog/c /d]", got)
	}
}
