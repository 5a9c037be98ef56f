// Package v1alpha1 holds the work.flotilla.dev API: ResourceBinding and ClusterResourceBinding, the scheduling result and
// aggregated status of one template, and Work, the rendered manifests of one binding for one
// member cluster. Both are written by Flotilla and readable by users. It depends only on
// k8s.io/apimachinery and k8s.io/api.
// +kubebuilder:object:generate=true
// +groupName=work.flotilla.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of this API.
var GroupVersion = schema.GroupVersion{Group: "work.flotilla.dev", Version: "v1alpha1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &ResourceBinding{}, &ResourceBindingList{}, &ClusterResourceBinding{}, &ClusterResourceBindingList{}, &Work{}, &WorkList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
