package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

// Condition types of bindings and works.
const (
	// ConditionScheduled: the binding's clusters are chosen.
	ConditionScheduled = "Scheduled"
	// ConditionApplied: the manifests are applied in the member(s).
	ConditionApplied = "Applied"
	// ConditionHealthy: the workload is healthy in every cluster.
	ConditionHealthy = "Healthy"
	// ConditionInterpreted: every interpreter call for the object succeeded; False names the
	// failing customization, operation and Lua error.
	ConditionInterpreted = "Interpreted"
	// ConditionDrifted: a member object differs from what Flotilla applied and the policy's
	// driftCorrection mode is Report; the message names the cluster, the object and the fields.
	ConditionDrifted = "Drifted"
)

// Drift modes of DriftCorrection.mode; Correct when unset.
const (
	DriftCorrect = "Correct"
	DriftReport  = "Report"
)

// DriftCorrection is the policy's driftCorrection, copied into the binding by the detector and
// into each Work by the binding controller.
type DriftCorrection struct {
	// mode is Correct (put the member object back) or Report (only say so).
	// +optional
	// +kubebuilder:validation:Enum=Correct;Report
	Mode string `json:"mode,omitempty"`

	// ignoreFields are JSON pointers to fields that are never drift.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^(/([^/~]|~[01])*)+$`
	IgnoreFields []string `json:"ignoreFields,omitempty"`
}

// DriftStatus is what the executor found changed by hand in one member.
type DriftStatus struct {
	// corrections counts the drifts put back in this member.
	// +optional
	Corrections int64 `json:"corrections,omitempty"`
	// lastCorrectionTime is when drift was last put back.
	// +optional
	LastCorrectionTime *metav1.Time `json:"lastCorrectionTime,omitempty"`
	// objects differ from the manifests: as they are now under Report, as they were at the
	// last correction under Correct.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Objects []DriftedObject `json:"objects,omitempty"`
}

// DriftedObject is one member object and the fields in which it drifted.
type DriftedObject struct {
	// +required
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// fields are JSON pointers to the fields that differ.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	Fields []string `json:"fields,omitempty"`
}

// Health of a workload in one cluster or overall.
// +kubebuilder:validation:Enum=Healthy;Progressing;Degraded;Unknown
type Health string

const (
	HealthHealthy     Health = "Healthy"
	HealthProgressing Health = "Progressing"
	HealthDegraded    Health = "Degraded"
	HealthUnknown     Health = "Unknown"
)

// Labels and annotations Flotilla puts on the objects it manages.
const (
	// ManagedByLabel marks member objects applied by Flotilla.
	ManagedByLabel = "work.flotilla.dev/managed-by"
	// ManagedByValue is the value of ManagedByLabel.
	ManagedByValue = "flotilla"
	// WorkNamespaceAnnotation and WorkNameAnnotation name the Work a member object came from.
	WorkNamespaceAnnotation = "work.flotilla.dev/work-namespace"
	WorkNameAnnotation      = "work.flotilla.dev/work-name"
	// ManifestHashAnnotation on a member object is the hash of the Work manifest it was last
	// applied from: a controller-manager that has no record of its own applies (just
	// restarted) does not apply an object that already holds its manifest.
	ManifestHashAnnotation = "work.flotilla.dev/manifest-hash"
	// BindingLabel on a Work names its binding as namespace.name.
	BindingNamespaceLabel = "work.flotilla.dev/binding-namespace"
	BindingNameLabel      = "work.flotilla.dev/binding-name"
	// ClusterLabel on a Work names its member cluster.
	ClusterLabel = "work.flotilla.dev/cluster"
	// RevisionLabel on a Work is the template revision it renders, when revisions are tracked.
	RevisionLabel = "work.flotilla.dev/revision"
)

// ObjectReference names a template in the control plane.
type ObjectReference struct {
	// apiVersion of the template.
	// +required
	// +kubebuilder:validation:MaxLength=316
	APIVersion string `json:"apiVersion"`
	// kind of the template.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// namespace of the template; empty for cluster-scoped templates.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// name of the template.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid of the template.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid,omitempty"`
}

