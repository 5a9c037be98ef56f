package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ApplicationLabel is on every template an Application produces, naming the Application; the
// placement generated for the application selects its templates by it.
const ApplicationLabel = "apps.flotilla.dev/application"

// RequestedAtAnnotation on an Application asks for a fetch now (flotilla app sync).
const RequestedAtAnnotation = "apps.flotilla.dev/requested-at"

// Condition types of Applications and target policies (the kstatus contract: Ready sums up,
// Reconciling while work is under way, Stalled when only a change of the input helps).
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
)

// Reasons of Application and target policy conditions.
const (
	ReasonApplied              = "Applied"
	ReasonFetching             = "Fetching"
	ReasonFetchFailed          = "FetchFailed"
	ReasonRevisionNotFound     = "RevisionNotFound"
	ReasonCredentialsInvalid   = "CredentialsInvalid"
	ReasonRenderFailed         = "RenderFailed"
	ReasonRepositoryNotAllowed = "RepositoryNotAllowed"
	ReasonNoTeam               = "NoTeam"
	ReasonObjectNotAllowed     = "ObjectNotAllowed"
	ReasonApplyFailed          = "ApplyFailed"
	ReasonSuspended            = "Suspended"
	// ReasonHeldByWindow: a change window holds the new render; the one in force stays.
	ReasonHeldByWindow       = "HeldByWindow"
	ReasonPlaced             = "Placed"
	ReasonNoTarget           = "NoTarget"
	ReasonTargetConflict     = "TargetConflict"
	ReasonClustersNotAllowed = "ClustersNotAllowed"
	// ReasonPolicyNameTaken: a policy of the generated placement's name exists and is not
	// Flotilla's for this Application.
	ReasonPolicyNameTaken = "PolicyNameTaken"
)

// ConditionDependenciesReady on an Application with dependsOn: True once every dependency
// runs healthy wherever the application is placed, False naming what it waits for (and
// since when), a dependency not found or not readable, or a cycle. Written by the
// application controller.
const ConditionDependenciesReady = "DependenciesReady"

// Reasons of the DependenciesReady condition.
const (
	ReasonDependenciesReady      = "DependenciesReady"
	ReasonWaitingForDependencies = "WaitingForDependencies"
	ReasonDependencyNotFound     = "DependencyNotFound"
	ReasonDependencyCycle        = "DependencyCycle"
)

// Manifest is one whole Kubernetes object.
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:validation:EmbeddedResource
type Manifest struct {
	runtime.RawExtension `json:",inline"`
}

// GitSource is a directory of a git repository at a branch, tag or commit.
type GitSource struct {
	// repoURL is the repository: https://, http://, ssh://, git:// or scp-like git@host:path.
	// The namespace's Team must list it in spec.repositories.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://') || self.startsWith('ssh://') || self.startsWith('git://') || self.matches('^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:.+$')",message="repoURL: use an https://, http://, ssh://, git:// or git@host:path URL"
	RepoURL string `json:"repoURL"`

	// revision is a branch, a tag or a full commit SHA; the remote's HEAD when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Revision string `json:"revision,omitempty"`

	// path is the directory in the repository, relative to its root: plain YAML files, or a
	// kustomization (remote bases are refused). The root when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(s, s == '..')",message="path: a directory relative to the repository root, without '..'"
	Path string `json:"path,omitempty"`

	// secretRef names a Secret in the Application's namespace with username and password,
	// or token, for HTTPS; or sshPrivateKey and knownHosts for SSH (host keys are always checked).
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// interval between polls of the repository; 1m when unset. A push webhook fetches at once.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="interval: at least 10s"
	Interval *metav1.Duration `json:"interval,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// InlineSource is manifests written in the Application itself.
type InlineSource struct {
	// manifests are whole objects; each becomes a template in the Application's namespace.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	Manifests []Manifest `json:"manifests"`
}

// ApplicationSource says where the templates come from: exactly one of git and inline.
// +kubebuilder:validation:XValidation:rule="has(self.git) != has(self.inline)",message="source: set exactly one of git and inline"
type ApplicationSource struct {
	// +optional
	Git *GitSource `json:"git,omitempty"`
	// +optional
	Inline *InlineSource `json:"inline,omitempty"`
}

// ApplicationSpec is an application of a team.
type ApplicationSpec struct {
	// description says what the application is, for people and portals.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// source of the application's templates.
	// +required
	Source ApplicationSource `json:"source"`

	// suspend stops fetching, applying and pruning; what is in force stays.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// dependsOn names the Applications this one needs running first: in each cluster, the
	// application's templates are first applied only once every template of each dependency
	// runs there Healthy at its current revision, and a release of them advances there only
	// then. A dependency not placed in a cluster holds the application in that cluster alone.
	// Another namespace counts only where the namespace's Team may read it (its contributors
	// may get ResourceBindings there); otherwise the application waits, told the dependency is
	// not found or not readable. A cycle is reported in the DependenciesReady condition.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	DependsOn []ApplicationDependency `json:"dependsOn,omitempty"`
}

// ApplicationDependency names an Application another one depends on.
type ApplicationDependency struct {
	// name of the Application.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// namespace of the Application; the depending Application's own when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`
}

// ApplicationObject is one template an Application produced.
type ApplicationObject struct {
	// +required
	// +kubebuilder:validation:MaxLength=316
	APIVersion string `json:"apiVersion"`
	// +required
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ApplicationStatus is what the application controller and the targeting controller observed.
// The application controller writes everything but the Placed condition and clusters, which
// the targeting controller writes (server-side apply of status, one field manager each).
type ApplicationStatus struct {
	// observedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready, Reconciling, Stalled (application controller); Placed (targeting).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// commit is the git commit whose render is in force.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Commit string `json:"commit,omitempty"`
	// lastFetchTime is when the commit in force was fetched.
	// +optional
	LastFetchTime *metav1.Time `json:"lastFetchTime,omitempty"`
	// objects are the templates in force; one that leaves the source is deleted, and its
	// placement's deletionPolicy decides what happens in the members.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Objects []ApplicationObject `json:"objects,omitempty"`
	// clusters the application is targeted at, by its target policies; none while it has no
	// templates in force (refused or not fetched yet: Ready says why, Placed names the
	// clusters its target policies select).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Clusters []string `json:"clusters,omitempty"`
	// targetPolicies that select the application: NAMESPACE/NAME for TargetPolicies, NAME for
	// ClusterTargetPolicies.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	TargetPolicies []string `json:"targetPolicies,omitempty"`
}

// Application is a named, labelled set of templates of a team, taken from a git repository or
// written inline. Its labels are its metadata: target policies select applications by them.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=flotilla,shortName=app
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Commit",type=string,JSONPath=`.status.commit`
// +kubebuilder:printcolumn:name="Clusters",type=string,JSONPath=`.status.clusters`
// +kubebuilder:printcolumn:name="Repo",type=string,JSONPath=`.spec.source.git.repoURL`,priority=1
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.spec.source.git.revision`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Dependencies",type=string,JSONPath=`.status.conditions[?(@.type=="DependenciesReady")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.dependsOn) || !self.spec.dependsOn.exists(d, d.name == self.metadata.name && !has(d.namespace))",message="spec.dependsOn: an Application may not depend on itself; name another Application"
type Application struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ApplicationSpec `json:"spec"`

	// +optional
	Status ApplicationStatus `json:"status,omitempty"`
}

// ApplicationList is a list of Applications.
// +kubebuilder:object:root=true
type ApplicationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Application `json:"items"`
}
