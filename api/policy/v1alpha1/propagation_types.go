package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReplicaSchedulingType says whether every cluster runs all replicas or a share.
// +kubebuilder:validation:Enum=Duplicated;Divided
type ReplicaSchedulingType string

const (
	// ReplicaSchedulingDuplicated runs the full replica count in every selected cluster.
	ReplicaSchedulingDuplicated ReplicaSchedulingType = "Duplicated"
	// ReplicaSchedulingDivided divides the replica count over the selected clusters.
	ReplicaSchedulingDivided ReplicaSchedulingType = "Divided"
)

// DivisionPreference says how Divided replicas are shared.
// +kubebuilder:validation:Enum=Weighted;Aggregated
type DivisionPreference string

const (
	// DivisionWeighted divides by static weights or by available capacity.
	DivisionWeighted DivisionPreference = "Weighted"
	// DivisionAggregated packs replicas into as few clusters as fit them.
	DivisionAggregated DivisionPreference = "Aggregated"
)

// DynamicWeight is a weight computed from the clusters.
// +kubebuilder:validation:Enum=AvailableReplicas
type DynamicWeight string

// DynamicWeightAvailableReplicas weighs clusters by how many replicas still fit in them.
const DynamicWeightAvailableReplicas DynamicWeight = "AvailableReplicas"

// DeletionPolicy says what happens to member objects when their template, policy or cluster
// placement goes away.
// +kubebuilder:validation:Enum=Delete;Orphan
type DeletionPolicy string

const (
	// DeletionDelete removes the member objects.
	DeletionDelete DeletionPolicy = "Delete"
	// DeletionOrphan leaves the member objects in place, unmanaged.
	DeletionOrphan DeletionPolicy = "Orphan"
)

// ConflictResolution says what to do with a member object that exists and is not Flotilla's.
// +kubebuilder:validation:Enum=Abort;Overwrite
type ConflictResolution string

const (
	// ConflictAbort leaves the member object untouched and reports the conflict.
	ConflictAbort ConflictResolution = "Abort"
	// ConflictOverwrite adopts the member object.
	ConflictOverwrite ConflictResolution = "Overwrite"
)

// LabelSelectorOperator relates a label key to values.
// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
type LabelSelectorOperator string

// LabelSelectorRequirement is one expression of a label selector.
// +kubebuilder:validation:XValidation:rule="(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",message="In and NotIn need at least one value; Exists and DoesNotExist take none"
type LabelSelectorRequirement struct {
	// key is the label key: an optional DNS subdomain prefix and "/", then a name of up to 63
	// letters, digits, '-', '_' or '.', starting and ending with a letter or digit.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	Key string `json:"key"`

	// operator is In, NotIn, Exists or DoesNotExist.
	// +required
	Operator LabelSelectorOperator `json:"operator"`

	// values for In and NotIn.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	Values []string `json:"values,omitempty"`
}

// LabelValue is a label value: empty, or up to 63 letters, digits, '-', '_' or '.', starting
// and ending with a letter or digit. (A type of its own so that its length is bounded, which
// keeps the CEL check of every value in a map within the apiserver's cost budget.)
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="self.matches('^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')",message="a label value is empty or up to 63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit"
type LabelValue string

// LabelSelector is metav1.LabelSelector with bounds, so admission can check it cheaply.
type LabelSelector struct {
	// matchLabels are key=value pairs that must all match; keys and values follow Kubernetes'
	// label syntax.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="matchLabels: a key is an optional DNS prefix and '/', then up to 63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit (app, app.kubernetes.io/name)"
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`

	// matchExpressions must all match.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// AsMetav1 returns the selector as the Kubernetes type, for labels.SelectorFromSet and friends.
func (s *LabelSelector) AsMetav1() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{}
	if s.MatchLabels != nil {
		out.MatchLabels = make(map[string]string, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			out.MatchLabels[k] = string(v)
		}
	}
	for _, e := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: e.Key, Operator: metav1.LabelSelectorOperator(e.Operator), Values: e.Values,
		})
	}
	return out
}

// ResourceSelector selects templates by type and by name or labels.
// +kubebuilder:validation:XValidation:rule="!(has(self.name) && has(self.labelSelector))",message="name and labelSelector select the same thing two ways: give one of them"
type ResourceSelector struct {
	// apiVersion of the templates, e.g. apps/v1 or v1.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$`
	APIVersion string `json:"apiVersion"`

	// kind of the templates, e.g. Deployment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind"`

	// name selects one template by name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// namespace restricts a ClusterPropagationPolicy's selection to one namespace (a DNS
	// label, as namespaces are). A PropagationPolicy always selects in its own namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// labelSelector selects templates by labels; matchExpressions take the operators In,
	// NotIn, Exists and DoesNotExist.
	// +optional
	LabelSelector *LabelSelector `json:"labelSelector,omitempty"`
}

