package v1alpha1

import (
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RolloutWrittenByAnnotation on a ClusterPropagationPolicy names the namespace's object whose
// rollout it carries (TargetPolicy NAMESPACE/NAME), when Flotilla generated the policy from a
// team's TargetPolicy and a platform ClusterTargetPolicy together. Trust follows the writer:
// such a rollout's gates and steps keep that namespace's limits (its AnalysisTemplates, egress
// and Pod Security), never the platform's. It can only lower trust, never raise it.
const RolloutWrittenByAnnotation = "policy.flotilla.dev/rollout-written-by"

// RolloutStrategy says how a change to a template travels over its clusters: wave by wave,
// each wave gated, with automatic rollback when a wave goes bad.
// +kubebuilder:validation:XValidation:rule="self.waves.filter(w, has(w.percentage)).map(w, w.percentage).sum() <= 100",message="rollout.waves: the percentages add up to more than 100; make them sum to 100 at most (10, 20, 70)"
// +kubebuilder:validation:XValidation:rule="self.waves.all(w, self.waves.exists_one(o, o.name == w.name))",message="rollout.waves: wave names must be unique"
// +kubebuilder:validation:XValidation:rule="has(self.trafficRouting) || self.waves.all(w, !has(w.steps) || w.steps.all(s, !has(s.setCanaryScale) && !has(s.setHeaderRoute)))",message="rollout: setCanaryScale and setHeaderRoute steps need rollout.trafficRouting (the route whose weights they set)"
// +kubebuilder:validation:XValidation:rule="!has(self.blueGreen) || (!has(self.trafficRouting) && self.waves.all(w, !has(w.steps)))",message="rollout.blueGreen: a blue-green rollout has no canary steps and no trafficRouting; remove waves[].steps and trafficRouting, or blueGreen"
type RolloutStrategy struct {
	// waves are released one after another, in order. Clusters no wave selects form an implicit
	// last wave named "rest".
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Waves []Wave `json:"waves"`

	// stageFirstRevision sends the first revision wave by wave too, instead of to every
	// cluster at once: a cluster its wave has not reached gets nothing from Flotilla. With
	// conflictResolution Overwrite this adopts a workload already running unmanaged in the
	// members cluster by cluster (no pod restarts); rolling the first release back hands the
	// adopted objects back to unmanaged instead of deleting them.
	// +optional
	StageFirstRevision bool `json:"stageFirstRevision,omitempty"`

	// autoRollback returns the clusters a release updated to the stable revision when a wave's
	// health or analysis fails. Default true.
	// +optional
	AutoRollback *bool `json:"autoRollback,omitempty"`

	// progressDeadline is how long a wave may take to become healthy, and a canary step its
	// canaries, routes or blue-green switch, before it counts as failed (time paused does not
	// count): a duration such as 10m or whole seconds. Default 10m.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="progressDeadline: write a duration such as 90s, 10m or 1h30m, or whole seconds such as 600"
	ProgressDeadline *intstr.IntOrString `json:"progressDeadline,omitempty"`

	// backgroundAnalysis runs over the whole release; its failure fails the release.
	// +optional
	BackgroundAnalysis *AnalysisGate `json:"backgroundAnalysis,omitempty"`

	// trafficRouting turns setWeight into a traffic weight: in every cluster of the wave the
	// named HTTPRoute and/or VirtualService sends weight% of the requests to canaryService and
	// the rest to stableService. Flotilla renders those Services and routes (ordinary templates
	// placed beside the workload) with the weights and selectors of each cluster's step: the
	// stable Service selects the primary's pods, the canary Service the canary's. Canary
	// replicas then come on top of the primary's (ceil(weight% of the cluster's replicas), at
	// least one), unless setCanaryScale says otherwise.
	// +optional
	TrafficRouting *TrafficRouting `json:"trafficRouting,omitempty"`

	// blueGreen releases each wave blue-green: the new revision runs at full scale behind the
	// preview Service, the wave's gates run against it, then the active Service switches to it
	// in every cluster of the wave at once; the old stack stays scaled for scaleDownDelay, so a
	// rollback switches back instantly.
	// +optional
	BlueGreen *BlueGreenStrategy `json:"blueGreen,omitempty"`

	// revisionHistoryLimit is how many revisions are kept for undo, the newest included, beside
	// any still stable or pinned; older finished releases go with them. Default 10.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
}

// Wave is a set of clusters released together.
// +kubebuilder:validation:XValidation:rule="[has(self.clusterSelector), has(self.clusterNames), has(self.percentage)].filter(x, x).size() == 1",message="a wave selects its clusters in exactly one way: clusterSelector, clusterNames or percentage"
type Wave struct {
	// name of the wave, shown in the release.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// clusterSelector selects the wave's clusters by label among those the template is placed on.
	// +optional
	ClusterSelector *LabelSelector `json:"clusterSelector,omitempty"`

	// clusterNames lists the wave's clusters.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=63
	ClusterNames []string `json:"clusterNames,omitempty"`

	// percentage of the placed clusters (by name order, rounded up) that this wave adds.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Percentage *int32 `json:"percentage,omitempty"`

	// maxUnavailable is how many of the wave's clusters are updated at once. Default: all.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxUnavailable *int32 `json:"maxUnavailable,omitempty"`

	// steps run a canary inside the wave before its clusters take the new revision: setWeight
	// w runs round(w% of the wave's replicas) canary replicas of the new revision beside the
	// stable ones, divided like them; pause waits (for a duration, or for promote); analysis
	// measures. setWeight works for Deployments only.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.filter(s, has(s.setWeight)).map(s, s.setWeight).isSorted()",message="steps: setWeight must not decrease from one step to the next"
	Steps []CanaryStep `json:"steps,omitempty"`

	// gates must pass, after every cluster of the wave runs the new revision healthy, before
	// the next wave starts.
	// +optional
	Gates Gates `json:"gates,omitempty"`
}

// CanaryStep is one step of a wave's canary: exactly one of its fields.
// +kubebuilder:validation:XValidation:rule="[has(self.setWeight), has(self.pause), has(self.analysis), has(self.setCanaryScale), has(self.setHeaderRoute)].filter(x, x).size() == 1",message="a step is exactly one of setWeight, pause, analysis, setCanaryScale or setHeaderRoute"
type CanaryStep struct {
	// setCanaryScale sets the canary's replicas apart from its traffic weight (with
	// trafficRouting only): replicas per cluster, weight percent of each cluster's replicas,
	// or matchTrafficWeight to follow setWeight again.
	// +optional
	SetCanaryScale *CanaryScale `json:"setCanaryScale,omitempty"`

	// setHeaderRoute sends requests matching these headers to the canary, whatever the
	// weight (with trafficRouting only); an empty match removes the header route.
	// +optional
	SetHeaderRoute *HeaderRoute `json:"setHeaderRoute,omitempty"`

	// setWeight is the canary's share of the wave's replicas, in percent.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	SetWeight *int32 `json:"setWeight,omitempty"`

	// pause waits for its duration, or without one for `flotilla release promote`.
	// +optional
	Pause *PauseStep `json:"pause,omitempty"`

	// analysis must succeed, measured while the canary runs; its failure fails the wave.
	// +optional
	Analysis *AnalysisGate `json:"analysis,omitempty"`
}

// PauseStep holds a canary.
type PauseStep struct {
	// duration to wait: a duration such as 30s or 5m, or whole seconds as Argo Rollouts
	// writes it (30); unset waits for promote.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="pause.duration: write a duration such as 30s, 5m or 1h, or whole seconds such as 30"
	Duration *intstr.IntOrString `json:"duration,omitempty"`
}

// Gates hold a wave until they pass. Health is always a gate.
type Gates struct {
	// bakeTime is how long the wave must stay healthy: a duration such as 10m or whole
	// seconds.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="bakeTime: write a duration such as 90s, 10m or 1h, or whole seconds such as 600"
	BakeTime *intstr.IntOrString `json:"bakeTime,omitempty"`

	// manualApproval waits for `flotilla release promote` once the wave runs the revision
	// healthy, before the next wave starts (on the last wave: before the release finishes).
	// +optional
	ManualApproval bool `json:"manualApproval,omitempty"`

	// analysis must succeed.
	// +optional
	Analysis *AnalysisGate `json:"analysis,omitempty"`
}

// AnalysisGate runs analysis templates with arguments.
type AnalysisGate struct {
	// templates to run, together; all must succeed.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Templates []AnalysisTemplateRef `json:"templates"`

	// args given to the templates, beside the release's own (namespace, name, revision,
	// wave, clusters).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Args []AnalysisArg `json:"args,omitempty"`
}

// AnalysisTemplateRef names an AnalysisTemplate of the template's namespace or a
// ClusterAnalysisTemplate.
type AnalysisTemplateRef struct {
	// templateName is the name of the template.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TemplateName string `json:"templateName"`

	// clusterScope names a ClusterAnalysisTemplate instead.
	// +optional
	ClusterScope bool `json:"clusterScope,omitempty"`
}

// AnalysisArg is a named value.
type AnalysisArg struct {
	// name of the argument.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// value of the argument.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`

	// valueFrom takes the value from the template being released instead (a field, or the
	// new or stable revision's hash); set value or valueFrom, not both.
	// +optional
	ValueFrom *ArgumentValueFrom `json:"valueFrom,omitempty"`
}

// TrafficRouting names the Services and routes a canary's traffic weight is set in. All are
// templates of the workload's namespace, placed like any other.
// +kubebuilder:validation:XValidation:rule="has(self.httpRoute) || has(self.virtualService)",message="trafficRouting: name an httpRoute, a virtualService or both"
// +kubebuilder:validation:XValidation:rule="self.stableService != self.canaryService",message="trafficRouting: stableService and canaryService must be two Services"
type TrafficRouting struct {
	// stableService selects the primary's pods (Flotilla adds the role label to its selector).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="stableService: a Service name: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"
	StableService string `json:"stableService"`

	// canaryService selects the canary's pods (Flotilla adds the role label to its selector).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="canaryService: a Service name: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"
	CanaryService string `json:"canaryService"`

	// httpRoute is a Gateway API HTTPRoute whose rules list backendRefs to both Services.
	// +optional
	HTTPRoute *RouteReference `json:"httpRoute,omitempty"`

	// virtualService is an Istio VirtualService whose http routes have destinations with
	// both Services as hosts.
	// +optional
	VirtualService *VirtualServiceReference `json:"virtualService,omitempty"`
}

// RouteReference names a route in the workload's namespace.
type RouteReference struct {
	// name of the route.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="httpRoute.name: an object name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	Name string `json:"name"`
}

// VirtualServiceReference names a VirtualService and, optionally, which of its http routes
// carry the weights.
type VirtualServiceReference struct {
	// name of the VirtualService.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="virtualService.name: an object name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	Name string `json:"name"`

	// routes are the names of the http routes to set; all that send to the stable Service when
	// empty.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	Routes []string `json:"routes,omitempty"`
}

// CanaryScale is the canary's size apart from its traffic weight: exactly one field.
// +kubebuilder:validation:XValidation:rule="[has(self.replicas), has(self.weight), has(self.matchTrafficWeight) && self.matchTrafficWeight].filter(x, x).size() == 1",message="setCanaryScale: set exactly one of replicas, weight or matchTrafficWeight: true"
type CanaryScale struct {
	// replicas of the canary in each cluster of the wave.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// weight is the canary's replicas as a percentage of each cluster's replicas (rounded up).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Weight *int32 `json:"weight,omitempty"`

	// matchTrafficWeight sizes the canary by setWeight again.
	// +optional
	MatchTrafficWeight bool `json:"matchTrafficWeight,omitempty"`
}

// HeaderRoute sends matching requests to the canary.
type HeaderRoute struct {
	// match: every header must match; empty removes the header route.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Match []HeaderMatch `json:"match,omitempty"`
}

// HeaderMatch is one request header to match.
// +kubebuilder:validation:XValidation:rule="[has(self.exact), has(self.prefix), has(self.regex)].filter(x, x).size() == 1",message="setHeaderRoute.match: give exactly one of exact, prefix or regex"
type HeaderMatch struct {
	// name of the header, such as X-Canary (a cookie is the Cookie header with a regex).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][-A-Za-z0-9_.]*$`
	Name string `json:"name"`

	// exact value.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Exact *string `json:"exact,omitempty"`

	// prefix of the value (Istio only; an HTTPRoute gets it as a regular expression).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Prefix *string `json:"prefix,omitempty"`

	// regex the value matches (RE2).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Regex *string `json:"regex,omitempty"`
}

// BlueGreenStrategy names the two Services of a blue-green release.
// +kubebuilder:validation:XValidation:rule="self.activeService != self.previewService",message="blueGreen: activeService and previewService must be two Services"
type BlueGreenStrategy struct {
	// activeService takes the users' traffic: the primary's pods, then the new stack's after
	// the switch (Flotilla sets the role label in its selector).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="activeService: a Service name: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"
	ActiveService string `json:"activeService"`

	// previewService selects the new stack before the switch, for tests and analysis.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="previewService: a Service name: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"
	PreviewService string `json:"previewService"`

	// scaleDownDelay keeps the old stack at full scale after the switch, so a rollback is a
	// switch back: a duration such as 30s or 5m, or whole seconds. Default 30s.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="blueGreen.scaleDownDelay: write a duration such as 30s or 5m, or whole seconds such as 30"
	ScaleDownDelay *intstr.IntOrString `json:"scaleDownDelay,omitempty"`
}
