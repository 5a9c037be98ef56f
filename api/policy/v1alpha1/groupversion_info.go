// Package v1alpha1 holds the policy.flotilla.dev API: PropagationPolicy and
// ClusterPropagationPolicy, which say where templates run and how their replicas divide, and
// OverridePolicy and ClusterOverridePolicy, which say what differs per cluster. It
// depends only on k8s.io/apimachinery and k8s.io/api.
// +kubebuilder:object:generate=true
// +groupName=policy.flotilla.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of this API.
var GroupVersion = schema.GroupVersion{Group: "policy.flotilla.dev", Version: "v1alpha1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&PropagationPolicy{}, &PropagationPolicyList{},
		&ClusterPropagationPolicy{}, &ClusterPropagationPolicyList{},
		&OverridePolicy{}, &OverridePolicyList{},
		&ClusterOverridePolicy{}, &ClusterOverridePolicyList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
