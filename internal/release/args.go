package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/render"
	"github.com/flotilla-dev/flotilla/internal/revision"
	"github.com/flotilla-dev/flotilla/internal/traffic"
)

// maxArgValue is the longest value an argument holds (the API's MaxLength).
const maxArgValue = 4096

// argSource is what an argument's valueFrom reads: the template as recorded in the release's
// revision, and the workload hashes of the new and the stable revision. Each revision is read
// once, and only when an argument asks.
type argSource struct {
	c     *Controller
	s     *step
	loads map[int64]loadedRevision
}

type loadedRevision struct {
	obj  *unstructured.Unstructured
	hash string
	err  error
}

func (a *argSource) revision(ctx context.Context, rev int64) (*unstructured.Unstructured, string, error) {
	if l, ok := a.loads[rev]; ok {
		return l.obj, l.hash, l.err
	}
	if a.loads == nil {
		a.loads = map[int64]loadedRevision{}
	}
	obj, hash, err := revision.Load(ctx, a.c.Client, a.s.binding, rev)
	a.loads[rev] = loadedRevision{obj, hash, err}
	return obj, hash, err
}

// resolve gives the value of one valueFrom; field names the argument for the error, e.g.
// args[version].
func (a *argSource) resolve(ctx context.Context, field string, from *policyv1alpha1.ArgumentValueFrom) (string, error) {
	rel := a.s.rel
	switch {
	case from.FieldRef != nil:
		obj, _, err := a.revision(ctx, rel.Spec.Revision)
		if err != nil {
			return "", err
		}
		where := fmt.Sprintf("%s %s", rel.Spec.Resource.Kind, objectName(rel.Spec.Resource))
		v, err := fieldValue(obj.Object, from.FieldRef.FieldPath)
		if err != nil {
			return "", fmt.Errorf("%s.valueFrom.fieldRef.fieldPath: %w in %s", field, err, where)
		}
		if len(v) > maxArgValue {
			return "", fmt.Errorf("%s.valueFrom.fieldRef.fieldPath: %s in %s is %d bytes, more than an argument holds (%d); pick a smaller field", field, from.FieldRef.FieldPath, where, len(v), maxArgValue)
		}
		return v, nil
	case from.PodTemplateHashValue != nil:
		rev := rel.Spec.Revision
		if *from.PodTemplateHashValue == policyv1alpha1.PodTemplateHashStable {
			rev = a.s.revs.Stable
			if rev == 0 {
				return "", fmt.Errorf("%s.valueFrom.podTemplateHashValue: this release has no stable revision (it stages the first one); use Latest or a value", field)
			}
		}
		_, h, err := a.revision(ctx, rev)
		if err != nil {
			return "", err
		}
		if h == "" {
			return "", fmt.Errorf("%s.valueFrom.podTemplateHashValue: revision %d records no workload hash", field, rev)
		}
		return h, nil
	}
	return "", fmt.Errorf("%s.valueFrom: set fieldRef or podTemplateHashValue", field)
}

func objectName(r rolloutv1alpha1.ResourceReference) string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// resolveArgs turns the gate's args into run arguments after the release's own, and fills in
// the templates' valueFrom args that the gate does not set. A mistake is a configError naming
// the field.
func (c *Controller) resolveArgs(ctx context.Context, s *step, gate *policyv1alpha1.AnalysisGate, args []rolloutv1alpha1.Argument, specs []rolloutv1alpha1.AnalysisTemplateSpec) ([]rolloutv1alpha1.Argument, []rolloutv1alpha1.AnalysisTemplateSpec, error) {
	src := &argSource{c: c, s: s}
	given := map[string]bool{}
	var errs []error
	for _, a := range gate.Args {
		given[a.Name] = true
		value := a.Value
		if a.ValueFrom != nil {
			field := fmt.Sprintf("args[%s]", a.Name)
			if a.Value != "" {
				errs = append(errs, fmt.Errorf("%s: set value or valueFrom, not both", field))
				continue
			}
			v, err := src.resolve(ctx, field, a.ValueFrom)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			value = v
		}
		args = append(args, rolloutv1alpha1.Argument{Name: a.Name, Value: &value})
	}
	out := make([]rolloutv1alpha1.AnalysisTemplateSpec, len(specs))
	for i, spec := range specs {
		spec.Args = append([]rolloutv1alpha1.Argument(nil), spec.Args...)
		for j, a := range spec.Args {
			if a.ValueFrom == nil || given[a.Name] {
				continue
			}
			v, err := src.resolve(ctx, fmt.Sprintf("args[%s]", a.Name), a.ValueFrom)
			if err != nil {
				errs = append(errs, fmt.Errorf("template %s: %w", gate.Templates[i].TemplateName, err))
				continue
			}
			spec.Args[j] = rolloutv1alpha1.Argument{Name: a.Name, Value: &v}
		}
		out[i] = spec
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, &configError{err}
	}
	return args, out, nil
}

