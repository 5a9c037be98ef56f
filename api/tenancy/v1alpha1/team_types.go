package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TeamName is the one name a Team may have: one Team per namespace.
const TeamName = "team"

// Names of what the team controller keeps in a team's namespace, and the ClusterRoles they grant.
const (
	ContributorRoleBinding = "flotilla-team-contributors"
	ReaderRoleBinding      = "flotilla-team-readers"
	ContributorClusterRole = "flotilla-contributor"
	ReaderClusterRole      = "flotilla-reader"
)

// Condition types and reasons of a Team.
const (
	// ConditionReady is True once the namespace's RoleBindings grant exactly what the Team says.
	ConditionReady = "Ready"

	ReasonRoleBindingsInSync = "RoleBindingsInSync"
	ReasonRoleBindingsFailed = "RoleBindingsFailed"
)

// TeamSpec names the groups that work in the team's namespace. Groups come from the control
// plane's own authentication: client-certificate organisations, or OIDC groups where the API
// server is set up for them.
type TeamSpec struct {
	// description says who the team is, for people and portals.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// contributors are groups that may create, change and delete the namespace's templates,
	// policies and analysis templates, and steer its releases (the flotilla-contributor role,
	// which aggregates Kubernetes' edit role).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Contributors []string `json:"contributors,omitempty"`

	// readers are groups that may only get, list and watch in the namespace (the
	// flotilla-reader role, which aggregates Kubernetes' view role).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Readers []string `json:"readers,omitempty"`

	// repositories are the git repositories the team's Applications may use, as URL globs
	// (path.Match: * matches within one path segment), e.g. https://git.example.com/team-a/*.
	// Unset allows no repository: Applications can then only carry inline manifests.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=2048
	// +kubebuilder:validation:items:XValidation:rule="self.startsWith('https://') || self.startsWith('http://') || self.startsWith('ssh://') || self.startsWith('git://') || self.matches('^[A-Za-z0-9._-]+@[A-Za-z0-9.*-]+:.+$')",message="repositories: each is an https://, http://, ssh://, git:// or git@host:path URL glob, as an Application's repoURL (file:// is not one)"
	Repositories []string `json:"repositories,omitempty"`

	// clusters limits the clusters the team's templates may run on; unset allows every cluster.
	// +optional
	Clusters *TeamClusters `json:"clusters,omitempty"`
}

// TeamClusters is where a team's templates may run.
type TeamClusters struct {
	// selector selects the allowed Clusters by their labels; the scheduler never places a
	// template of the team's namespace on another cluster, whatever its policy says, and the
	// binding's Scheduled condition names the clusters it left out.
	// +required
	Selector metav1.LabelSelector `json:"selector"`
}

// TeamStatus says whether the namespace's RoleBindings match the Team.
type TeamStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Team turns its namespace of the control plane into a team's space: its contributor groups
// may write there, its reader groups may read there, and nobody gets anything in another
// team's namespace (Kubernetes RBAC grants nothing by default). One per namespace, named team.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=flotilla
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'team'",message="a namespace holds one Team, named team: metadata.name must be team"
// +kubebuilder:printcolumn:name="Contributors",type=string,JSONPath=`.spec.contributors`
// +kubebuilder:printcolumn:name="Readers",type=string,JSONPath=`.spec.readers`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Description",type=string,JSONPath=`.spec.description`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Team struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TeamSpec `json:"spec"`

	// +optional
	Status TeamStatus `json:"status,omitempty"`
}

// TeamList is a list of Teams.
// +kubebuilder:object:root=true
type TeamList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Team `json:"items"`
}
