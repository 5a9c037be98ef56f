package v1alpha1

// DriftMode says what Flotilla does when a member object no longer matches what it applied.
// +kubebuilder:validation:Enum=Correct;Report
type DriftMode string

const (
	// DriftCorrect puts the member object back within seconds and records a DriftCorrected
	// event on the binding and the template.
	DriftCorrect DriftMode = "Correct"
	// DriftReport writes nothing: the Work and the binding get Drifted=True naming the cluster,
	// the object and the fields, and the template's status carries a Drifted condition.
	DriftReport DriftMode = "Report"
)

// DriftCorrection says how hand-made changes to the member objects of the selected templates
// are handled. Drift is a difference, in a field the rendered object sets, between the rendered
// object and the member object (after the interpreter's Retain, and leaving spec.replicas to a
// member scaler that writes through the scale subresource).
type DriftCorrection struct {
	// mode is Correct (the default: put the object back) or Report (only say so).
	// +optional
	Mode DriftMode `json:"mode,omitempty"`

	// ignoreFields are JSON pointers (RFC 6901) to fields that are never drift, e.g.
	// /spec/template/spec/containers/0/image or /metadata/annotations/team~1owner. A segment
	// under a list is an index, "*" for every element, or the element's name.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=2
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^(/([^/~]|~[01])*)+$`
	// +kubebuilder:validation:XValidation:rule="self.all(p, !p.startsWith('/status') && p != '/metadata' && p != '/spec')",message="ignoreFields: status is never compared, and /metadata or /spec would ignore everything; name the fields, e.g. /spec/replicas"
	IgnoreFields []string `json:"ignoreFields,omitempty"`
}
