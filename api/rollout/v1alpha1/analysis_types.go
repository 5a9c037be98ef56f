package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

// Argument is a template argument; a template may leave the value for the run to fill in.
// +kubebuilder:validation:XValidation:rule="!(has(self.value) && has(self.valueFrom))",message="args: set value or valueFrom, not both"
type Argument struct {
	// name the metrics use as {{args.NAME}}.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// value of the argument: a default in a template, which the policy's gate args override.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value *string `json:"value,omitempty"`
	// valueFrom takes the value from the template being released (a field, or the new or
	// stable revision's hash) when the release creates the run; the policy's gate args
	// override it. A run's args always hold values.
	// +optional
	ValueFrom *policyv1alpha1.ArgumentValueFrom `json:"valueFrom,omitempty"`
}

// Duration is a Go duration string such as 30s or 5m; a negative duration cannot be written.
// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
// +kubebuilder:validation:MaxLength=32
type Duration string

// Metric is one measurement taken repeatedly and judged by its conditions.
// +kubebuilder:validation:XValidation:rule="[has(self.provider.prometheus), has(self.provider.web), has(self.provider.job)].filter(x, x).size() == 1",message="a metric has exactly one provider: prometheus, web or job"
// +kubebuilder:validation:XValidation:rule="!has(self.interval) || !self.interval.matches('^(0+([.]0+)?(ns|us|µs|ms|s|m|h))+$') || (has(self.count) && self.count > 0)",message="interval: a zero interval without a count measures back to back forever; set an interval such as 30s, or a count of at least 1"
// +kubebuilder:validation:XValidation:rule="has(self.baseline) == has(self.compare)",message="baseline and compare go together: baseline measures the stable version, compare says how far the canary may be from it"
// +kubebuilder:validation:XValidation:rule="!has(self.baseline) || ([has(self.baseline.prometheus), has(self.baseline.web)].filter(x, x).size() == 1 && !has(self.baseline.job) && !has(self.provider.job))",message="baseline: give exactly one of prometheus or web (a job has no value to compare), and a provider that is not a job"
type Metric struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// interval between measurements. Default: one measurement. A zero interval needs a count.
	// Measurements of a metric are never less than a second apart, whatever the interval says.
	// +optional
	Interval Duration `json:"interval,omitempty"`
	// initialDelay before the first measurement.
	// +optional
	InitialDelay Duration `json:"initialDelay,omitempty"`
	// count of measurements; 0 with an interval measures until the run is terminated.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Count *int32 `json:"count,omitempty"`
	// failureLimit is how many failed measurements fail the metric. Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FailureLimit *int32 `json:"failureLimit,omitempty"`
	// inconclusiveLimit is how many inconclusive measurements make it inconclusive. Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	InconclusiveLimit *int32 `json:"inconclusiveLimit,omitempty"`
	// consecutiveErrorLimit is how many errors in a row make the metric an error. Default 4.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ConsecutiveErrorLimit *int32 `json:"consecutiveErrorLimit,omitempty"`
	// successCondition is an expression over `result`, e.g. `result[0] >= 0.90`.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	SuccessCondition string `json:"successCondition,omitempty"`
	// failureCondition is an expression over `result`.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	FailureCondition string `json:"failureCondition,omitempty"`
	// provider takes the measurement.
	// +required
	Provider MetricProvider `json:"provider"`
	// baseline measures the stable version the way provider measures the canary (usually the
	// same query with the baseline arguments: {{args.baseline-cluster-regex}}); compare then
	// judges the canary's value against it. Conditions, when set, still judge the canary's
	// value (`result`); both must pass.
	// +optional
	Baseline *MetricProvider `json:"baseline,omitempty"`
	// compare says how far the canary's value may be from the baseline's.
	// +optional
	Compare *Comparison `json:"compare,omitempty"`
}