// DependencySelector selects templates that the policy's templates depend on, by type and by
// name or labels; apiVersion apps.flotilla.dev/v1alpha1 and kind Application with a name select
// every template that Application produced.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.labelSelector)",message="dependsOn: give exactly one of name and labelSelector"
// +kubebuilder:validation:XValidation:rule="!(self.apiVersion == 'apps.flotilla.dev/v1alpha1' && self.kind == 'Application') || has(self.name)",message="dependsOn: an Application is selected by name"
type DependencySelector struct {
	// apiVersion of the templates, e.g. apps/v1.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$`
	APIVersion string `json:"apiVersion"`

	// kind of the templates, e.g. StatefulSet.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind"`

	// name selects one template by name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// namespace of the templates; the depending template's own when unset. From a namespaced
	// template another namespace counts only where the template namespace's Team may read it;
	// otherwise the dependent waits, told the dependency is not found or not readable.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// labelSelector selects templates by labels.
	// +optional
	LabelSelector *LabelSelector `json:"labelSelector,omitempty"`
}

// ClusterAffinity selects clusters by name and labels.
// +kubebuilder:validation:XValidation:rule="has(self.clusterNames) || has(self.labelSelector) || has(self.exclude)",message="clusterAffinity selects nothing: give clusterNames, labelSelector or exclude"
type ClusterAffinity struct {
	// clusterNames lists clusters by name.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=63
	ClusterNames []string `json:"clusterNames,omitempty"`

	// labelSelector selects clusters by their labels.
	// +optional
	LabelSelector *LabelSelector `json:"labelSelector,omitempty"`

	// exclude lists clusters never selected, whatever else matches.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=63
	Exclude []string `json:"exclude,omitempty"`
}

// ClusterAffinityTerm is one entry of an ordered list of fallback affinities.
type ClusterAffinityTerm struct {
	// affinityName names the term, shown in the binding when it is the one in use.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	AffinityName string `json:"affinityName"`

	ClusterAffinity `json:",inline"`
}

// TolerationOperator compares a toleration with a taint.
// +kubebuilder:validation:Enum=Equal;Exists
type TolerationOperator string

const (
	// TolerationOpEqual matches a taint of the same key and value.
	TolerationOpEqual TolerationOperator = "Equal"
	// TolerationOpExists matches a taint of the key whatever its value (every taint without a key).
	TolerationOpExists TolerationOperator = "Exists"
)

// Toleration lets a placement onto clusters with a matching taint.
// +kubebuilder:validation:XValidation:rule="self.operator != 'Exists' || !has(self.value)",message="a toleration with operator Exists takes no value"
type Toleration struct {
	// key of the taint; empty with operator Exists tolerates every taint.
	// +optional
	// +kubebuilder:validation:MaxLength=316
	Key string `json:"key,omitempty"`

	// operator Equal matches the taint's key and value; Exists matches any value of the key.
	// +required
	Operator TolerationOperator `json:"operator"`

	// value the taint must have with operator Equal.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value,omitempty"`

	// effect tolerated; empty tolerates every effect.
	// +optional
	// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
	Effect string `json:"effect,omitempty"`
}

// SpreadByField is a built-in grouping of clusters.
// +kubebuilder:validation:Enum=cluster;region;zone
type SpreadByField string

// SpreadConstraint spreads a placement over groups of clusters.
// +kubebuilder:validation:XValidation:rule="has(self.spreadByField) != has(self.spreadByLabel)",message="give exactly one of spreadByField and spreadByLabel"
// +kubebuilder:validation:XValidation:rule="!has(self.maxGroups) || self.minGroups <= self.maxGroups",message="minGroups must not exceed maxGroups"
type SpreadConstraint struct {
	// spreadByField groups clusters by name, or by their region or zone label.
	// +optional
	SpreadByField SpreadByField `json:"spreadByField,omitempty"`

	// spreadByLabel groups clusters by the value of this label key.
	// +optional
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	SpreadByLabel string `json:"spreadByLabel,omitempty"`

	// minGroups is the least number of groups to place in.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MinGroups int32 `json:"minGroups"`

	// maxGroups is the most groups to place in; unlimited when unset.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxGroups int32 `json:"maxGroups,omitempty"`
}

// StaticClusterWeight gives the clusters an affinity selects a weight.
type StaticClusterWeight struct {
	// targetCluster selects the clusters this weight applies to.
	// +required
	TargetCluster ClusterAffinity `json:"targetCluster"`

	// weight of those clusters, 0 or more.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	Weight int64 `json:"weight"`
}

