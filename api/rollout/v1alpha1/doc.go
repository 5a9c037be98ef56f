// Package v1alpha1 holds the rollout.flotilla.dev API: Release, one per template revision
// change, moving the binding's per-cluster revision pins wave by wave; and AnalysisTemplate,
// ClusterAnalysisTemplate and AnalysisRun, shaped like Argo Rollouts' so existing templates
// port with few changes. It depends only on k8s.io/apimachinery and the policy API.
// +kubebuilder:object:generate=true
// +groupName=rollout.flotilla.dev
package v1alpha1