// Comparison judges a canary's value against its baseline's, for metrics where lower is better
// (error rates, latencies) unless higherIsBetter (success rates, throughput).
// +kubebuilder:validation:XValidation:rule="has(self.maxRatio) || has(self.maxDifference)",message="compare: give maxRatio, maxDifference or both"
type Comparison struct {
	// maxRatio: the canary may be at most this many times worse than the baseline, e.g. "1.5"
	// (canary/baseline, or baseline/canary when higher is better).
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]+([.][0-9]+)?$`
	// +kubebuilder:validation:MaxLength=16
	MaxRatio string `json:"maxRatio,omitempty"`
	// maxDifference: the canary may be at most this much worse than the baseline, e.g. "0.01"
	// (canary-baseline, or baseline-canary when higher is better).
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]+([.][0-9]+)?$`
	// +kubebuilder:validation:MaxLength=16
	MaxDifference string `json:"maxDifference,omitempty"`
	// higherIsBetter turns the comparison around.
	// +optional
	HigherIsBetter bool `json:"higherIsBetter,omitempty"`
}

// MetricProvider is where a measurement comes from.
type MetricProvider struct {
	// +optional
	Prometheus *PrometheusMetric `json:"prometheus,omitempty"`
	// +optional
	Web *WebMetric `json:"web,omitempty"`
	// +optional
	Job *JobMetric `json:"job,omitempty"`
}

// PrometheusMetric queries the Prometheus HTTP API (Thanos too).
type PrometheusMetric struct {
	// address of the server, e.g. http://prometheus:9090: http or https only.
	// +required
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][a-zA-Z0-9+.-]*:') || self.matches('^[hH][tT][tT][pP][sS]?:')",message="scheme is not allowed; use http or https",messageExpression="'scheme \"' + self.split(':')[0].lowerAscii() + '\" is not allowed; use http or https'"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	Address string `json:"address"`
	// query in PromQL; {{args.NAME}} is replaced.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=8192
	Query string `json:"query"`
	// timeout of one query, in seconds. Default 30.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// WebMetricHeader is one HTTP header.
type WebMetricHeader struct {
	// +required
	// +kubebuilder:validation:MaxLength=256
	Key string `json:"key"`
	// +required
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value"`
}

// WebMetric calls an HTTP endpoint and reads its JSON.
type WebMetric struct {
	// url to call, http or https only; {{args.NAME}} is replaced (a URL that starts with an
	// argument has its scheme checked when measured).
	// +required
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][a-zA-Z0-9+.-]*:') || self.matches('^[hH][tT][tT][pP][sS]?:')",message="scheme is not allowed; use http or https",messageExpression="'scheme \"' + self.split(':')[0].lowerAscii() + '\" is not allowed; use http or https'"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`
	// method is GET (the default) or POST.
	// +optional
	// +kubebuilder:validation:Enum=GET;POST
	Method string `json:"method,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Headers []WebMetricHeader `json:"headers,omitempty"`
	// body sent with POST.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Body string `json:"body,omitempty"`
	// jsonPath picks the result from the response, e.g. {$.data.ok}. Default: the whole body.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	JSONPath string `json:"jsonPath,omitempty"`
	// timeoutSeconds of one call. Default 10.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// JobMetric runs a Kubernetes Job in each cluster of the wave; the measurement succeeds when
// every one completes and fails when any fails.
type JobMetric struct {
	// metadata (labels, annotations) of the Jobs.
	// +optional
	Metadata JobMetadata `json:"metadata,omitempty"`
	// spec of the Jobs (batch/v1 JobSpec).
	// +required
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Spec runtime.RawExtension `json:"spec"`
}

// JobMetadata is what a Job of a JobMetric carries.
type JobMetadata struct {
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Annotations map[string]string `json:"annotations,omitempty"`
}

// InconclusivePolicy says what an Inconclusive run does to the release that waits for it.
// +kubebuilder:validation:Enum=Pause;Fail
type InconclusivePolicy string

// Inconclusive policies.
const (
	// InconclusivePause pauses the release for a person, as Argo Rollouts does: `flotilla
	// release promote` passes the analysis, `flotilla release abort` rolls back.
	InconclusivePause InconclusivePolicy = "Pause"
	// InconclusiveFail fails the wave as a failed analysis does.
	InconclusiveFail InconclusivePolicy = "Fail"
)

// DryRun names metrics whose failure is recorded but never fails the run.
type DryRun struct {
	// metricName is a metric of the template, or "*" for every metric.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	MetricName string `json:"metricName"`
}

