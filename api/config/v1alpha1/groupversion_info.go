// Package v1alpha1 holds the config.flotilla.dev API: ResourceInterpreterCustomization, Lua
// scripts that teach Flotilla what any kind means (replicas, status, health, retained fields,
// dependencies). Its shape follows Karmada's customization so existing scripts port with only
// the apiVersion changed. It depends only on k8s.io/apimachinery.
// +kubebuilder:object:generate=true
// +groupName=config.flotilla.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of this API.
var GroupVersion = schema.GroupVersion{Group: "config.flotilla.dev", Version: "v1alpha1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &ResourceInterpreterCustomization{}, &ResourceInterpreterCustomizationList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
