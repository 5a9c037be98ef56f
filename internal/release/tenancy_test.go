package release

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// A Release moves only its own namespace's bindings; cluster-scoped templates' releases live
// in flotilla-system.
func TestForeignTarget(t *testing.T) {
	rel := func(ns, bindingKind, resourceNS string) *rolloutv1alpha1.Release {
		return &rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"}, Spec: rolloutv1alpha1.ReleaseSpec{
			Binding:  rolloutv1alpha1.BindingReference{Kind: bindingKind, Name: "b"},
			Resource: rolloutv1alpha1.ResourceReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: resourceNS, Name: "x"},
		}}
	}
	ownBinding := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "b"},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{Namespace: "team-a"}}}
	forgedBinding := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "b"},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{Namespace: "team-b"}}}
	for _, tc := range []struct {
		name      string
		rel       *rolloutv1alpha1.Release
		b         workv1alpha1.Binding
		wantField string // empty: allowed
	}{
		{"own namespace", rel("team-a", "ResourceBinding", "team-a"), ownBinding, ""},
		{"cluster-scoped template in flotilla-system", rel("flotilla-system", "ClusterResourceBinding", ""), nil, ""},
		{"cluster binding from a tenant namespace", rel("team-a", "ClusterResourceBinding", ""), nil, "spec.binding"},
		{"resource of another namespace", rel("team-a", "ResourceBinding", "team-b"), nil, "spec.resource.namespace"},
		{"cluster binding with a namespaced resource", rel("flotilla-system", "ClusterResourceBinding", "team-a"), nil, "spec.resource.namespace"},
		{"binding whose template is elsewhere", rel("team-a", "ResourceBinding", "team-a"), forgedBinding, "spec.binding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := foreignTarget(tc.rel, tc.b)
			if tc.wantField == "" {
				if msg != "" {
					t.Fatalf("foreignTarget = %q, want none", msg)
				}
				return
			}
			if !strings.Contains(msg, tc.wantField) || !strings.Contains(msg, "no pin moves") {
				t.Fatalf("foreignTarget = %q, want it to name %s and say no pin moves", msg, tc.wantField)
			}
		})
	}
}
