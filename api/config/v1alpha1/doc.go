// Package v1alpha1 holds the config.flotilla.dev API: ResourceInterpreterCustomization, Lua
// scripts that teach Flotilla what any kind means (replicas, status, health, retained fields,
// dependencies). Its shape follows Karmada's customization so existing scripts port with only
// the apiVersion changed. It depends only on k8s.io/apimachinery.
// +kubebuilder:object:generate=true
// +groupName=config.flotilla.dev
package v1alpha1
