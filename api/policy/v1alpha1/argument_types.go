package v1alpha1

// ArgumentValueFrom takes an analysis argument's value from the release instead of a literal,
// as Argo Rollouts' valueFrom does, so a template can filter its metrics by the version being
// released without the policy being edited before each release. The release controller
// resolves it when it creates the AnalysisRun; a run's own args always hold values.
// +kubebuilder:validation:XValidation:rule="[has(self.fieldRef), has(self.podTemplateHashValue)].filter(x, x).size() == 1",message="valueFrom: set exactly one of fieldRef or podTemplateHashValue"
type ArgumentValueFrom struct {
	// fieldRef reads a field of the template being released, as recorded in its new revision.
	// +optional
	FieldRef *ArgumentFieldRef `json:"fieldRef,omitempty"`

	// podTemplateHashValue is the workload hash of the new revision (Latest) or of the stable
	// one (Stable): the value of the rollout.flotilla.dev/revision-hash annotation on the
	// revision's ControllerRevision, the same in every cluster. It is not the pod-template-hash
	// label of the members' ReplicaSets, which each member's Deployment controller computes
	// from its own defaulted and overridden pod template.
	// +optional
	PodTemplateHashValue *PodTemplateHashValue `json:"podTemplateHashValue,omitempty"`
}

// ArgumentFieldRef names a field of the template.
type ArgumentFieldRef struct {
	// fieldPath is the field, written as in Argo Rollouts and kubectl: dots between names,
	// [N] for a list item, ['key'] for a map key with dots or slashes, e.g.
	// spec.template.spec.containers[0].image or metadata.labels['app.kubernetes.io/version'].
	// A string field gives its text; any other field its JSON.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[A-Za-z_$][A-Za-z0-9_$-]*(\.[A-Za-z_$][A-Za-z0-9_$-]*|\[[0-9]+\]|\['[^']+'\]|\["[^"]+"\])*$`
	FieldPath string `json:"fieldPath"`
}

// PodTemplateHashValue picks the revision whose workload hash an argument takes.
// +kubebuilder:validation:Enum=Latest;Stable
type PodTemplateHashValue string

// Revisions an argument's podTemplateHashValue can name.
const (
	// PodTemplateHashLatest is the revision being released.
	PodTemplateHashLatest PodTemplateHashValue = "Latest"
	// PodTemplateHashStable is the revision the clusters return to on rollback.
	PodTemplateHashStable PodTemplateHashValue = "Stable"
)
