package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

// ReleasePhase is where a release stands.
// +kubebuilder:validation:Enum=Progressing;Paused;Succeeded;Aborted;RolledBack;Superseded
type ReleasePhase string

// Release phases.
const (
	ReleaseProgressing ReleasePhase = "Progressing"
	ReleasePaused      ReleasePhase = "Paused"
	ReleaseSucceeded   ReleasePhase = "Succeeded"
	// ReleaseAborted: stopped by `flotilla release abort`; updated clusters went back to stable.
	ReleaseAborted ReleasePhase = "Aborted"
	// ReleaseRolledBack: a wave's health or analysis failed and automatic rollback returned the
	// updated clusters to stable.
	ReleaseRolledBack ReleasePhase = "RolledBack"
	// ReleaseSuperseded: a newer revision's release took over.
	ReleaseSuperseded ReleasePhase = "Superseded"
)

// WavePhase is where a wave stands.
// +kubebuilder:validation:Enum=Pending;Updating;Baking;WaitingForApproval;Analyzing;Succeeded;Failed;RolledBack
type WavePhase string

// Wave phases.
const (
	WavePending            WavePhase = "Pending"
	WaveUpdating           WavePhase = "Updating"
	WaveBaking             WavePhase = "Baking"
	WaveWaitingForApproval WavePhase = "WaitingForApproval"
	WaveAnalyzing          WavePhase = "Analyzing"
	WaveSucceeded          WavePhase = "Succeeded"
	WaveFailed             WavePhase = "Failed"
	WaveRolledBack         WavePhase = "RolledBack"
)

// ClusterPhase is where one cluster of a wave stands.
// +kubebuilder:validation:Enum=Pending;Updating;Healthy;Degraded;RolledBack;Left
type ClusterPhase string

// Cluster phases.
const (
	ClusterPending    ClusterPhase = "Pending"
	ClusterUpdating   ClusterPhase = "Updating"
	ClusterHealthy    ClusterPhase = "Healthy"
	ClusterDegraded   ClusterPhase = "Degraded"
	ClusterRolledBack ClusterPhase = "RolledBack"
	// ClusterLeft: the cluster left the release: it left the placement (a failover evicted it,
	// it was tainted or removed, or the policy changed), or failover declared it lost while it
	// stays placed (tainted unreachable); the message says which. The release goes on without
	// it; it rejoins its wave if it returns.
	ClusterLeft ClusterPhase = "Left"
)