// fieldPathStep matches one step of a field path: .name, [N], ['key'] or ["key"].
var fieldPathStep = regexp.MustCompile(`^(?:\.?([A-Za-z_$][A-Za-z0-9_$-]*)|\[([0-9]+)\]|\['([^']+)'\]|\["([^"]+)"\])`)

// fieldValue reads path from obj: a string as its text, anything else as JSON.
func fieldValue(obj map[string]any, path string) (string, error) {
	var cur any = obj
	rest := path
	for walked := ""; rest != ""; {
		m := fieldPathStep.FindStringSubmatch(rest)
		if m == nil || (walked == "" && strings.HasPrefix(rest, ".")) {
			return "", fmt.Errorf("%s is not a field path; write it like spec.template.spec.containers[0].image or metadata.labels['app']", path)
		}
		walked += m[0]
		rest = rest[len(m[0]):]
		switch {
		case m[2] != "":
			list, ok := cur.([]any)
			i, _ := strconv.Atoi(m[2])
			if !ok || i >= len(list) {
				return "", fmt.Errorf("%s not found", walked)
			}
			cur = list[i]
		default:
			key := m[1] + m[3] + m[4]
			fields, ok := cur.(map[string]any)
			if !ok {
				return "", fmt.Errorf("%s not found", walked)
			}
			if cur, ok = fields[key]; !ok {
				return "", fmt.Errorf("%s not found", walked)
			}
		}
	}
	if s, ok := cur.(string); ok {
		return s, nil
	}
	data, err := json.Marshal(cur)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return string(data), nil
}

// canaryBaselineArgs are the arguments that let one query judge the canary against the
// baseline across clusters: the clusters this release has updated so far (canary) and the
// placed clusters still on the stable revision (baseline), comma-separated and as a PromQL
// regex (cluster=~"{{args.canary-cluster-regex}}"). A ratio of the two error rates in one
// query, with successCondition: result[0] <= 1.5, fails a canary three times worse than the
// baseline even when its absolute error rate is below any fixed threshold. With no baseline
// left (the last wave), the baseline regex matches no cluster.
func canaryBaselineArgs(placed, updated []string) []rolloutv1alpha1.Argument {
	var canary, baseline []string
	for _, c := range placed {
		if slices.Contains(updated, c) {
			canary = append(canary, c)
		} else {
			baseline = append(baseline, c)
		}
	}
	slices.Sort(canary)
	slices.Sort(baseline)
	regex := func(cs []string) string {
		if len(cs) == 0 {
			return "^$" // matches no cluster label
		}
		return strings.Join(cs, "|")
	}
	value := func(v string) *string { return &v }
	return []rolloutv1alpha1.Argument{
		{Name: "canary-clusters", Value: value(strings.Join(canary, ","))},
		{Name: "canary-cluster-regex", Value: value(regex(canary))},
		{Name: "baseline-clusters", Value: value(strings.Join(baseline, ","))},
		{Name: "baseline-cluster-regex", Value: value(regex(baseline))},
	}
}

// workloadArgs name the canary and the stable pods of the workload for queries in every
// cluster: label selectors (canary-selector, stable-selector, as kubectl and the Kubernetes API
// take them), the Deployments' names (canary-name, stable-name), and the Services of a routed
// or blue-green release (canary-service, stable-service; preview-service, active-service).
// The stable selector excludes the canary by its role label, so it holds with or without
// traffic routing.
func workloadArgs(name string, matchLabels map[string]string, routing *policyv1alpha1.RolloutStrategy) []rolloutv1alpha1.Argument {
	keys := make([]string, 0, len(matchLabels))
	for k := range matchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var base []string
	for _, k := range keys {
		base = append(base, k+"="+matchLabels[k])
	}
	value := func(v string) *string { return &v }
	args := []rolloutv1alpha1.Argument{
		{Name: "canary-selector", Value: value(strings.Join(append(slices.Clone(base), traffic.RoleLabel+"="+traffic.RoleCanary), ","))},
		{Name: "stable-selector", Value: value(strings.Join(append(slices.Clone(base), traffic.RoleLabel+"!="+traffic.RoleCanary), ","))},
		{Name: "canary-name", Value: value(render.CanaryName(name))},
		{Name: "stable-name", Value: value(name)},
	}
	if routing == nil {
		return args
	}
	if tr := routing.TrafficRouting; tr != nil {
		args = append(args, rolloutv1alpha1.Argument{Name: "canary-service", Value: value(tr.CanaryService)},
			rolloutv1alpha1.Argument{Name: "stable-service", Value: value(tr.StableService)})
	}
	if bg := routing.BlueGreen; bg != nil {
		args = append(args, rolloutv1alpha1.Argument{Name: "preview-service", Value: value(bg.PreviewService)},
			rolloutv1alpha1.Argument{Name: "active-service", Value: value(bg.ActiveService)})
	}
	return args
}
