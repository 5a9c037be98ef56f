package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Argument is a template argument; a template may leave the value for the run to fill in.
type Argument struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value *string `json:"value,omitempty"`
}

// Duration is a Go duration string such as 30s or 5m.
// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
// +kubebuilder:validation:MaxLength=32
type Duration string

// Metric is one measurement taken repeatedly and judged by its conditions.
// +kubebuilder:validation:XValidation:rule="[has(self.provider.prometheus), has(self.provider.web), has(self.provider.job)].filter(x, x).size() == 1",message="a metric has exactly one provider: prometheus, web or job"
type Metric struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// interval between measurements. Default: one measurement.
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
	// address of the server, e.g. http://prometheus:9090.
	// +required
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
	// url to call; {{args.NAME}} is replaced.
	// +required
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

// AnalysisTemplateSpec is a reusable analysis.
type AnalysisTemplateSpec struct {
	// args the metrics use as {{args.NAME}}.
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
}

// AnalysisTemplate is an analysis of one namespace.
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

// AnalysisRunSpec is an analysis with its arguments resolved.
type AnalysisRunSpec struct {
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
	// measurements, the latest 10 (older ones are dropped; the counters keep counting).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
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
}

// AnalysisRun is one analysis being measured.
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
