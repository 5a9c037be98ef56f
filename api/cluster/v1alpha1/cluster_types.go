package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SyncMode says how Flotilla delivers objects to a member.
// +kubebuilder:validation:Enum=Push;Pull
type SyncMode string

const (
	// SyncModePush: the controller-manager applies objects to the member's API server.
	SyncModePush SyncMode = "Push"
	// SyncModePull: flotilla-agent, in the member, dials the control plane, pulls its Works and
	// applies them; the control plane holds no credentials to the member.
	SyncModePull SyncMode = "Pull"
)

// TaintEffect is what a taint does to placements that do not tolerate it.
// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
type TaintEffect string

const (
	// TaintEffectNoSchedule: new placements avoid the cluster; existing ones stay.
	TaintEffectNoSchedule TaintEffect = "NoSchedule"
	// TaintEffectPreferNoSchedule: placements avoid the cluster when another fits.
	TaintEffectPreferNoSchedule TaintEffect = "PreferNoSchedule"
	// TaintEffectNoExecute: existing placements are moved off the cluster.
	TaintEffectNoExecute TaintEffect = "NoExecute"
)

// Condition types and reasons of a Cluster.
const (
	// ConditionReady is True while the member's API server answers its health probe.
	ConditionReady = "Ready"

	ReasonProbeSucceeded     = "ProbeSucceeded"
	ReasonProbeFailed        = "ProbeFailed"
	ReasonCredentialsInvalid = "CredentialsInvalid"
	ReasonProbing            = "Probing"
	// A Pull member's Ready follows its agent: AgentConnected while it reports, AgentSilent
	// once it has not for the silence limit, AgentNotRegistered before it registers.
	ReasonAgentConnected     = "AgentConnected"
	ReasonAgentSilent        = "AgentSilent"
	ReasonAgentNotRegistered = "AgentNotRegistered"

	// ConditionShortNameUnique is False while another Cluster, joined earlier, has the same
	// spec.shortName; present only on Clusters that have a shortName.
	ConditionShortNameUnique = "ShortNameUnique"
	ReasonUnique             = "Unique"
	ReasonDuplicate          = "Duplicate"

	// ConditionDraining is set on an unjoined Cluster while its Works (in the
	// controller-manager's memory) are drained; its message counts those left.
	ConditionDraining = "Draining"
	ReasonDraining    = "Draining"

	// ConditionCredentialsRenewed is present when `flotilla join` made the member's identity
	// (a ServiceAccount token, renewed by the cluster controller, its only writer): False with
	// the reason when the last renewal failed, and when the token expires.
	ConditionCredentialsRenewed = "CredentialsRenewed"
	ReasonTokenRenewed          = "TokenRenewed"
	ReasonRenewalFailed         = "RenewalFailed"
)

// CredentialsSecretKey is the key, in the credentials Secret, of a kubeconfig for the member.
const CredentialsSecretKey = "kubeconfig"

