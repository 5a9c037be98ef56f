package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

// TargetSpec says which applications run on which clusters, and how. Several target policies
// may select one application: it runs on the union of their clusters; replicaScheduling and
// rollout must then agree (or be set by one of them), else nothing moves and the application's
// Placed condition names both policies and the field.
type TargetSpec struct {
	// appSelector selects Applications by their labels.
	// +required
	AppSelector policyv1alpha1.LabelSelector `json:"appSelector"`

	// clusterSelector selects Clusters by their labels. Relabelling a cluster moves placements.
	// +required
	ClusterSelector policyv1alpha1.LabelSelector `json:"clusterSelector"`

	// replicaScheduling divides or duplicates replicas over the clusters; Duplicated when unset.
	// +optional
	ReplicaScheduling *policyv1alpha1.ReplicaScheduling `json:"replicaScheduling,omitempty"`

	// overrideRules change the templates per cluster; the rules of every target policy that
	// selects an application apply, ordered by policy name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	OverrideRules []policyv1alpha1.OverrideRule `json:"overrideRules,omitempty"`

	// rollout releases each change of the applications' templates in waves.
	// +optional
	Rollout *policyv1alpha1.RolloutStrategy `json:"rollout,omitempty"`

	// deletionPolicy: what happens in the members when a template leaves the application or a
	// cluster leaves the selection: Delete (default) or Orphan.
	// +optional
	DeletionPolicy policyv1alpha1.DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// TargetStatus says what the policy selects now.
type TargetStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready (every selected application placed as the policy says).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// applications selected: NAMESPACE/NAME.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Applications []string `json:"applications,omitempty"`
	// clusters selected.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Clusters []string `json:"clusters,omitempty"`
}

// TargetPolicy places its namespace's applications by metadata: applications it selects by
// label run on the clusters it selects by label (within the namespace's Team's clusters).
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=flotilla,shortName=tp
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Apps",type=string,JSONPath=`.status.applications`
// +kubebuilder:printcolumn:name="Clusters",type=string,JSONPath=`.status.clusters`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TargetPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TargetSpec `json:"spec"`

	// +optional
	Status TargetStatus `json:"status,omitempty"`
}

// TargetPolicyList is a list of TargetPolicies.
// +kubebuilder:object:root=true
type TargetPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TargetPolicy `json:"items"`
}

// ClusterTargetPolicy is the platform's TargetPolicy: it selects applications of every
// namespace. Its placements are steered (releases, switches) only by those who may change
// ClusterPropagationPolicies, and its analysis gates run ClusterAnalysisTemplates only.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=flotilla,shortName=ctp
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Apps",type=string,JSONPath=`.status.applications`
// +kubebuilder:printcolumn:name="Clusters",type=string,JSONPath=`.status.clusters`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterTargetPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TargetSpec `json:"spec"`

	// +optional
	Status TargetStatus `json:"status,omitempty"`
}

// ClusterTargetPolicyList is a list of ClusterTargetPolicies.
// +kubebuilder:object:root=true
type ClusterTargetPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterTargetPolicy `json:"items"`
}
