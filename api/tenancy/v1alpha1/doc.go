// Package v1alpha1 holds the tenancy.flotilla.dev API: the Team that turns a control-plane
// namespace into a team's space, naming who contributes and who reads there. It depends only
// on k8s.io/apimachinery and the policy group's bounded LabelSelector.
// +kubebuilder:object:generate=true
// +groupName=tenancy.flotilla.dev
package v1alpha1