// PolicyReference names the policy that placed a template.
type PolicyReference struct {
	// kind is PropagationPolicy or ClusterPropagationPolicy.
	// +required
	// +kubebuilder:validation:Enum=PropagationPolicy;ClusterPropagationPolicy
	Kind string `json:"kind"`
	// namespace of a PropagationPolicy.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// name of the policy.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// TargetCluster is one cluster of a scheduling result.
type TargetCluster struct {
	// name of the cluster.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// replicas the cluster runs; 0 for kinds without replicas.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas,omitempty"`
}

// ResourceBindingSpec is derived; users never write it (admission refuses them). Its writers,
// one per field:
//   - the detector: resource, policyRef, replicas, templateHash, templateGeneration,
//     deletionPolicy, conflictResolution, propagateDeps, group, driftCorrection (from the
//     policy), and suspend and unmanagedClusters (from the template's switch annotations);
//   - the scheduler: clusters;
//   - the release controller: revisions;
//   - failover: failedClusters (the binding controller's application failover);
//     gracefulEvictionTasks is the one field with two writers (the scheduler opens a task when
//     it moves a cluster's replicas away, the binding controller's failover opens them for
//     application failover and closes them all), serialized by optimistic locking.
type ResourceBindingSpec struct {
	// resource is the template this binding places.
	// +required
	Resource ObjectReference `json:"resource"`

	// policyRef is the policy that placed the template.
	// +required
	PolicyRef PolicyReference `json:"policyRef"`

	// replicas is the template's replica count; 0 for kinds without replicas.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas,omitempty"`

	// templateHash is a hash of the template's content; a change re-renders the Works.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TemplateHash string `json:"templateHash,omitempty"`

	// templateGeneration is the template's metadata.generation: it moves on spec changes only,
	// not on labels or annotations.
	// +optional
	TemplateGeneration int64 `json:"templateGeneration,omitempty"`

	// deletionPolicy from the policy: Delete or Orphan the member objects when they stop
	// being placed.
	// +optional
	// +kubebuilder:validation:Enum=Delete;Orphan
	DeletionPolicy string `json:"deletionPolicy,omitempty"`

	// conflictResolution from the policy: Abort or Overwrite.
	// +optional
	// +kubebuilder:validation:Enum=Abort;Overwrite
	ConflictResolution string `json:"conflictResolution,omitempty"`

	// propagateDeps from the policy: the ConfigMaps, Secrets, ServiceAccount and PVCs the
	// template's pods reference travel in its Works, before it.
	// +optional
	PropagateDeps bool `json:"propagateDeps,omitempty"`

	// group is "KEY=VALUE" when the policy groups templates by a label (groupBy): bindings
	// with the same group are scheduled to the same clusters with the same division.
	// +optional
	// +kubebuilder:validation:MaxLength=380
	Group string `json:"group,omitempty"`

	// revisions say which revision of the template each cluster renders; written by the
	// release controller when the policy has a rollout. Unset: every cluster renders the
	// template as it is now.
	// +optional
	Revisions *Revisions `json:"revisions,omitempty"`

	// clusters is the scheduling result.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	Clusters []TargetCluster `json:"clusters,omitempty"`

	// gracefulEvictionTasks keep a cluster's old placement after the scheduler moved its
	// replicas away (cluster or application failover), until the replacements are available
	// or the task times out; written by the scheduler and the failover logic of the binding
	// controller.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=1000
	GracefulEvictionTasks []GracefulEvictionTask `json:"gracefulEvictionTasks,omitempty"`

	// failedClusters are clusters where the workload failed over (application failover): the
	// scheduler does not place it there again until the template changes.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=1000
	FailedClusters []FailedCluster `json:"failedClusters,omitempty"`

	// suspend stops Flotilla's writes to members without deleting anything: every cluster
	// when dispatching is true, else the listed clusters. Status is still reported. Copied by
	// the detector from the template's work.flotilla.dev/suspend annotation (the user's switch).
	// +optional
	Suspend *Suspension `json:"suspend,omitempty"`

	// unmanagedClusters lists clusters whose object was handed back to unmanaged: Flotilla's
	// labels, annotations and field manager are removed there and the object and its pods are
	// left running; Flotilla no longer writes to it. Copied by the detector from the
	// template's work.flotilla.dev/unmanaged annotation (the user's switch).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	UnmanagedClusters []string `json:"unmanagedClusters,omitempty"`

	// driftCorrection from the policy: what happens when a member object is changed by hand.
	// +optional
	DriftCorrection *DriftCorrection `json:"driftCorrection,omitempty"`

	// dependsOn from the policy, each with its namespace filled in: the templates that must
	// run Healthy in a cluster before this one is first applied there.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	DependsOn []policyv1alpha1.DependencySelector `json:"dependsOn,omitempty"`
}

// Suspension says where Flotilla's writes are suspended.
type Suspension struct {
	// dispatching suspends every cluster.
	// +optional
	Dispatching bool `json:"dispatching,omitempty"`
	// clusters suspends only these.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	Clusters []string `json:"clusters,omitempty"`
}

// Suspended reports whether writes to cluster are suspended.
func (s *ResourceBindingSpec) Suspended(cluster string) bool {
	if s.Suspend == nil {
		return false
	}
	return s.Suspend.Dispatching || slices.Contains(s.Suspend.Clusters, cluster)
}

// Eviction reasons and purge modes.
const (
	EvictionReasonClusterFailover     = "ClusterFailover"
	EvictionReasonApplicationFailover = "ApplicationFailover"
	PurgeGraceful                     = "Graceful"
	PurgeImmediately                  = "Immediately"
	PurgeNever                        = "Never"
)

// GracefulEvictionTask keeps one cluster's old placement while its replacement comes up.
type GracefulEvictionTask struct {
	// cluster the replicas were moved off.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Cluster string `json:"cluster"`
	// replicas the cluster ran when it was evicted.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// reason: ClusterFailover or ApplicationFailover.
	// +required
	// +kubebuilder:validation:Enum=ClusterFailover;ApplicationFailover
	Reason string `json:"reason"`
	// message says what happened.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// purgeMode: Graceful (removed once the replacements are available or after
	// gracePeriodSeconds), Immediately, Never (kept until the template changes).
	// +required
	// +kubebuilder:validation:Enum=Graceful;Immediately;Never
	PurgeMode string `json:"purgeMode"`
	// gracePeriodSeconds after which a Graceful task is removed even if the replacements are
	// not available.
	// +optional
	GracePeriodSeconds int32 `json:"gracePeriodSeconds,omitempty"`
	// creationTimestamp is when the eviction started.
	// +required
	CreationTimestamp metav1.Time `json:"creationTimestamp"`
}

// FailedCluster is a cluster the workload failed over from.
type FailedCluster struct {
	// +required
	// +kubebuilder:validation:MaxLength=63
	Cluster string `json:"cluster"`
	// templateGeneration the workload had when it failed; a change of the template's spec
	// lifts the exclusion (labels and annotations do not).
	// +required
	TemplateGeneration int64 `json:"templateGeneration"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// +required
	Time metav1.Time `json:"time"`
}

// Excluded reports whether the scheduler must keep the workload off cluster.
func (s *ResourceBindingSpec) Excluded(cluster string) bool {
	for _, f := range s.FailedClusters {
		if f.Cluster == cluster && f.TemplateGeneration == s.TemplateGeneration {
			return true
		}
	}
	return false
}

// EvictionFor returns the eviction task of a cluster.
func (s *ResourceBindingSpec) EvictionFor(cluster string) (GracefulEvictionTask, bool) {
	for _, t := range s.GracefulEvictionTasks {
		if t.Cluster == cluster {
			return t, true
		}
	}
	return GracefulEvictionTask{}, false
}

// ClusterStatus is a template's status in one member.
type ClusterStatus struct {
	// cluster name.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Cluster string `json:"cluster"`
	// applied is true once the manifest is applied in the member.
	// +optional
	Applied bool `json:"applied,omitempty"`
	// health of the object in the member.
	// +optional
	Health Health `json:"health,omitempty"`
	// revision of the template applied in the member, when revisions are tracked; health and
	// status are of this revision.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// canaryHealth is the health of the cluster's canary, when it runs one as applied now.
	// +optional
	CanaryHealth Health `json:"canaryHealth,omitempty"`
	// canaryAvailableReplicas is how many of the canary's replicas are available in the
	// member, as its status last said; unset when the canary's kind reports no such count. A
	// routed release raises a canary's weight only once this reaches the replicas it pinned.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CanaryAvailableReplicas *int32 `json:"canaryAvailableReplicas,omitempty"`
	// message says why it is not applied or not healthy.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`
	// degradedSince is when the object turned Degraded in this cluster; application failover
	// counts its toleration from here (to the microsecond).
	// +optional
	DegradedSince *metav1.MicroTime `json:"degradedSince,omitempty"`
	// suspended: Flotilla's writes to this cluster are suspended.
	// +optional
	Suspended bool `json:"suspended,omitempty"`
	// waitingFor names the dependencies (spec.dependsOn) the template waits for before it is
	// first applied in this cluster, and why; empty once they run healthy or it runs there.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	WaitingFor string `json:"waitingFor,omitempty"`
	// waitingSince is when the template began waiting for waitingFor in this cluster.
	// +optional
	WaitingSince *metav1.Time `json:"waitingSince,omitempty"`
	// lost: the cluster is not Ready; a Duplicated workload stays placed there and counts as
	// lost until the cluster returns.
	// +optional
	Lost bool `json:"lost,omitempty"`
	// drift is what was changed by hand in this cluster: corrected, or reported (Report).
	// +optional
	Drift *DriftStatus `json:"drift,omitempty"`
	// status is the member object's status, as observed. One value to server-side apply: its
	// one writer replaces it whole, and tracking each of its fields would grow every binding's
	// managed fields with every member's status.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +mapType=atomic
	Status *runtime.RawExtension `json:"status,omitempty"`
	// lastApplied is what the executor last applied in the member. Works live in the
	// controller-manager's memory; after a restart this record keeps an unchanged render from
	// being applied again (which would undo a change reported under driftCorrection Report)
	// and lets what left the manifests meanwhile still be pruned.
	// +optional
	LastApplied *LastApplied `json:"lastApplied,omitempty"`
}

// LastApplied is what was last applied in one member.
type LastApplied struct {
	// hash of the manifests applied.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Hash string `json:"hash"`
	// objects applied.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Objects []AppliedObject `json:"objects,omitempty"`
	// replicas of the template as rendered for the cluster (an override may change the
	// scheduler's share), when it has replicas.
	// +optional
	Replicas *int64 `json:"replicas,omitempty"`
}

// ResourceBindingStatus is the aggregated view of the template across its clusters.
type ResourceBindingStatus struct {
	// conditions: Scheduled (the scheduler's outcome, from its ScheduleAnnotation), Applied,
	// Healthy, Interpreted, Drifted, and the kstatus summary; all written by the binding controller.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration of the binding.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// health overall: the worst of the clusters'.
	// +optional
	Health Health `json:"health,omitempty"`
	// clusters holds the status per member cluster.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=1000
	Clusters []ClusterStatus `json:"clusters,omitempty"`
	// dependencies are the bindings (NAMESPACE/NAME, or NAME for a ClusterResourceBinding)
	// spec.dependsOn resolved to when last looked at. Deleting follows the reverse order from
	// it: a dependency's objects leave a cluster only once this binding's have left it, so
	// the record must outlive the Application or template that named the dependency.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=317
	Dependencies []string `json:"dependencies,omitempty"`
}

// ResourceBinding is the placement of one namespaced template: the clusters and replicas the
// scheduler chose and the status gathered back from them.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rb,categories=flotilla
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.resource.kind`
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].status`
// +kubebuilder:printcolumn:name="Applied",type=string,JSONPath=`.status.conditions[?(@.type=="Applied")].status`
// +kubebuilder:printcolumn:name="Health",type=string,JSONPath=`.status.health`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policyRef.name`,priority=1
// +kubebuilder:printcolumn:name="Drift",type=string,JSONPath=`.spec.driftCorrection.mode`,priority=1
// +kubebuilder:printcolumn:name="Corrected-In",type=string,JSONPath=`.status.clusters[?(@.drift.corrections)].cluster`,priority=1
// +kubebuilder:printcolumn:name="Drifted",type=string,JSONPath=`.status.conditions[?(@.type=="Drifted")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ResourceBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the template, its policy and the scheduling result.
	// +required
	Spec ResourceBindingSpec `json:"spec"`

	// status is gathered from the members.
	// +optional
	Status ResourceBindingStatus `json:"status,omitempty"`
}