// SecretReference names a Secret in the control plane.
type SecretReference struct {
	// namespace of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`

	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// Taint keeps placements off a cluster unless they tolerate it.
type Taint struct {
	// key of the taint, a qualified name like a label key.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Key string `json:"key"`

	// value of the taint, at most 63 characters like a label value.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	Value string `json:"value,omitempty"`

	// effect of the taint: NoSchedule, PreferNoSchedule or NoExecute.
	// +required
	Effect TaintEffect `json:"effect"`

	// timeAdded is when a NoExecute taint was added; set by Flotilla for taints it adds.
	// +optional
	TimeAdded *metav1.Time `json:"timeAdded,omitempty"`
}

// ClusterSpec is what a platform team declares about a member cluster.
// +kubebuilder:validation:XValidation:rule="self.syncMode == 'Pull' || (has(self.endpoint) && has(self.credentialsSecretRef))",message="spec.endpoint and spec.credentialsSecretRef are required with syncMode Push: they are how the controller-manager reaches the member (flotilla join writes them)"
// +kubebuilder:validation:XValidation:rule="self.syncMode != 'Pull' || (!has(self.endpoint) && !has(self.credentialsSecretRef))",message="spec.endpoint and spec.credentialsSecretRef must be empty with syncMode Pull: the member's agent dials the control plane, which holds no credentials to it (flotilla join NAME --mode Pull)"
type ClusterSpec struct {
	// endpoint is the https URL of the member's Kubernetes API server. It overrides the server
	// of the kubeconfig in the credentials Secret. Push only.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://')",message="spec.endpoint must be an https:// URL of the member's API server, for example https://10.0.0.1:6443"
	// +kubebuilder:validation:XValidation:rule="isURL(self)",message="spec.endpoint is not a valid URL; write it as https://HOST[:PORT]"
	Endpoint string `json:"endpoint,omitempty"`

	// credentialsSecretRef names the Secret whose `kubeconfig` key holds the credentials for the
	// member, in Flotilla's system namespace flotilla-system (where only the platform writes).
	// `flotilla join` writes it. Push only.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.namespace == 'flotilla-system'",message="spec.credentialsSecretRef.namespace: member credentials live in flotilla-system, where only the platform writes; a Secret elsewhere could be written by a namespace's users (flotilla join stores it there)"
	CredentialsSecretRef SecretReference `json:"credentialsSecretRef,omitzero"`

	// syncMode is how objects reach the member: Push (the controller-manager applies them) or
	// Pull (flotilla-agent in the member pulls and applies them; see status.agent).
	// +required
	SyncMode SyncMode `json:"syncMode"`

	// taints keep placements that do not tolerate them off the cluster.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +kubebuilder:validation:MaxItems=32
	Taints []Taint `json:"taints,omitempty"`

	// description says what the cluster is for, for people, tables and portals.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// shortName is a short name for tables and dashboards, unique in the fleet (a DNS label).
	// A second Cluster with the same shortName gets ShortNameUnique=False naming the first.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="spec.shortName must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit"
	ShortName string `json:"shortName,omitempty"`

	// environment is the stage the cluster serves (prod, staging, dev, edge...). Labels stay the
	// metadata policies select by; this is for people and inventories.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="spec.environment must be a DNS label, for example prod or staging"
	Environment string `json:"environment,omitempty"`

	// deletionPolicy says what happens to the objects Flotilla placed in the member when the
	// Cluster is deleted (`flotilla unjoin`): Orphan (default) leaves them running as they are,
	// Delete removes them, Release hands them back to unmanaged (Flotilla's marks stripped).
	// Either way the cluster's Works and its execution namespace on the control plane go.
	// +optional
	// +kubebuilder:validation:Enum=Orphan;Delete;Release
	DeletionPolicy ClusterDeletionPolicy `json:"deletionPolicy,omitempty"`
}

// ClusterDeletionPolicy is what unjoining does to the member's objects.
type ClusterDeletionPolicy string

// Cluster deletion policies.
const (
	ClusterDeletionOrphan  ClusterDeletionPolicy = "Orphan"
	ClusterDeletionDelete  ClusterDeletionPolicy = "Delete"
	ClusterDeletionRelease ClusterDeletionPolicy = "Release"
)

// Finalizer holds a deleted Cluster until its Works are drained (their member objects kept,
// deleted or released as spec.deletionPolicy says) and its execution namespace is gone.
const Finalizer = "cluster.flotilla.dev/cleanup"

// APIResource is one resource a member serves.
type APIResource struct {
	// name is the plural resource name, for example deployments.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// kind of the resource, for example Deployment.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Kind string `json:"kind"`
}

// APIEnablement is the set of resources a member serves in one group version.
type APIEnablement struct {
	// groupVersion such as apps/v1, or v1 for the core group.
	// +required
	// +kubebuilder:validation:MaxLength=316
	GroupVersion string `json:"groupVersion"`

	// resources served in the group version, sorted by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	Resources []APIResource `json:"resources,omitempty"`
}

// NodeSummary counts the member's nodes.
type NodeSummary struct {
	// total number of nodes.
	// +optional
	Total int32 `json:"total"`

	// ready is the number of nodes whose Ready condition is True.
	// +optional
	Ready int32 `json:"ready"`
}

// ResourceUsage is requested over allocatable, as a percentage, for printer columns.
type ResourceUsage struct {
	// cpu requested by pods over allocatable CPU of ready nodes, e.g. "12%".
	// +optional
	// +kubebuilder:validation:MaxLength=16
	CPU string `json:"cpu,omitempty"`

	// memory requested by pods over allocatable memory of ready nodes, e.g. "40%".
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Memory string `json:"memory,omitempty"`

	// pods running over allocatable pods of ready nodes, e.g. "3%".
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Pods string `json:"pods,omitempty"`
}

// ResourceSummary is the member's capacity as the scheduler sees it.
type ResourceSummary struct {
	// allocatable is the sum over ready nodes of their allocatable cpu, memory and pods.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`

	// requested is the sum of the requests of pods bound to nodes and not finished, with pods
	// counting one each.
	// +optional
	Requested corev1.ResourceList `json:"requested,omitempty"`

	// usage is requested over allocatable, in percent.
	// +optional
	Usage ResourceUsage `json:"usage,omitempty"`
}

// ClusterStatus is what Flotilla observes of a member.
type ClusterStatus struct {
	// conditions: Ready is True while the member answers its health probe; its reason and
	// message say why not.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// lastProbeTime is when the member was last probed. It is refreshed at least once a
	// minute while nothing else changes, to keep control-plane writes few.
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`

	// kubernetesVersion the member's API server reports, e.g. v1.37.2.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// apiEnablements lists the resources the member serves, from its discovery.
	// +optional
	// +listType=map
	// +listMapKey=groupVersion
	// +kubebuilder:validation:MaxItems=512
	APIEnablements []APIEnablement `json:"apiEnablements,omitempty"`

	// nodeSummary counts the member's nodes.
	// +optional
	NodeSummary *NodeSummary `json:"nodeSummary,omitempty"`

	// resourceSummary is allocatable versus requested cpu, memory and pods.
	// +optional
	ResourceSummary *ResourceSummary `json:"resourceSummary,omitempty"`

	// agent is the identity and liveness of a Pull member's flotilla-agent.
	// +optional
	Agent *AgentStatus `json:"agent,omitempty"`
}

// AgentStatus is what the control plane knows of a Pull member's agent.
type AgentStatus struct {
	// identity is the user the agent's client certificate names, flotilla:agent:CLUSTER.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Identity string `json:"identity,omitempty"`

	// certificateSHA256 is the fingerprint of the one client certificate accepted for the
	// cluster; registering again replaces it (and so revokes the previous one).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	CertificateSHA256 string `json:"certificateSHA256,omitempty"`

	// previousCertificateSHA256 is the certificate a renewal replaced: still accepted until the
	// agent first presents the renewed one (its open connections carry the old one), so a
	// renewal never locks an agent out. Registering again clears it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PreviousCertificateSHA256 string `json:"previousCertificateSHA256,omitempty"`

	// registeredAt is when the agent registered with a bootstrap token.
	// +optional
	RegisteredAt *metav1.Time `json:"registeredAt,omitempty"`

	// certificateNotAfter is when the agent's certificate expires.
	// +optional
	CertificateNotAfter *metav1.Time `json:"certificateNotAfter,omitempty"`

	// lastSeen is when the agent last reached the control plane (refreshed about every 10 s
	// while it is connected).
	// +optional
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`

	// version of the agent.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`
}

// Cluster is a member cluster registered with the control plane. Its metadata labels
// (region, zone, env, ...) are what placement policies select on.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=flotilla
// +kubebuilder:printcolumn:name="Short",type=string,JSONPath=`.spec.shortName`
// +kubebuilder:printcolumn:name="Env",type=string,JSONPath=`.spec.environment`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.kubernetesVersion`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.syncMode`
// +kubebuilder:printcolumn:name="Last-Seen",type=date,JSONPath=`.status.agent.lastSeen`,priority=1
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodeSummary.ready`
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=`.status.resourceSummary.usage.cpu`,priority=1
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.status.resourceSummary.usage.memory`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Description",type=string,JSONPath=`.spec.description`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters (a DNS label)"
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the platform team declares.
	// +required
	Spec ClusterSpec `json:"spec"`

	// status is what Flotilla observes.
	// +optional
	Status ClusterStatus `json:"status,omitempty"`
}

// ClusterList is a list of Clusters.
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cluster `json:"items"`
}