// BindingReference names the binding a release moves.
type BindingReference struct {
	// kind is ResourceBinding or ClusterResourceBinding.
	// +required
	// +kubebuilder:validation:Enum=ResourceBinding;ClusterResourceBinding
	Kind string `json:"kind"`

	// name of the binding; a ResourceBinding is in the release's namespace.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ReleaseSpec is a revision change and how to travel; the controls are written by
// `flotilla release`.
type ReleaseSpec struct {
	// binding whose revision pins this release moves.
	// +required
	Binding BindingReference `json:"binding"`

	// resource is the template, for people and tools.
	// +required
	Resource ResourceReference `json:"resource"`

	// revision is the revision being released.
	// +required
	// +kubebuilder:validation:Minimum=1
	Revision int64 `json:"revision"`

	// stableRevision is the revision the clusters run before, and return to on rollback; 0 for
	// a staged first release, whose rollback hands the clusters' objects back to unmanaged.
	// +required
	// +kubebuilder:validation:Minimum=0
	StableRevision int64 `json:"stableRevision"`

	// strategy is the policy's rollout section when the release started.
	// +required
	Strategy policyv1alpha1.RolloutStrategy `json:"strategy"`

	// paused holds the release where it is.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// abort returns every cluster the release updated to the stable revision.
	// +optional
	Abort bool `json:"abort,omitempty"`

	// promotedWave approves the gates (manual approval, bake time, analysis) of waves up to and
	// including this index.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PromotedWave *int32 `json:"promotedWave,omitempty"`

	// promotedStep passes one canary pause, named WAVE/INDEX (e.g. canary/1).
	// +optional
	// +kubebuilder:validation:MaxLength=80
	PromotedStep string `json:"promotedStep,omitempty"`

	// promoteFull updates every remaining cluster at once and skips every remaining gate; the
	// release then succeeds when they all run the revision healthy.
	// +optional
	PromoteFull bool `json:"promoteFull,omitempty"`

	// windowOverride passes the change windows that hold the release (those that allow
	// overrides), for an emergency change; written by `flotilla release promote
	// --override-window --reason TEXT` and recorded in history with who wrote it.
	// +optional
	WindowOverride *WindowOverride `json:"windowOverride,omitempty"`

	// retry, when raised above status.observedRetry, restarts an aborted or rolled-back release
	// from the wave that failed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Retry int32 `json:"retry,omitempty"`
}

// ResourceReference names a template.
type ResourceReference struct {
	// +required
	// +kubebuilder:validation:MaxLength=316
	APIVersion string `json:"apiVersion"`
	// +required
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ClusterRelease is one cluster of a wave.
type ClusterRelease struct {
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// +required
	Phase ClusterPhase `json:"phase"`
	// message says what the cluster waits for or why it failed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// traffic is the split the cluster's routes or active Service are rendered with, for a
	// release with trafficRouting or blueGreen: "stable 80% / canary 20%", "active → new stack".
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Traffic string `json:"traffic,omitempty"`
	// overriddenWindows are the change windows the cluster took the revision past, by the
	// release's spec.windowOverride.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=317
	OverriddenWindows []string `json:"overriddenWindows,omitempty"`
}

// WaveStatus is one wave of the release.
type WaveStatus struct {
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// +required
	Phase WavePhase `json:"phase"`
	// clusters of the wave, resolved when the wave starts.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Clusters []ClusterRelease `json:"clusters,omitempty"`
	// startedAt is when the wave's first cluster was updated.
	// +optional
	StartedAt *metav1.MicroTime `json:"startedAt,omitempty"`
	// currentStep is the index of the canary step in progress; the number of steps once they
	// are all done.
	// +optional
	CurrentStep int32 `json:"currentStep,omitempty"`
	// stepStartedAt is when the current step started (to the microsecond: a pause is never
	// shorter than it says).
	// +optional
	StepStartedAt *metav1.MicroTime `json:"stepStartedAt,omitempty"`
	// progressSince starts the wave's progress deadline: when its latest batch of clusters was
	// updated, or the release resumed.
	// +optional
	ProgressSince *metav1.MicroTime `json:"progressSince,omitempty"`
	// healthyAt is when every cluster of the wave first ran the revision healthy (to the
	// microsecond: the bake is measured from it and never ends early).
	// +optional
	HealthyAt *metav1.MicroTime `json:"healthyAt,omitempty"`
	// completedAt is when the wave's gates passed.
	// +optional
	CompletedAt *metav1.MicroTime `json:"completedAt,omitempty"`
	// analysisRun is the name of the wave's AnalysisRun.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	AnalysisRun string `json:"analysisRun,omitempty"`
	// trafficWeight is the canary weight, in percent, the wave's routes were set to (traffic
	// routing). A step raises it only once the canary's replicas for the new weight are
	// available in every cluster of the wave; a lower weight, abort and rollback take effect
	// at once. Written by the release controller.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	TrafficWeight *int32 `json:"trafficWeight,omitempty"`
	// message says what the wave waits for.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// ReleaseStatus is the release's progress.
type ReleaseStatus struct {
	// +optional
	Phase ReleasePhase `json:"phase,omitempty"`
	// currentWave is the index of the wave in progress; the number of waves once every wave
	// passed.
	// +optional
	CurrentWave int32 `json:"currentWave,omitempty"`
	// wave says where the release stands, for people and the WAVE column: "1/3 canary", with
	// the canary step inside a wave ("1/3 canary step 2/4"), "done" once it succeeded, and
	// "stopped at 2/3 early" once aborted, rolled back or superseded. Written by the release
	// controller with the rest of the status.
	// +optional
	// +kubebuilder:validation:MaxLength=160
	Wave string `json:"wave,omitempty"`
	// waves, in order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=17
	Waves []WaveStatus `json:"waves,omitempty"`
	// updatedClusters are the clusters this release moved to its revision: exactly those go
	// back on abort or rollback.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	UpdatedClusters []string `json:"updatedClusters,omitempty"`
	// overriddenWindows are the change windows the release passed by spec.windowOverride:
	// NAMESPACE/NAME of a ChangeWindow, NAME of a ClusterChangeWindow.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=317
	OverriddenWindows []string `json:"overriddenWindows,omitempty"`
	// backgroundAnalysisRun is the release-wide AnalysisRun.
	// +optional
	BackgroundAnalysisRun string `json:"backgroundAnalysisRun,omitempty"`
	// message says why the release is where it is.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// observedRetry is the spec.retry last acted on.
	// +optional
	ObservedRetry int32 `json:"observedRetry,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Release moves one template from its stable revision to a new one, wave by wave.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rel,categories=flotilla
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.resource.kind`
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.resource.name`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.spec.revision`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Wave",type=string,JSONPath=`.status.wave`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Release struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ReleaseSpec `json:"spec"`
	// +optional
	Status ReleaseStatus `json:"status,omitempty"`
}

// ReleaseList is a list of Releases.
// +kubebuilder:object:root=true
type ReleaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Release `json:"items"`
}