// WeightPreference says how Weighted division weighs clusters.
// +kubebuilder:validation:XValidation:rule="has(self.staticWeightList) != has(self.dynamicWeight)",message="give exactly one of staticWeightList and dynamicWeight"
type WeightPreference struct {
	// staticWeightList weighs clusters by fixed numbers.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:XValidation:rule="self.exists(w, w.weight > 0)",message="staticWeightList: the weights add up to zero; give at least one cluster a positive weight"
	StaticWeightList []StaticClusterWeight `json:"staticWeightList,omitempty"`

	// dynamicWeight weighs clusters by a measure: AvailableReplicas (what still fits).
	// +optional
	DynamicWeight DynamicWeight `json:"dynamicWeight,omitempty"`
}

// ReplicaScheduling says how a workload's replicas are placed.
// +kubebuilder:validation:XValidation:rule="self.type != 'Divided' || has(self.divisionPreference)",message="type Divided needs divisionPreference: Weighted or Aggregated"
// +kubebuilder:validation:XValidation:rule="self.type != 'Duplicated' || (!has(self.divisionPreference) && !has(self.weightPreference))",message="type Duplicated takes no divisionPreference or weightPreference"
// +kubebuilder:validation:XValidation:rule="!has(self.divisionPreference) || self.divisionPreference != 'Weighted' || has(self.weightPreference)",message="divisionPreference Weighted needs weightPreference"
type ReplicaScheduling struct {
	// type is Duplicated (every cluster runs all replicas) or Divided.
	// +required
	Type ReplicaSchedulingType `json:"type"`

	// divisionPreference is Weighted or Aggregated, for type Divided.
	// +optional
	DivisionPreference DivisionPreference `json:"divisionPreference,omitempty"`

	// weightPreference weighs clusters for Weighted division.
	// +optional
	WeightPreference *WeightPreference `json:"weightPreference,omitempty"`
}

// Placement says which clusters a template goes to and how its replicas divide.
// +kubebuilder:validation:XValidation:rule="!(has(self.clusterAffinity) && has(self.clusterAffinities))",message="give clusterAffinity or the ordered clusterAffinities, not both"
type Placement struct {
	// clusterAffinity selects the candidate clusters; all clusters when unset.
	// +optional
	ClusterAffinity *ClusterAffinity `json:"clusterAffinity,omitempty"`

	// clusterAffinities are tried in order; the first that yields a placement is used.
	// +optional
	// +listType=map
	// +listMapKey=affinityName
	// +kubebuilder:validation:MaxItems=16
	ClusterAffinities []ClusterAffinityTerm `json:"clusterAffinities,omitempty"`

	// clusterTolerations let the placement onto tainted clusters.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	ClusterTolerations []Toleration `json:"clusterTolerations,omitempty"`

	// spreadConstraints spread the placement over groups of clusters.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	SpreadConstraints []SpreadConstraint `json:"spreadConstraints,omitempty"`

	// replicaScheduling divides or duplicates replicas; Duplicated when unset.
	// +optional
	ReplicaScheduling *ReplicaScheduling `json:"replicaScheduling,omitempty"`
}

