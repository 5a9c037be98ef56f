// Package v1alpha1 holds the apps.flotilla.dev API, the inventory layer above propagation: an
// Application is a named, labelled set of templates taken from git or written inline; a
// TargetPolicy (a team's) or ClusterTargetPolicy (the platform's) selects applications by label
// and clusters by label and yields their placement, through the PropagationPolicy machinery.
// +kubebuilder:object:generate=true
// +groupName=apps.flotilla.dev
package v1alpha1
