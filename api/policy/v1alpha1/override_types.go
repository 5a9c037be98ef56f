package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImageComponent is a part of a container image reference.
// +kubebuilder:validation:Enum=Registry;Repository;Tag
type ImageComponent string

// OverrideOperator is what an overrider does.
// +kubebuilder:validation:Enum=add;remove;replace
type OverrideOperator string

const (
	OverrideAdd     OverrideOperator = "add"
	OverrideRemove  OverrideOperator = "remove"
	OverrideReplace OverrideOperator = "replace"
)

// ImageOverrider changes one component of container images.
// +kubebuilder:validation:XValidation:rule="self.operator == 'remove' || has(self.value)",message="add and replace need a value"
type ImageOverrider struct {
	// containerName limits the change to one container; all containers when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ContainerName string `json:"containerName,omitempty"`
	// component of the image: Registry, Repository or Tag.
	// +required
	Component ImageComponent `json:"component"`
	// operator: add (registry prefix, or tag when none), remove, or replace.
	// +required
	Operator OverrideOperator `json:"operator"`
	// value to add or replace with.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Value string `json:"value,omitempty"`
}

// CommandArgsOverrider adds or removes entries of a container's command or args.
// (The field's enum alone would merge with OverrideOperator's and let replace through.)
// +kubebuilder:validation:XValidation:rule="self.operator in ['add', 'remove']",message="operator: commandOverrider and argsOverrider take add or remove; to replace, remove the old entries and add the new ones"
type CommandArgsOverrider struct {
	// containerName the change applies to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ContainerName string `json:"containerName"`
	// operator: add appends the values, remove drops entries equal to them.
	// +required
	Operator OverrideOperator `json:"operator"`
	// value entries.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Value []string `json:"value"`
}

// EnvVar is a plain environment variable.
type EnvVar struct {
	// name of the variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// value of the variable.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Value string `json:"value,omitempty"`
}

// EnvOverrider sets or removes environment variables of a container.
type EnvOverrider struct {
	// containerName the change applies to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ContainerName string `json:"containerName"`
	// operator: add or replace sets the variables, remove drops them by name.
	// +required
	Operator OverrideOperator `json:"operator"`
	// value lists the variables.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Value []EnvVar `json:"value"`
}

// LabelAnnotationOverrider sets or removes labels or annotations.
type LabelAnnotationOverrider struct {
	// operator: add or replace sets the keys, remove drops them.
	// +required
	Operator OverrideOperator `json:"operator"`
	// value holds the keys (and values to set).
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=64
	Value map[string]string `json:"value"`
}

// PlaintextOverrider is one JSON patch operation. (CEL cannot see a schemaless value, so a
// missing value for add or replace is reported on the binding.) It may not touch the object's
// identity (apiVersion, kind, metadata.namespace, metadata.name): Flotilla places the object
// where its template is, and the binding controller checks the rendered identity again.
// +kubebuilder:validation:XValidation:rule="!(self.path in ['/apiVersion', '/kind', '/metadata', '/metadata/name', '/metadata/namespace'] || self.path.startsWith('/apiVersion/') || self.path.startsWith('/kind/') || self.path.startsWith('/metadata/name/') || self.path.startsWith('/metadata/namespace/'))",fieldPath=".path",message="path: an override may not change apiVersion, kind, metadata.namespace or metadata.name; overrides change content, not identity (the object is placed where its template is: to place it in another namespace or as another kind, create that template there)",messageExpression="'path: ' + self.path + ' would change the identity of the object (apiVersion, kind, metadata.namespace or metadata.name); overrides change content, not identity: the object is placed where its template is, so to place it in another namespace or as another kind, create that template there'"
type PlaintextOverrider struct {
	// path is a JSON pointer into the object, e.g. /spec/template/spec/priorityClassName.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^(/([^/~]|~[01])*)+$`
	Path string `json:"path"`
	// operator: add, remove or replace.
	// +required
	Operator OverrideOperator `json:"operator"`
	// value for add and replace.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Value *JSON `json:"value,omitempty"`
}

// Overriders are the changes of one rule, applied in this order: image, command, args, env,
// labels, annotations, plaintext (JSON patch).
// +kubebuilder:validation:XValidation:rule="has(self.imageOverrider) || has(self.commandOverrider) || has(self.argsOverrider) || has(self.envOverrider) || has(self.labelsOverrider) || has(self.annotationsOverrider) || has(self.plaintext)",message="overriders: give at least one of imageOverrider, commandOverrider, argsOverrider, envOverrider, labelsOverrider, annotationsOverrider or plaintext"
type Overriders struct {
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ImageOverrider []ImageOverrider `json:"imageOverrider,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	CommandOverrider []CommandArgsOverrider `json:"commandOverrider,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ArgsOverrider []CommandArgsOverrider `json:"argsOverrider,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	EnvOverrider []EnvOverrider `json:"envOverrider,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	LabelsOverrider []LabelAnnotationOverrider `json:"labelsOverrider,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	AnnotationsOverrider []LabelAnnotationOverrider `json:"annotationsOverrider,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Plaintext []PlaintextOverrider `json:"plaintext,omitempty"`
}

// OverrideRule applies overriders to the clusters a target selects.
type OverrideRule struct {
	// targetCluster selects the clusters; every cluster when unset.
	// +optional
	TargetCluster *ClusterAffinity `json:"targetCluster,omitempty"`
	// overriders are the changes.
	// +required
	Overriders Overriders `json:"overriders"`
}

// OverrideSpec is what an override policy declares. Rules apply in order; policies apply
// ClusterOverridePolicies first, then OverridePolicies, each by name.
type OverrideSpec struct {
	// resourceSelectors select the templates the rules change.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	ResourceSelectors []ResourceSelector `json:"resourceSelectors"`
	// overrideRules are applied in order.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	OverrideRules []OverrideRule `json:"overrideRules"`
}

// OverridePolicy changes templates of its namespace per cluster.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=op,categories=flotilla
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OverridePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// spec holds the rules.
	// +required
	Spec OverrideSpec `json:"spec"`
}

// OverridePolicyList is a list of OverridePolicies.
// +kubebuilder:object:root=true
type OverridePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OverridePolicy `json:"items"`
}

// ClusterOverridePolicy changes templates of any namespace per cluster.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=cop,categories=flotilla
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterOverridePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// spec holds the rules.
	// +required
	Spec OverrideSpec `json:"spec"`
}

// ClusterOverridePolicyList is a list of ClusterOverridePolicies.
// +kubebuilder:object:root=true
type ClusterOverridePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterOverridePolicy `json:"items"`
}

// JSON is any JSON value (a string, number, object, list...). It is its own type so this API
// depends only on k8s.io/apimachinery.
type JSON struct {
	Raw []byte `json:"-"`
}

// MarshalJSON writes the raw value.
func (j JSON) MarshalJSON() ([]byte, error) {
	if len(j.Raw) == 0 {
		return []byte("null"), nil
	}
	return j.Raw, nil
}

// UnmarshalJSON keeps the raw value.
func (j *JSON) UnmarshalJSON(b []byte) error {
	if string(b) != "null" {
		j.Raw = append(j.Raw[:0], b...)
	}
	return nil
}