// PropagationSpec is what a propagation policy declares.
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !(has(self.rollout.trafficRouting) || has(self.rollout.blueGreen)) || (self.resourceSelectors.size() == 1 && self.resourceSelectors[0].apiVersion == 'apps/v1' && self.resourceSelectors[0].kind == 'Deployment' && has(self.resourceSelectors[0].name))",message="rollout: trafficRouting and blueGreen release one Deployment, named in the only resourceSelector (its Services and routes carry one workload's split); place the Services and routes with another policy"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !self.rollout.waves.exists(w, has(w.steps) && w.steps.exists(s, has(s.setWeight))) || self.resourceSelectors.all(r, r.apiVersion == 'apps/v1' && r.kind == 'Deployment')",message="rollout: setWeight canary steps work for apps/v1 Deployments only; select only Deployments in this policy, or drop the setWeight steps"
type PropagationSpec struct {
	// resourceSelectors select the templates this policy places.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	ResourceSelectors []ResourceSelector `json:"resourceSelectors"`

	// placement says where the selected templates run.
	// +optional
	Placement Placement `json:"placement,omitempty"`

	// priority decides between policies that select the same template: the highest wins,
	// then the most specific selector. 0 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=-1000
	// +kubebuilder:validation:Maximum=1000
	Priority *int32 `json:"priority,omitempty"`

	// propagateDeps makes the ConfigMaps, Secrets, ServiceAccounts and PVCs a workload
	// references follow it to the same clusters.
	// +optional
	PropagateDeps bool `json:"propagateDeps,omitempty"`

	// groupBy is a label key: templates that share its value are scheduled together.
	// +optional
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	GroupBy string `json:"groupBy,omitempty"`

	// deletionPolicy is what happens to member objects when they stop being placed: Delete
	// (the default) or Orphan.
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// conflictResolution is what happens when a member already has an object of the same
	// name that Flotilla does not manage: Abort (the default) or Overwrite.
	// +optional
	ConflictResolution ConflictResolution `json:"conflictResolution,omitempty"`

	// rollout releases every change of a selected template's workload spec in waves. Without
	// it, a change reaches every cluster at once.
	// +optional
	Rollout *RolloutStrategy `json:"rollout,omitempty"`

	// failover says how placements move off failed clusters and failed applications. A
	// cluster that stays not Ready past the controller's grace period is tainted
	// cluster.flotilla.dev/unreachable:NoExecute; policies that tolerate the taint never fail
	// over.
	// +optional
	Failover *FailoverBehavior `json:"failover,omitempty"`

	// driftCorrection says what happens when a member object is changed by hand: Correct (the
	// default) puts it back, Report only says so; ignoreFields are never drift.
	// +optional
	DriftCorrection *DriftCorrection `json:"driftCorrection,omitempty"`

	// dependsOn selects the templates the selected templates need running first: in each
	// cluster, a selected template is first applied only once every dependency runs there
	// Healthy at its current revision (a dependency not placed there holds it there alone),
	// and a release of it advances there only then. A cycle is reported on the bindings.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	DependsOn []DependencySelector `json:"dependsOn,omitempty"`
}

// PurgeMode says when the old placement goes after a failover.
// +kubebuilder:validation:Enum=Graceful;Immediately;Never
type PurgeMode string

// Purge modes.
const (
	// PurgeGraceful keeps the old placement until the replacements are available or
	// gracePeriodSeconds pass.
	PurgeGraceful PurgeMode = "Graceful"
	// PurgeImmediately removes the old placement at once.
	PurgeImmediately PurgeMode = "Immediately"
	// PurgeNever keeps the old placement until the template changes.
	PurgeNever PurgeMode = "Never"
)

// FailoverBehavior configures cluster and application failover.
type FailoverBehavior struct {
	// cluster: how Divided replicas leave a tainted cluster. Duplicated workloads stay on it
	// and are reported lost until it returns.
	// +optional
	Cluster *ClusterFailoverBehavior `json:"cluster,omitempty"`
	// application: move a workload off a cluster where it stays Degraded.
	// +optional
	Application *ApplicationFailoverBehavior `json:"application,omitempty"`
}

// ClusterFailoverBehavior configures cluster failover.
type ClusterFailoverBehavior struct {
	// purgeMode of the old placement; default Graceful.
	// +optional
	// +kubebuilder:default=Graceful
	PurgeMode PurgeMode `json:"purgeMode,omitempty"`
	// gracePeriodSeconds bounds a Graceful eviction; default 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	GracePeriodSeconds int32 `json:"gracePeriodSeconds,omitempty"`
}

// ApplicationFailoverBehavior configures application failover.
type ApplicationFailoverBehavior struct {
	// tolerationSeconds the workload may stay Degraded in a cluster before it moves; default 300.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	TolerationSeconds int32 `json:"tolerationSeconds,omitempty"`
	// purgeMode of the old placement; default Graceful.
	// +optional
	// +kubebuilder:default=Graceful
	PurgeMode PurgeMode `json:"purgeMode,omitempty"`
	// gracePeriodSeconds bounds a Graceful eviction; default 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	GracePeriodSeconds int32 `json:"gracePeriodSeconds,omitempty"`
}

// PropagationPolicyStatus is what Flotilla observes of a policy.
type PropagationPolicyStatus struct {
	// conditions of the policy.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// PropagationPolicy places templates of its own namespace onto member clusters.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pp,categories=flotilla
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Replicas",type=string,JSONPath=`.spec.placement.replicaScheduling.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
type PropagationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the policy declares.
	// +required
	Spec PropagationSpec `json:"spec"`

	// status is what Flotilla observes.
	// +optional
	Status PropagationPolicyStatus `json:"status,omitempty"`
}

// PropagationPolicyList is a list of PropagationPolicies.
// +kubebuilder:object:root=true
type PropagationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PropagationPolicy `json:"items"`
}

// ClusterPropagationPolicy places templates of any namespace, and cluster-scoped ones.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cpp,categories=flotilla
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Replicas",type=string,JSONPath=`.spec.placement.replicaScheduling.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
type ClusterPropagationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the policy declares.
	// +required
	Spec PropagationSpec `json:"spec"`

	// status is what Flotilla observes.
	// +optional
	Status PropagationPolicyStatus `json:"status,omitempty"`
}

// ClusterPropagationPolicyList is a list of ClusterPropagationPolicies.
// +kubebuilder:object:root=true
type ClusterPropagationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPropagationPolicy `json:"items"`
}
