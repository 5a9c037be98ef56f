// Package v1alpha1 holds the work.flotilla.dev API: ResourceBinding and ClusterResourceBinding, the scheduling result and
// aggregated status of one template, and Work, the rendered manifests of one binding for one
// member cluster. Both are written by Flotilla and readable by users. It depends only on
// k8s.io/apimachinery and k8s.io/api.
// +kubebuilder:object:generate=true
// +groupName=work.flotilla.dev
package v1alpha1
