package analysis

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

func TestSubstitute(t *testing.T) {
	values := map[string]string{"service": "checkout", "ns": "shop", "quote": `a"b`}
	tests := []struct {
		in, want, wantError string
	}{
		{in: `rate(http_requests_total{service="{{args.service}}",namespace="{{args.ns}}"}[5m])`, want: `rate(http_requests_total{service="checkout",namespace="shop"}[5m])`},
		{in: "http://{{ args.service }}.{{args.ns}}/health", want: "http://checkout.shop/health"},
		{in: "no arguments {{other.thing}}", want: "no arguments {{other.thing}}"},
		{in: "{{args.service}}-{{args.missing}}", wantError: `argument "missing" has no value`},
	}
	for _, tt := range tests {
		got, err := substitute(tt.in, values)
		if tt.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantError) {
				t.Errorf("substitute(%q) error = %v, want %q", tt.in, err, tt.wantError)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("substitute(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestSubstituteJSONKeepsJSONValid(t *testing.T) {
	out, err := substituteJSON([]byte(`{"template":{"spec":{"containers":[{"args":["--target={{args.quote}}"]}]}}}`), map[string]string{"quote": `a"b`})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Template struct {
			Spec struct {
				Containers []struct{ Args []string } `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if got := doc.Template.Spec.Containers[0].Args[0]; got != `--target=a"b` {
		t.Errorf("arg = %q", got)
	}
	if _, err := substituteJSON([]byte(`{"x":"{{args.nope}}"}`), nil); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("missing argument: %v", err)
	}
}

func promMetric(name, query string) rolloutv1alpha1.Metric {
	return rolloutv1alpha1.Metric{Name: name, SuccessCondition: "result[0] >= 0.9", Provider: rolloutv1alpha1.MetricProvider{Prometheus: &rolloutv1alpha1.PrometheusMetric{Address: "http://prometheus:9090", Query: query}}}
}

func TestNewRun(t *testing.T) {
	errorRate := rolloutv1alpha1.AnalysisTemplateSpec{
		Args:    []rolloutv1alpha1.Argument{{Name: "service"}, {Name: "window", Value: ptr.To("5m")}},
		Metrics: []rolloutv1alpha1.Metric{promMetric("success-rate", `sum(rate(ok{service="{{args.service}}"}[{{args.window}}]))`)},
	}
	latency := rolloutv1alpha1.AnalysisTemplateSpec{
		Args:    []rolloutv1alpha1.Argument{{Name: "service"}},
		Metrics: []rolloutv1alpha1.Metric{promMetric("latency", `p99{service="{{args.service}}"}`)},
	}
	run, err := NewRun("shop", "checkout-r2-wave1", []rolloutv1alpha1.AnalysisTemplateSpec{errorRate, latency},
		[]rolloutv1alpha1.Argument{{Name: "service", Value: ptr.To("checkout")}, {Name: "window", Value: ptr.To("10m")}, {Name: "unused", Value: ptr.To("x")}},
		[]string{"eu-1", "us-1"})
	if err != nil {
		t.Fatal(err)
	}
	if run.Namespace != "shop" || run.Name != "checkout-r2-wave1" || run.Kind != "AnalysisRun" || run.APIVersion != "rollout.flotilla.dev/v1alpha1" {
		t.Errorf("object = %+v", run.TypeMeta)
	}
	wantArgs := []rolloutv1alpha1.Argument{{Name: "service", Value: ptr.To("checkout")}, {Name: "window", Value: ptr.To("10m")}}
	if diff := cmp.Diff(wantArgs, run.Spec.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	var names []string
	for _, m := range run.Spec.Metrics {
		names = append(names, m.Name)
	}
	if diff := cmp.Diff([]string{"success-rate", "latency"}, names); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"eu-1", "us-1"}, run.Spec.Clusters); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}

	defaults, err := NewRun("shop", "r", []rolloutv1alpha1.AnalysisTemplateSpec{errorRate}, []rolloutv1alpha1.Argument{{Name: "service", Value: ptr.To("cart")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := *defaults.Spec.Args[1].Value; got != "5m" {
		t.Errorf("window = %s, want the template's default 5m", got)
	}

	// Each template's dryRun, retention and inconclusive apply to its own metrics.
	errorRate.DryRun = []rolloutv1alpha1.DryRun{{MetricName: "*"}}
	errorRate.MeasurementRetention = []rolloutv1alpha1.MeasurementRetention{{MetricName: "*", Limit: 30}}
	latency.Inconclusive = rolloutv1alpha1.InconclusiveFail
	errorRate.Inconclusive = rolloutv1alpha1.InconclusivePause
	both, err := NewRun("shop", "r", []rolloutv1alpha1.AnalysisTemplateSpec{errorRate, latency}, []rolloutv1alpha1.Argument{{Name: "service", Value: ptr.To("cart")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]rolloutv1alpha1.DryRun{{MetricName: "success-rate"}}, both.Spec.DryRun); diff != "" {
		t.Errorf("dryRun (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]rolloutv1alpha1.MeasurementRetention{{MetricName: "success-rate", Limit: 30}}, both.Spec.MeasurementRetention); diff != "" {
		t.Errorf("measurementRetention (-want +got):\n%s", diff)
	}
	if both.Spec.Inconclusive != rolloutv1alpha1.InconclusiveFail {
		t.Errorf("inconclusive = %q, want Fail when any template says so", both.Spec.Inconclusive)
	}

	// The run must not share memory with the templates.
	run.Spec.Metrics[0].Provider.Prometheus.Query = "changed"
	if errorRate.Metrics[0].Provider.Prometheus.Query == "changed" {
		t.Error("the run's metrics alias the template's")
	}
}

func TestNewRunErrors(t *testing.T) {
	withArgs := func(args []rolloutv1alpha1.Argument, metrics ...rolloutv1alpha1.Metric) rolloutv1alpha1.AnalysisTemplateSpec {
		return rolloutv1alpha1.AnalysisTemplateSpec{Args: args, Metrics: metrics}
	}
	job := rolloutv1alpha1.Metric{Name: "smoke", Provider: rolloutv1alpha1.MetricProvider{Job: &rolloutv1alpha1.JobMetric{Spec: runtime.RawExtension{Raw: []byte(`{"template":{"spec":{"containers":[{"name":"c","image":"{{args.image}}"}]}}}`)}}}}
	tests := []struct {
		name      string
		templates []rolloutv1alpha1.AnalysisTemplateSpec
		args      []rolloutv1alpha1.Argument
		wantError string
	}{
		{name: "no template", wantError: "no analysis template"},
		{name: "duplicate metric", templates: []rolloutv1alpha1.AnalysisTemplateSpec{withArgs(nil, promMetric("rate", "up")), withArgs(nil, promMetric("rate", "up"))}, wantError: `metric "rate" is in templates 0 and 1`},
		{name: "argument without value", templates: []rolloutv1alpha1.AnalysisTemplateSpec{withArgs([]rolloutv1alpha1.Argument{{Name: "service"}}, promMetric("rate", "{{args.service}}"))}, wantError: `argument "service" has no value`},
		{name: "run argument without value", templates: []rolloutv1alpha1.AnalysisTemplateSpec{withArgs([]rolloutv1alpha1.Argument{{Name: "service"}}, promMetric("rate", "{{args.service}}"))}, args: []rolloutv1alpha1.Argument{{Name: "service"}}, wantError: `argument "service" has no value`},
		{name: "undeclared reference", templates: []rolloutv1alpha1.AnalysisTemplateSpec{withArgs(nil, promMetric("rate", "{{args.service}}"))}, wantError: `templates[0]: metrics[0].provider.prometheus.query: {{args.service}} is not declared; add {name: service} to spec.args`},
		{name: "undeclared reference in a job", templates: []rolloutv1alpha1.AnalysisTemplateSpec{withArgs(nil, job)}, wantError: `metrics[0].provider.job.spec: {{args.image}} is not declared`},
		{name: "declared in another template only", templates: []rolloutv1alpha1.AnalysisTemplateSpec{
			withArgs([]rolloutv1alpha1.Argument{{Name: "service", Value: ptr.To("cart")}}, promMetric("a", "up")),
			withArgs(nil, promMetric("b", "{{args.service}}")),
		}, wantError: `templates[1]: metrics[0].provider.prometheus.query: {{args.service}} is not declared`},
		{name: "valueFrom left unresolved", templates: []rolloutv1alpha1.AnalysisTemplateSpec{withArgs([]rolloutv1alpha1.Argument{{Name: "image", ValueFrom: &policyv1alpha1.ArgumentValueFrom{FieldRef: &policyv1alpha1.ArgumentFieldRef{FieldPath: "spec.x"}}}}, promMetric("rate", "{{args.image}}"))}, wantError: `argument "image" takes its value from valueFrom`},
		{name: "dryRun of no metric", templates: []rolloutv1alpha1.AnalysisTemplateSpec{{Metrics: []rolloutv1alpha1.Metric{promMetric("a", "up")}, DryRun: []rolloutv1alpha1.DryRun{{MetricName: "b"}}}}, wantError: `dryRun[0].metricName: "b" is no metric of the template`},
		{name: "retention of no metric", templates: []rolloutv1alpha1.AnalysisTemplateSpec{{Metrics: []rolloutv1alpha1.Metric{promMetric("a", "up")}, MeasurementRetention: []rolloutv1alpha1.MeasurementRetention{{MetricName: "b", Limit: 3}}}}, wantError: `measurementRetention[0].metricName: "b"`},
		{name: "job metric without clusters", templates: []rolloutv1alpha1.AnalysisTemplateSpec{withArgs([]rolloutv1alpha1.Argument{{Name: "image", Value: ptr.To("curl")}}, job)}, wantError: "clusters: metrics[0] is a job metric"},
		{name: "conflicting defaults", templates: []rolloutv1alpha1.AnalysisTemplateSpec{
			withArgs([]rolloutv1alpha1.Argument{{Name: "w", Value: ptr.To("5m")}}, promMetric("a", "up")),
			withArgs([]rolloutv1alpha1.Argument{{Name: "w", Value: ptr.To("1m")}}, promMetric("b", "up")),
		}, wantError: `argument "w" has different defaults`},
		{name: "invalid metric", templates: []rolloutv1alpha1.AnalysisTemplateSpec{withArgs(nil, rolloutv1alpha1.Metric{Name: "x", Interval: "soon", Provider: promMetric("x", "up").Provider})}, wantError: "metrics[0].interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRun("ns", "r", tt.templates, tt.args, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantError) {
				t.Errorf("error = %v, want one containing %q", err, tt.wantError)
			}
		})
	}

	// Conflicting defaults are fine when the run decides.
	templates := []rolloutv1alpha1.AnalysisTemplateSpec{
		withArgs([]rolloutv1alpha1.Argument{{Name: "w", Value: ptr.To("5m")}}, promMetric("a", "up")),
		withArgs([]rolloutv1alpha1.Argument{{Name: "w", Value: ptr.To("1m")}}, promMetric("b", "up")),
	}
	if _, err := NewRun("ns", "r", templates, []rolloutv1alpha1.Argument{{Name: "w", Value: ptr.To("2m")}}, nil); err != nil {
		t.Errorf("run value over conflicting defaults: %v", err)
	}
}

// NewRunFrom records which template each metric came from; NewRun records none, so every
// metric is a namespace's.
func TestNewRunFromRecordsTemplates(t *testing.T) {
	fleet := rolloutv1alpha1.AnalysisTemplateSpec{Metrics: []rolloutv1alpha1.Metric{promMetric("fleet-errors", "up"), promMetric("fleet-latency", "up")}}
	mine := rolloutv1alpha1.AnalysisTemplateSpec{Metrics: []rolloutv1alpha1.Metric{promMetric("mine", "up")}}
	run, err := NewRunFrom("shop", "r", []Template{{Name: "fleet", ClusterScope: true, Spec: fleet}, {Name: "mine", Spec: mine}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []rolloutv1alpha1.AnalysisRunTemplate{
		{Name: "fleet", ClusterScope: true, Metrics: []string{"fleet-errors", "fleet-latency"}},
		{Name: "mine", Metrics: []string{"mine"}},
	}
	if diff := cmp.Diff(want, run.Spec.Templates); diff != "" {
		t.Errorf("templates (-want +got):\n%s", diff)
	}
	for metric, want := range map[string]bool{"fleet-errors": true, "fleet-latency": true, "mine": false, "unknown": false} {
		if got := PlatformMetric(run, metric); got != want {
			t.Errorf("PlatformMetric(%s) = %t, want %t", metric, got, want)
		}
	}
	plain, err := NewRun("shop", "r", []rolloutv1alpha1.AnalysisTemplateSpec{fleet}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Spec.Templates) != 0 || PlatformMetric(plain, "fleet-errors") {
		t.Errorf("NewRun recorded templates %+v; want none", plain.Spec.Templates)
	}
}