// MeasurementRetention says how many measurements of a metric its result keeps.
type MeasurementRetention struct {
	// metricName is a metric of the template, or "*" for every metric without an entry of
	// its own.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	MetricName string `json:"metricName"`
	// limit is how many of the latest measurements are kept (the counters keep counting).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	Limit int32 `json:"limit"`
}

// AnalysisTemplateSpec is a reusable analysis.
// +kubebuilder:validation:XValidation:rule="self.metrics.all(m, ((has(m.provider.prometheus) ? [m.provider.prometheus.query] : []) + (has(m.provider.web) ? [m.provider.web.url] + (has(m.provider.web.body) ? [m.provider.web.body] : []) + (has(m.provider.web.headers) ? m.provider.web.headers.map(h, h.value) : []) : [])).all(t, t.findAll('[{][{][ ]*args[.][^{} ]+[ ]*[}][}]').all(r, has(self.args) && self.args.exists(a, a.name == r.replace('{', ' ').replace('}', ' ').trim().substring(5)))))",message="metrics: a query, url, body or header uses {{args.NAME}} that spec.args does not declare; declare it in spec.args (with a value, a valueFrom, or neither for the release to give) or fix the reference"
type AnalysisTemplateSpec struct {
	// args the metrics use as {{args.NAME}}; a metric may use only the args declared here.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Args []Argument `json:"args,omitempty"`
	// metrics measured together.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Metrics []Metric `json:"metrics"`
	// dryRun lists metrics whose failure, error or inconclusive verdict is recorded (the
	// metric result says dryRun) but never decides the run; metricName "*" is every metric.
	// The run still waits for them to finish.
	// +optional
	// +listType=map
	// +listMapKey=metricName
	// +kubebuilder:validation:MaxItems=16
	DryRun []DryRun `json:"dryRun,omitempty"`
	// measurementRetention sets how many measurements a metric's result keeps, from 1 to 50;
	// "*" is every metric without an entry of its own. Default 10.
	// +optional
	// +listType=map
	// +listMapKey=metricName
	// +kubebuilder:validation:MaxItems=16
	MeasurementRetention []MeasurementRetention `json:"measurementRetention,omitempty"`
	// inconclusive says what an Inconclusive run does to the release: Pause (the default)
	// holds it for a person (`flotilla release promote` passes the analysis, `abort` rolls
	// back), Fail fails the wave like a failed analysis. A run of several templates fails
	// when any of them says Fail.
	// +optional
	Inconclusive InconclusivePolicy `json:"inconclusive,omitempty"`
}

// AnalysisTemplate is an analysis of one namespace.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=at,categories=flotilla
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AnalysisTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec AnalysisTemplateSpec `json:"spec"`
}

// AnalysisTemplateList is a list of AnalysisTemplates.
// +kubebuilder:object:root=true
type AnalysisTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AnalysisTemplate `json:"items"`
}

// ClusterAnalysisTemplate is an analysis every namespace can use.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=cat,categories=flotilla
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterAnalysisTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec AnalysisTemplateSpec `json:"spec"`
}

// ClusterAnalysisTemplateList is a list of ClusterAnalysisTemplates.
// +kubebuilder:object:root=true
type ClusterAnalysisTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterAnalysisTemplate `json:"items"`
}

// AnalysisPhase is the outcome of a measurement, a metric or a run.
// +kubebuilder:validation:Enum=Pending;Running;Successful;Failed;Error;Inconclusive
type AnalysisPhase string

// Analysis phases.
const (
	AnalysisPending      AnalysisPhase = "Pending"
	AnalysisRunning      AnalysisPhase = "Running"
	AnalysisSuccessful   AnalysisPhase = "Successful"
	AnalysisFailed       AnalysisPhase = "Failed"
	AnalysisError        AnalysisPhase = "Error"
	AnalysisInconclusive AnalysisPhase = "Inconclusive"
)

// Completed reports a final phase.
func (p AnalysisPhase) Completed() bool {
	return p == AnalysisSuccessful || p == AnalysisFailed || p == AnalysisError || p == AnalysisInconclusive
}

