// Package v1alpha1 holds the apps.flotilla.dev API, the inventory layer above propagation: an
// Application is a named, labelled set of templates taken from git or written inline; a
// TargetPolicy (a team's) or ClusterTargetPolicy (the platform's) selects applications by label
// and clusters by label and yields their placement, through the PropagationPolicy machinery.
// +kubebuilder:object:generate=true
// +groupName=apps.flotilla.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of this API.
var GroupVersion = schema.GroupVersion{Group: "apps.flotilla.dev", Version: "v1alpha1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&Application{}, &ApplicationList{},
		&TargetPolicy{}, &TargetPolicyList{},
		&ClusterTargetPolicy{}, &ClusterTargetPolicyList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
