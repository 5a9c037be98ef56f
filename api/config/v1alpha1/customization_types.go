package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Operation names, as used in conditions, events, errors and `flotilla interpret --operation`.
const (
	OperationInterpretReplica    = "InterpretReplica"
	OperationReviseReplica       = "ReviseReplica"
	OperationInterpretStatus     = "InterpretStatus"
	OperationAggregateStatus     = "AggregateStatus"
	OperationInterpretHealth     = "InterpretHealth"
	OperationRetain              = "Retain"
	OperationInterpretDependency = "InterpretDependency"
	ConditionReady               = "Ready"
	ConditionStalled             = "Stalled"
	ReasonCompiled               = "Compiled"
	ReasonCompileFailed          = "CompileFailed"
	ReasonConflict               = "ConflictingCustomization"
)

// ResourceInterpreterCustomization teaches Flotilla a kind through Lua. Each customization
// replaces the built-in interpreter for that operation only; operations it leaves out keep the
// built-in behaviour. Scripts are compiled when the object is admitted by the controller: a
// script that does not compile sets Stalled=True naming the operation and the Lua line, and the
// last version that compiled stays in force.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ric
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="API-VERSION",type=string,JSONPath=`.spec.target.apiVersion`
// +kubebuilder:printcolumn:name="KIND",type=string,JSONPath=`.spec.target.kind`
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type ResourceInterpreterCustomization struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ResourceInterpreterCustomizationSpec   `json:"spec"`
	Status ResourceInterpreterCustomizationStatus `json:"status,omitempty"`
}

// ResourceInterpreterCustomizationSpec names the kind and carries its scripts.
type ResourceInterpreterCustomizationSpec struct {
	Target         CustomizationTarget `json:"target"`
	Customizations CustomizationRules  `json:"customizations"`
}

// CustomizationTarget is the kind the scripts interpret.
type CustomizationTarget struct {
	// APIVersion of the kind, for example apps.kruise.io/v1alpha1.
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`
	// Kind, for example CloneSet.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
}

// CustomizationRules has one optional script per operation.
// +kubebuilder:validation:XValidation:rule="has(self.replicaResource) || has(self.replicaRevision) || has(self.statusReflection) || has(self.statusAggregation) || has(self.healthInterpretation) || has(self.retention) || has(self.dependencyInterpretation)",message="customizations must set at least one of replicaResource, replicaRevision, statusReflection, statusAggregation, healthInterpretation, retention, dependencyInterpretation"
type CustomizationRules struct {
	// ReplicaResource defines `function GetReplicas(desiredObj)` returning the replica count and
	// the per-replica requirements ({resourceRequest = {...}, nodeClaim = {...}}), or nil.
	// +optional
	ReplicaResource *LuaScript `json:"replicaResource,omitempty"`
	// ReplicaRevision defines `function ReviseReplica(desiredObj, desiredReplica)` returning the
	// object with a cluster's share of the replicas set.
	// +optional
	ReplicaRevision *LuaScript `json:"replicaRevision,omitempty"`
	// StatusReflection defines `function ReflectStatus(observedObj)` returning what of a member
	// object's status goes back to the control plane.
	// +optional
	StatusReflection *LuaScript `json:"statusReflection,omitempty"`
	// StatusAggregation defines `function AggregateStatus(desiredObj, statusItems)` returning the
	// template with its status set from the members' items ({clusterName, status, applied, health,
	// revision, current, observed}; current: the cluster runs the template as it is now, not a
	// revision a release still holds it on).
	// +optional
	StatusAggregation *LuaScript `json:"statusAggregation,omitempty"`
	// HealthInterpretation defines `function InterpretHealth(observedObj)` returning true when healthy.
	// +optional
	HealthInterpretation *LuaScript `json:"healthInterpretation,omitempty"`
	// Retention defines `function Retain(desiredObj, observedObj)` returning the object to apply,
	// with the fields member-side controllers own copied from the observed object.
	// +optional
	Retention *LuaScript `json:"retention,omitempty"`
	// DependencyInterpretation defines `function GetDependencies(desiredObj)` returning a list of
	// {apiVersion, kind, namespace, name} the object needs in the same clusters.
	// +optional
	DependencyInterpretation *LuaScript `json:"dependencyInterpretation,omitempty"`
}

// LuaScript is the source of one operation's script.
type LuaScript struct {
	// LuaScript is Lua 5.1 source. Only the base, table, string and math libraries and the
	// `kube` helper library are available.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=262144
	LuaScript string `json:"luaScript"`
}

// ResourceInterpreterCustomizationStatus reports whether the scripts compiled.
type ResourceInterpreterCustomizationStatus struct {
	// ObservedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (the current generation is in force) and Stalled (a script does not
	// compile; the message names the operation and the Lua line).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ActiveGeneration is the generation whose scripts are in force; it lags the object's
	// generation while a newer version is Stalled.
	// +optional
	ActiveGeneration int64 `json:"activeGeneration,omitempty"`
	// ActiveSpec is the spec of activeGeneration. A restarted controller puts it back in
	// force while the current generation does not compile, instead of failing the kind.
	// +optional
	ActiveSpec *ResourceInterpreterCustomizationSpec `json:"activeSpec,omitempty"`
}

// +kubebuilder:object:root=true

// ResourceInterpreterCustomizationList is a list of ResourceInterpreterCustomizations.
type ResourceInterpreterCustomizationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceInterpreterCustomization `json:"items"`
}
