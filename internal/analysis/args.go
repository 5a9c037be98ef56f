package analysis

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// argReference matches {{args.NAME}}, spaces inside the braces allowed.
var argReference = regexp.MustCompile(`\{\{\s*args\.([^{}\s]+)\s*\}\}`)

// argValues returns the run's arguments that have a value, by name.
func argValues(args []rolloutv1alpha1.Argument) map[string]string {
	values := make(map[string]string, len(args))
	for _, a := range args {
		if a.Value != nil {
			values[a.Name] = *a.Value
		}
	}
	return values
}

// substitute replaces every {{args.NAME}} in s; an argument without a value is an error.
func substitute(s string, values map[string]string) (string, error) {
	var missing string
	out := argReference.ReplaceAllStringFunc(s, func(ref string) string {
		name := argReference.FindStringSubmatch(ref)[1]
		v, ok := values[name]
		if !ok && missing == "" {
			missing = name
		}
		return v
	})
	if missing != "" {
		return "", fmt.Errorf("argument %q has no value; give it one in the run's args or the template's", missing)
	}
	return out, nil
}

// substituteJSON replaces {{args.NAME}} in every string of a JSON document. Working on the
// decoded document keeps it valid JSON whatever characters the values hold.
func substituteJSON(raw []byte, values map[string]string) ([]byte, error) {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	doc, err := substituteAny(doc, values)
	if err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

func substituteAny(v any, values map[string]string) (any, error) {
	switch t := v.(type) {
	case string:
		return substitute(t, values)
	case []any:
		for i := range t {
			s, err := substituteAny(t[i], values)
			if err != nil {
				return nil, err
			}
			t[i] = s
		}
	case map[string]any:
		for k := range t {
			s, err := substituteAny(t[k], values)
			if err != nil {
				return nil, err
			}
			t[k] = s
		}
	}
	return v, nil
}

// metricArgReferences lists the texts of a metric that may hold {{args.NAME}}, with their field
// paths relative to the metric.
func metricArgReferences(m rolloutv1alpha1.Metric) map[string]string {
	texts := map[string]string{}
	providerArgReferences(texts, "provider", m.Provider)
	if m.Baseline != nil {
		providerArgReferences(texts, "baseline", *m.Baseline)
	}
	return texts
}

// providerArgReferences adds a provider's texts that may hold {{args.NAME}}, by field path.
func providerArgReferences(texts map[string]string, field string, p rolloutv1alpha1.MetricProvider) {
	if p.Prometheus != nil {
		texts[field+".prometheus.query"] = p.Prometheus.Query
	}
	if p.Web != nil {
		texts[field+".web.url"] = p.Web.URL
		texts[field+".web.body"] = p.Web.Body
		for i, h := range p.Web.Headers {
			texts[fmt.Sprintf("%s.web.headers[%d].value", field, i)] = h.Value
		}
	}
	if p.Job != nil {
		texts[field+".job.spec"] = string(p.Job.Spec.Raw)
	}
}

// TemplateProblems reports what in a template keeps a run from being built, each naming its
// field relative to the template's spec and the fix: a {{args.NAME}} that spec.args does not
// declare (admission refuses those in queries, urls, bodies and headers; a Job spec is checked
// only here), and a dryRun or measurementRetention entry naming no metric.
func TemplateProblems(spec rolloutv1alpha1.AnalysisTemplateSpec) error {
	declared := map[string]bool{}
	for _, a := range spec.Args {
		declared[a.Name] = true
	}
	metrics := map[string]bool{"*": true}
	var errs []error
	for i, m := range spec.Metrics {
		metrics[m.Name] = true
		texts := metricArgReferences(m)
		fields := make([]string, 0, len(texts))
		for f := range texts {
			fields = append(fields, f)
		}
		sort.Strings(fields)
		for _, f := range fields {
			seen := map[string]bool{}
			for _, ref := range argReference.FindAllStringSubmatch(texts[f], -1) {
				if name := ref[1]; !declared[name] && !seen[name] {
					seen[name] = true
					errs = append(errs, fmt.Errorf("metrics[%d].%s: {{args.%s}} is not declared; add {name: %s} to spec.args (with a value, a valueFrom, or neither for the release to give) or fix the reference", i, f, name, name))
				}
			}
		}
	}
	for i, d := range spec.DryRun {
		if !metrics[d.MetricName] {
			errs = append(errs, fmt.Errorf("dryRun[%d].metricName: %q is no metric of the template; name one of spec.metrics or *", i, d.MetricName))
		}
	}
	for i, r := range spec.MeasurementRetention {
		if !metrics[r.MetricName] {
			errs = append(errs, fmt.Errorf("measurementRetention[%d].metricName: %q is no metric of the template; name one of spec.metrics or *", i, r.MetricName))
		}
		if r.Limit < 1 || r.Limit > MaxRetainedMeasurements {
			errs = append(errs, fmt.Errorf("measurementRetention[%d].limit: %d is out of range; keep from 1 to %d measurements", i, r.Limit, MaxRetainedMeasurements))
		}
	}
	return errors.Join(errs...)
}