// ResourceBindingList is a list of ResourceBindings.
// +kubebuilder:object:root=true
type ResourceBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceBinding `json:"items"`
}

// Revisions pin clusters to template revisions.
type Revisions struct {
	// latest is the newest recorded revision: the template as it is now.
	// +required
	// +kubebuilder:validation:Minimum=1
	Latest int64 `json:"latest"`

	// stable is the revision every cluster without a pin renders; 0 while a staged first
	// release (rollout.stageFirstRevision) is in progress: a cluster without a pin then gets
	// nothing.
	// +required
	// +kubebuilder:validation:Minimum=0
	Stable int64 `json:"stable"`

	// canaries run beside a cluster's primary: replicas of a revision taken from its share.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=1000
	Canaries []CanaryPin `json:"canaries,omitempty"`

	// pins are the clusters a release moved to another revision.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=1000
	Pins []RevisionPin `json:"pins,omitempty"`

	// traffic names the Services and routes that carry this workload's traffic split, from the
	// policy's rollout (trafficRouting or blueGreen): the binding controller renders them with
	// each cluster's canary weight, header route and active stack.
	// +optional
	Traffic *TrafficTargets `json:"traffic,omitempty"`
}

// TrafficTargets are the objects a workload's traffic split is rendered into, all in its
// namespace.
type TrafficTargets struct {
	// stableService selects the primary's pods; canaryService the canary's (trafficRouting).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	StableService string `json:"stableService,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	CanaryService string `json:"canaryService,omitempty"`
	// httpRoute and virtualService carry the weights (trafficRouting).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	HTTPRoute string `json:"httpRoute,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	VirtualService string `json:"virtualService,omitempty"`
	// virtualServiceRoutes are the http routes set; all that send to stableService when empty.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	VirtualServiceRoutes []string `json:"virtualServiceRoutes,omitempty"`
	// activeService and previewService are a blue-green pair (blueGreen).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ActiveService string `json:"activeService,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	PreviewService string `json:"previewService,omitempty"`
}

