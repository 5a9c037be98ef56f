package analysis

import (
	"errors"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// NewRun builds an AnalysisRun from templates: their metrics together, in template order, and
// their arguments resolved, a value in args overriding a template's default. A template's
// valueFrom is the caller's to resolve into a value first (the release controller does). A
// metric name used twice, an argument left without a value, and a {{args.NAME}} its template
// does not declare are errors naming it. Arguments of args that no template declares are
// ignored. Each template's dryRun and measurementRetention apply to its own metrics ("*"
// becomes their names); the run's inconclusive is Fail when any template says Fail. The run is
// not created: the caller owns it.
//
// NewRun records no template names: every metric of the run counts as a namespace's (the
// strictest rules). NewRunFrom records where each metric came from.
func NewRun(namespace, name string, templates []rolloutv1alpha1.AnalysisTemplateSpec, args []rolloutv1alpha1.Argument, clusters []string) (*rolloutv1alpha1.AnalysisRun, error) {
	from := make([]Template, len(templates))
	for i, t := range templates {
		from[i] = Template{Spec: t}
	}
	return NewRunFrom(namespace, name, from, args, clusters)
}

// Template is a template a run is built from, with where it came from.
type Template struct {
	// Name of the AnalysisTemplate or ClusterAnalysisTemplate; a template without a name is
	// not recorded in the run's spec.templates.
	Name string
	// ClusterScope: a ClusterAnalysisTemplate run by a ClusterPropagationPolicy gate, so neither
	// its text nor its args come from a tenant; its metrics get the platform's egress and Pod
	// Security allowances.
	ClusterScope bool
	// Spec with valueFrom args already resolved.
	Spec rolloutv1alpha1.AnalysisTemplateSpec
}

// NewRunFrom is NewRun recording in spec.templates which template each metric came from and
// whether it is a ClusterAnalysisTemplate: the analysis controller gives only those metrics the
// platform's allowances (private and loopback addresses, Job pods not checked against Pod
// Security).
func NewRunFrom(namespace, name string, from []Template, args []rolloutv1alpha1.Argument, clusters []string) (*rolloutv1alpha1.AnalysisRun, error) {
	templates := make([]rolloutv1alpha1.AnalysisTemplateSpec, len(from))
	var sources []rolloutv1alpha1.AnalysisRunTemplate
	for i, t := range from {
		templates[i] = t.Spec
		if t.Name == "" {
			continue
		}
		source := rolloutv1alpha1.AnalysisRunTemplate{Name: t.Name, ClusterScope: t.ClusterScope}
		for _, m := range t.Spec.Metrics {
			source.Metrics = append(source.Metrics, m.Name)
		}
		sources = append(sources, source)
	}
	if len(templates) == 0 {
		return nil, errors.New("no analysis template: a run needs at least one")
	}
	given := argValues(args)
	var metrics []rolloutv1alpha1.Metric
	var dryRun []rolloutv1alpha1.DryRun
	var retention []rolloutv1alpha1.MeasurementRetention
	var inconclusive rolloutv1alpha1.InconclusivePolicy
	seenMetric := map[string]int{}
	var resolved []rolloutv1alpha1.Argument
	resolvedIndex := map[string]int{}
	for t, tmpl := range templates {
		if err := TemplateProblems(tmpl); err != nil {
			return nil, fmt.Errorf("templates[%d]: %w", t, err)
		}
		dryRun = append(dryRun, ownMetrics(tmpl, tmpl.DryRun, func(d rolloutv1alpha1.DryRun) string { return d.MetricName },
			func(d rolloutv1alpha1.DryRun, name string) rolloutv1alpha1.DryRun { d.MetricName = name; return d })...)
		retention = append(retention, ownMetrics(tmpl, tmpl.MeasurementRetention, func(r rolloutv1alpha1.MeasurementRetention) string { return r.MetricName },
			func(r rolloutv1alpha1.MeasurementRetention, name string) rolloutv1alpha1.MeasurementRetention {
				r.MetricName = name
				return r
			})...)
		switch {
		case tmpl.Inconclusive == rolloutv1alpha1.InconclusiveFail:
			inconclusive = rolloutv1alpha1.InconclusiveFail
		case inconclusive == "":
			inconclusive = tmpl.Inconclusive
		}
		for _, m := range tmpl.Metrics {
			if first, dup := seenMetric[m.Name]; dup {
				return nil, fmt.Errorf("metric %q is in templates %d and %d; rename one of them", m.Name, first, t)
			}
			seenMetric[m.Name] = t
			metrics = append(metrics, *m.DeepCopy())
		}
		for _, a := range tmpl.Args {
			value, ok := given[a.Name]
			if !ok && a.Value != nil {
				value, ok = *a.Value, true
			}
			if i, seen := resolvedIndex[a.Name]; seen {
				// Two templates declare it; without a run value their defaults must agree.
				if prev := resolved[i].Value; ok && prev != nil && *prev != value {
					return nil, fmt.Errorf("argument %q has different defaults in two templates (%q, %q); give it a value in the run's args", a.Name, *prev, value)
				}
				if ok && resolved[i].Value == nil {
					resolved[i].Value = &value
				}
				continue
			}
			resolvedIndex[a.Name] = len(resolved)
			arg := rolloutv1alpha1.Argument{Name: a.Name}
			if ok {
				arg.Value = &value
			}
			resolved = append(resolved, arg)
		}
	}
	for _, a := range resolved {
		if a.Value == nil {
			if fromValueFrom(templates, a.Name) {
				return nil, fmt.Errorf("argument %q takes its value from valueFrom, which a release resolves; give it a value in the run's args", a.Name)
			}
			return nil, fmt.Errorf("argument %q has no value; give it one in the run's args or a default in the template", a.Name)
		}
	}
	spec := rolloutv1alpha1.AnalysisRunSpec{
		Templates:            sources,
		Args:                 resolved,
		Metrics:              metrics,
		Clusters:             append([]string(nil), clusters...),
		DryRun:               dryRun,
		MeasurementRetention: retention,
		Inconclusive:         inconclusive,
	}
	if err := ValidateRun(spec); err != nil {
		return nil, err
	}
	return &rolloutv1alpha1.AnalysisRun{
		TypeMeta:   metav1.TypeMeta{APIVersion: rolloutv1alpha1.GroupVersion.String(), Kind: "AnalysisRun"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       spec,
	}, nil
}

// PlatformMetric says whether the run's metric came from a ClusterAnalysisTemplate.
func PlatformMetric(run *rolloutv1alpha1.AnalysisRun, metric string) bool {
	for _, t := range run.Spec.Templates {
		if !t.ClusterScope {
			continue
		}
		for _, m := range t.Metrics {
			if m == metric {
				return true
			}
		}
	}
	return false
}

// fromValueFrom says whether a template takes the argument from valueFrom.
func fromValueFrom(templates []rolloutv1alpha1.AnalysisTemplateSpec, name string) bool {
	for _, t := range templates {
		for _, a := range t.Args {
			if a.Name == name && a.ValueFrom != nil {
				return true
			}
		}
	}
	return false
}

// ownMetrics applies a template's per-metric entries to its own metrics in a run of several
// templates: "*" becomes one entry per metric of the template without an entry of its own.
func ownMetrics[T any](tmpl rolloutv1alpha1.AnalysisTemplateSpec, entries []T, nameOf func(T) string, named func(T, string) T) []T {
	var out []T
	own := map[string]bool{}
	var star *T
	for i, e := range entries {
		if nameOf(e) == "*" {
			star = &entries[i]
			continue
		}
		own[nameOf(e)] = true
		out = append(out, e)
	}
	if star != nil {
		for _, m := range tmpl.Metrics {
			if !own[m.Name] {
				out = append(out, named(*star, m.Name))
			}
		}
	}
	return out
}

// ValidateRun reports what would make every measurement of the run fail: invalid metrics, an
// argument without a value, a job metric without clusters. Paths are relative to the spec.
func ValidateRun(spec rolloutv1alpha1.AnalysisRunSpec) error {
	if err := ValidateMetrics(spec.Metrics); err != nil {
		return err
	}
	if err := checkArgReferences(spec.Metrics, argValues(spec.Args)); err != nil {
		return err
	}
	if len(spec.Clusters) > 0 {
		return nil
	}
	for i, m := range spec.Metrics {
		if m.Provider.Job != nil {
			return fmt.Errorf("clusters: metrics[%d] is a job metric, which runs in the run's clusters; list at least one", i)
		}
	}
	return nil
}

// checkArgReferences fails on the first {{args.NAME}} without a value, so a run that could
// never be measured is not created.
func checkArgReferences(metrics []rolloutv1alpha1.Metric, values map[string]string) error {
	for i, m := range metrics {
		texts := metricArgReferences(m)
		fields := make([]string, 0, len(texts))
		for f := range texts {
			fields = append(fields, f)
		}
		sort.Strings(fields)
		for _, f := range fields {
			if _, err := substitute(texts[f], values); err != nil {
				return fmt.Errorf("metrics[%d].%s: %w", i, f, err)
			}
		}
	}
	return nil
}
