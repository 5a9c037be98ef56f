// Package v1alpha1 holds the cluster.flotilla.dev API: the Cluster object a platform team
// registers for each member. It depends only on k8s.io/apimachinery and k8s.io/api.
// +kubebuilder:object:generate=true
// +groupName=cluster.flotilla.dev
package v1alpha1