// WorkName is the name of a binding's Work in every execution namespace: NAMESPACE.NAME, or
// cluster.NAME for a ClusterResourceBinding. Namespace names hold no dots, so two namespaced
// bindings never share a name (with a dash, shop/a-api and shop-a/api would); a namespace
// named "cluster" and a cluster binding would only meet for one kind of both scopes, which a
// kind never is (binding names end in the kind).
func WorkName(namespace, binding string) string {
	n := namespace + "." + binding
	if namespace == "" {
		n = "cluster." + binding
	}
	if len(n) > 253 {
		sum := sha256.Sum256([]byte(n))
		n = n[:240] + "-" + hex.EncodeToString(sum[:])[:12]
	}
	return n
}

// Routed says whether the workload's traffic goes through a route with weights.
func (t *TrafficTargets) Routed() bool {
	return t != nil && (t.HTTPRoute != "" || t.VirtualService != "")
}

// BlueGreen says whether the workload is released blue-green.
func (t *TrafficTargets) BlueGreen() bool { return t != nil && t.ActiveService != "" }

// RevisionPin makes one cluster render one revision.
type RevisionPin struct {
	// +required
	// +kubebuilder:validation:MaxLength=63
	Cluster string `json:"cluster"`
	// +required
	// +kubebuilder:validation:Minimum=1
	Revision int64 `json:"revision"`
}

