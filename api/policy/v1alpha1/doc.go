// Package v1alpha1 holds the policy.flotilla.dev API: PropagationPolicy and
// ClusterPropagationPolicy, which say where templates run and how their replicas divide, and
// OverridePolicy and ClusterOverridePolicy, which say what differs per cluster. It
// depends only on k8s.io/apimachinery and k8s.io/api.
// +kubebuilder:object:generate=true
// +groupName=policy.flotilla.dev
package v1alpha1