// AnalysisRunTemplate is a template a run was built from and the metrics it gave the run.
type AnalysisRunTemplate struct {
	// name of the AnalysisTemplate (in the run's namespace) or ClusterAnalysisTemplate.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// clusterScope says the template is a ClusterAnalysisTemplate, which only cluster admins
	// write: its metrics get the platform's allowances (they may reach private and loopback
	// addresses, and their Job pods are not checked against the Pod Security level).
	// +optional
	ClusterScope bool `json:"clusterScope,omitempty"`
	// metrics of the run that came from the template.
	// +required
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Metrics []string `json:"metrics"`
}

// AnalysisRunSpec is an analysis with its arguments resolved.
// +kubebuilder:validation:XValidation:rule="has(self.templates) == has(oldSelf.templates) && (!has(self.templates) || self.templates == oldSelf.templates)",message="templates is immutable: it records where the run's metrics came from; create a new run instead"
type AnalysisRunSpec struct {
	// templates the run was built from, in order, with the metrics each gave; written by the
	// run's creator (the release controller) and immutable. A metric no ClusterAnalysisTemplate
	// entry names is treated as a namespace's: the analysis controller applies the tenant's
	// egress rules and Pod Security level to it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Templates []AnalysisRunTemplate `json:"templates,omitempty"`
	// args with their values.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Args []Argument `json:"args,omitempty"`
	// metrics measured together; the run succeeds when every one does.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Metrics []Metric `json:"metrics"`
	// clusters where job metrics run: the wave's.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	Clusters []string `json:"clusters,omitempty"`
	// terminate stops measuring; metrics without a verdict yet count as successful, as in Argo
	// Rollouts (background analysis of a finished release).
	// +optional
	Terminate bool `json:"terminate,omitempty"`
	// dryRun lists metrics whose verdict is recorded but never decides the run; "*" is every
	// metric.
	// +optional
	// +listType=map
	// +listMapKey=metricName
	// +kubebuilder:validation:MaxItems=64
	DryRun []DryRun `json:"dryRun,omitempty"`
	// measurementRetention sets how many measurements a metric's result keeps; default 10.
	// +optional
	// +listType=map
	// +listMapKey=metricName
	// +kubebuilder:validation:MaxItems=64
	MeasurementRetention []MeasurementRetention `json:"measurementRetention,omitempty"`
	// inconclusive says what an Inconclusive verdict does to the release reading the run:
	// Pause (the default) or Fail.
	// +optional
	Inconclusive InconclusivePolicy `json:"inconclusive,omitempty"`
}

// Measurement is one observation.
type Measurement struct {
	// +required
	Phase AnalysisPhase `json:"phase"`
	// value is the result as JSON, shortened to 1 KiB.
	// +optional
	// +kubebuilder:validation:MaxLength=1100
	Value string `json:"value,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// MetricResult is the verdict and the latest measurements of one metric.
type MetricResult struct {
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// +required
	Phase AnalysisPhase `json:"phase"`
	// dryRun: the metric's verdict is recorded but does not decide the run.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// measurements, the latest 10 or the spec's measurementRetention (older ones are dropped;
	// the counters keep counting).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Measurements []Measurement `json:"measurements,omitempty"`
	// +optional
	Count int32 `json:"count,omitempty"`
	// +optional
	Successful int32 `json:"successful,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// +optional
	Inconclusive int32 `json:"inconclusive,omitempty"`
	// +optional
	Error int32 `json:"error,omitempty"`
	// +optional
	ConsecutiveError int32 `json:"consecutiveError,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// AnalysisRunStatus is the run's verdict so far.
type AnalysisRunStatus struct {
	// +optional
	Phase AnalysisPhase `json:"phase,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	MetricResults []MetricResult `json:"metricResults,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: the kstatus summary Ready (Successful), Reconciling (Pending, Running) and
	// Stalled (Failed, Error, Inconclusive).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AnalysisRun is one analysis being measured.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ar,categories=flotilla
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AnalysisRun struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec AnalysisRunSpec `json:"spec"`
	// +optional
	Status AnalysisRunStatus `json:"status,omitempty"`
}

// AnalysisRunList is a list of AnalysisRuns.
// +kubebuilder:object:root=true
type AnalysisRunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AnalysisRun `json:"items"`
}