// CanaryPin runs a canary of a revision in one cluster.
type CanaryPin struct {
	// +required
	// +kubebuilder:validation:MaxLength=63
	Cluster string `json:"cluster"`
	// +required
	// +kubebuilder:validation:Minimum=1
	Revision int64 `json:"revision"`
	// replicas of the canary, taken from the cluster's share; with traffic routing or
	// blue-green they come on top of it.
	// +required
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas"`
	// weight is the percentage of the cluster's requests the route sends to the canary
	// (traffic routing); the rest goes to the stable Service.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Weight *int32 `json:"weight,omitempty"`
	// headerMatch sends requests matching every header to the canary whatever the weight.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	HeaderMatch []policyv1alpha1.HeaderMatch `json:"headerMatch,omitempty"`
	// active: the active Service of a blue-green release selects this canary (the new stack).
	// +optional
	Active bool `json:"active,omitempty"`
}

// CanaryFor is the canary a cluster runs, if any.
func (r *Revisions) CanaryFor(cluster string) (CanaryPin, bool) {
	if r == nil {
		return CanaryPin{}, false
	}
	for _, c := range r.Canaries {
		if c.Cluster == cluster {
			return c, true
		}
	}
	return CanaryPin{}, false
}

// RevisionFor is the revision a cluster renders, 0 when revisions are not tracked.
func (r *Revisions) RevisionFor(cluster string) int64 {
	if r == nil {
		return 0
	}
	for _, p := range r.Pins {
		if p.Cluster == cluster {
			return p.Revision
		}
	}
	return r.Stable
}

