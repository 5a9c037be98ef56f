// Package v1alpha1 holds the tenancy.flotilla.dev API: the Team that turns a control-plane
// namespace into a team's space, naming who contributes and who reads there. It depends only
// on k8s.io/apimachinery and the policy group's bounded LabelSelector, so it can become a module
// of its own.
// +kubebuilder:object:generate=true
// +groupName=tenancy.flotilla.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of this API.
var GroupVersion = schema.GroupVersion{Group: "tenancy.flotilla.dev", Version: "v1alpha1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &Team{}, &TeamList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
