package analysis

import (
	"errors"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// NewRun builds an AnalysisRun from templates: their metrics together, in template order, and
// their arguments resolved, a value in args overriding a template's default. A metric name
// used twice, an argument left without a value, and a {{args.NAME}} no template declares are
// errors naming it. Arguments of args that no template declares are ignored. The run is not
// created: the caller owns it.
func NewRun(namespace, name string, templates []rolloutv1alpha1.AnalysisTemplateSpec, args []rolloutv1alpha1.Argument, clusters []string) (*rolloutv1alpha1.AnalysisRun, error) {
	if len(templates) == 0 {
		return nil, errors.New("no analysis template: a run needs at least one")
	}
	given := argValues(args)
	var metrics []rolloutv1alpha1.Metric
	seenMetric := map[string]int{}
	var resolved []rolloutv1alpha1.Argument
	resolvedIndex := map[string]int{}
	for t, tmpl := range templates {
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
			return nil, fmt.Errorf("argument %q has no value; give it one in the run's args or a default in the template", a.Name)
		}
	}
	spec := rolloutv1alpha1.AnalysisRunSpec{
		Args:     resolved,
		Metrics:  metrics,
		Clusters: append([]string(nil), clusters...),
	}
	if err := validateRun(spec); err != nil {
		return nil, err
	}
	return &rolloutv1alpha1.AnalysisRun{
		TypeMeta:   metav1.TypeMeta{APIVersion: rolloutv1alpha1.GroupVersion.String(), Kind: "AnalysisRun"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       spec,
	}, nil
}

// validateRun reports what would make every measurement of the run fail: invalid metrics, an
// argument without a value, a job metric without clusters. Paths are relative to the spec.
func validateRun(spec rolloutv1alpha1.AnalysisRunSpec) error {
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