// ClusterResourceBinding places one cluster-scoped template (a Namespace, a ClusterRole, a
// cluster-scoped custom resource); it is a ResourceBinding without a namespace.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=crb,categories=flotilla
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.resource.kind`
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].status`
// +kubebuilder:printcolumn:name="Applied",type=string,JSONPath=`.status.conditions[?(@.type=="Applied")].status`
// +kubebuilder:printcolumn:name="Health",type=string,JSONPath=`.status.health`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policyRef.name`,priority=1
// +kubebuilder:printcolumn:name="Drift",type=string,JSONPath=`.spec.driftCorrection.mode`,priority=1
// +kubebuilder:printcolumn:name="Corrected-In",type=string,JSONPath=`.status.clusters[?(@.drift.corrections)].cluster`,priority=1
// +kubebuilder:printcolumn:name="Drifted",type=string,JSONPath=`.status.conditions[?(@.type=="Drifted")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterResourceBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the template, its policy and the scheduling result.
	// +required
	Spec ResourceBindingSpec `json:"spec"`

	// status is gathered from the members.
	// +optional
	Status ResourceBindingStatus `json:"status,omitempty"`
}

// ClusterResourceBindingList is a list of ClusterResourceBindings.
// +kubebuilder:object:root=true
type ClusterResourceBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterResourceBinding `json:"items"`
}

// Binding is what the controllers need of either binding kind.
// +kubebuilder:object:generate=false
type Binding interface {
	metav1.Object
	runtime.Object
	BindingSpec() *ResourceBindingSpec
	BindingStatus() *ResourceBindingStatus
}

// BindingSpec returns the spec.
func (b *ResourceBinding) BindingSpec() *ResourceBindingSpec { return &b.Spec }

// BindingStatus returns the status.
func (b *ResourceBinding) BindingStatus() *ResourceBindingStatus { return &b.Status }

// BindingSpec returns the spec.
func (b *ClusterResourceBinding) BindingSpec() *ResourceBindingSpec { return &b.Spec }

// BindingStatus returns the status.
func (b *ClusterResourceBinding) BindingStatus() *ResourceBindingStatus { return &b.Status }

// NewBinding returns an empty binding of the kind that lives in namespace: a
// ClusterResourceBinding when it is empty.
func NewBinding(namespace, name string) Binding {
	if namespace == "" {
		return &ClusterResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	return &ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

// BindingGVK is the group, version and kind of a binding.
func BindingGVK(b Binding) schema.GroupVersionKind {
	if _, cluster := b.(*ClusterResourceBinding); cluster {
		return GroupVersion.WithKind("ClusterResourceBinding")
	}
	return GroupVersion.WithKind("ResourceBinding")
}

// BindingStatusManager is the field manager of binding status, which the binding controller
// alone writes.
const BindingStatusManager = "flotilla-binding"

// ScheduleAnnotation on a binding is the scheduler's outcome (a Schedule, as JSON), written
// in the same request as the clusters it chose: the binding controller reports it as the
// Scheduled condition in its one status write, instead of a status write of the scheduler's
// own per placement.
const ScheduleAnnotation = "work.flotilla.dev/schedule"

// Schedule is the scheduler's outcome for one binding.
type Schedule struct {
	// Placed: clusters were chosen (Scheduled=True); else Reason and Message say why not.
	Placed  bool   `json:"placed"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Generation of the binding the outcome is of.
	Generation int64 `json:"generation"`
}

// ScheduleOf reads a binding's ScheduleAnnotation; ok is false without one.
func ScheduleOf(b Binding) (Schedule, bool) {
	var s Schedule
	raw, found := b.GetAnnotations()[ScheduleAnnotation]
	if !found || json.Unmarshal([]byte(raw), &s) != nil {
		return Schedule{}, false
	}
	return s, true
}

// Manifest is one whole Kubernetes object.
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:validation:EmbeddedResource
type Manifest struct {
	runtime.RawExtension `json:",inline"`
}

// WorkSpec holds what is applied in one member. The last manifest is the template; earlier
// ones are its dependencies, applied first.
type WorkSpec struct {
	// manifests are the rendered objects, applied in order.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Manifests []Manifest `json:"manifests"`

	// deletionPolicy: Delete removes the member objects with the Work, Orphan leaves them,
	// Release leaves them and removes Flotilla's labels, annotations and field manager.
	// +optional
	// +kubebuilder:validation:Enum=Delete;Orphan;Release
	DeletionPolicy string `json:"deletionPolicy,omitempty"`

	// conflictResolution: Abort leaves an existing member object that is not Flotilla's
	// untouched; Overwrite adopts it.
	// +optional
	// +kubebuilder:validation:Enum=Abort;Overwrite
	ConflictResolution string `json:"conflictResolution,omitempty"`

	// suspend: the executor writes nothing to the member (no apply, no prune, no delete) and
	// keeps reporting status.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// driftCorrection: what the executor does when a member object is changed by hand.
	// +optional
	DriftCorrection *DriftCorrection `json:"driftCorrection,omitempty"`
}

// DriftMode is the Work's drift mode, Correct when unset.
func (s *WorkSpec) DriftMode() string {
	if s.DriftCorrection == nil || s.DriftCorrection.Mode == "" {
		return DriftCorrect
	}
	return s.DriftCorrection.Mode
}

// DeletionRelease on a Work hands its member objects back to unmanaged when it is deleted.
const DeletionRelease = "Release"

// WorkStatus is what the executor observed in the member.
type WorkStatus struct {
	// conditions: Applied, Interpreted, Drifted, and the kstatus summary Ready, Reconciling, Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// appliedHash is the hash of the manifests last applied, so unchanged Works are skipped.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	AppliedHash string `json:"appliedHash,omitempty"`
	// health of the template (the last manifest) in the member.
	// +optional
	Health Health `json:"health,omitempty"`
	// manifestStatus is the member status of the template (the last manifest).
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	ManifestStatus *runtime.RawExtension `json:"manifestStatus,omitempty"`
	// objects are the member objects last applied, with their health: an object that leaves
	// the manifests is removed from the member.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Objects []AppliedObject `json:"objects,omitempty"`
	// drift is what was changed by hand in the member: corrected, or reported (Report).
	// +optional
	Drift *DriftStatus `json:"drift,omitempty"`
}

// AppliedObject is one member object a Work applied.
type AppliedObject struct {
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
	// health of the object in the member.
	// +optional
	Health Health `json:"health,omitempty"`
	// message says why health or status could not be interpreted (a failing Lua customization).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
	// availableReplicas of a workload's canary (an object of the template's kind beside it),
	// as its status in the member says; unset for other objects and for kinds reporting no
	// such count.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AvailableReplicas *int32 `json:"availableReplicas,omitempty"`
}

// Work is the rendered manifests of one binding for one member cluster, in that cluster's
// execution namespace (flotilla-es-CLUSTER) of the control plane.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=flotilla
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels.work\.flotilla\.dev/cluster`
// +kubebuilder:printcolumn:name="Applied",type=string,JSONPath=`.status.conditions[?(@.type=="Applied")].status`
// +kubebuilder:printcolumn:name="Health",type=string,JSONPath=`.status.health`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Work struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the manifests.
	// +required
	Spec WorkSpec `json:"spec"`

	// status is observed in the member.
	// +optional
	Status WorkStatus `json:"status,omitempty"`
}

// WorkList is a list of Works.
// +kubebuilder:object:root=true
type WorkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Work `json:"items"`
}
