package bench

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// scaleLayout says which members each template of the scale bench is placed on: every
// member, or (spread by a member label) the members of one label value, the values taken in
// turn, template i on value i mod the number of values.
type scaleLayout struct {
	label  string     // empty: every template on every member
	values []string   // one per group, sorted
	groups [][]string // members per group, sorted
}

// newScaleLayout groups the fleet's members by label; an empty label puts every template on
// every member. A member without the label is an error naming the flag.
func newScaleLayout(fleet *localfleet.Fleet, label string) (scaleLayout, error) {
	if label == "" {
		names := fleet.Names()
		sort.Strings(names)
		return scaleLayout{values: []string{""}, groups: [][]string{names}}, nil
	}
	by := map[string][]string{}
	for _, m := range fleet.Members {
		v, ok := m.Labels[label]
		if !ok {
			return scaleLayout{}, fmt.Errorf("--spread-by %s: member %s has no such label (its labels: %v); give a label every member carries, e.g. region", label, m.Name, m.Labels)
		}
		by[v] = append(by[v], m.Name)
	}
	l := scaleLayout{label: label}
	for _, v := range slices.Sorted(maps.Keys(by)) {
		slices.Sort(by[v])
		l.values, l.groups = append(l.values, v), append(l.groups, by[v])
	}
	return l, nil
}

// members are the members template i is placed on; none for an index below 0.
func (l scaleLayout) members(i int) []string {
	if i < 0 {
		return nil
	}
	return l.groups[i%len(l.groups)]
}

// objects is how many member objects n templates make.
func (l scaleLayout) objects(n int) int {
	k := 0
	for i := range n {
		k += len(l.members(i))
	}
	return k
}

// templatesOf lists the templates of n placed on member.
func (l scaleLayout) templatesOf(member string, n int) []int {
	var out []int
	for g, ms := range l.groups {
		if _, ok := slices.BinarySearch(ms, member); !ok {
			continue
		}
		for i := g; i < n; i += len(l.groups) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// perMember is how many templates of n each member holds.
func (l scaleLayout) perMember(n int) map[string]int {
	out := map[string]int{}
	for i := range n {
		for _, m := range l.members(i) {
			out[m]++
		}
	}
	return out
}

// deployment is template i, labelled with its group's value when spread.
func (l scaleLayout) deployment(ns string, i int) *appsv1.Deployment {
	d := scaleDeployment(ns, i)
	if l.label != "" {
		d.Labels[l.label] = l.values[i%len(l.values)]
	}
	return d
}

// policies place the templates of ns: one policy for every member, or one per group selecting
// its templates and its members by the label.
func (l scaleLayout) policies(ns string) []*policyv1alpha1.PropagationPolicy {
	deployments := policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment"}
	if l.label == "" {
		return []*policyv1alpha1.PropagationPolicy{{
			ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: ns},
			Spec:       policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{deployments}},
		}}
	}
	var out []*policyv1alpha1.PropagationPolicy
	for g, v := range l.values {
		match := &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{l.label: policyv1alpha1.LabelValue(v)}}
		sel := deployments
		sel.LabelSelector = match
		out = append(out, &policyv1alpha1.PropagationPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("group-%d", g), Namespace: ns},
			Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{sel},
				Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{LabelSelector: match}},
			},
		})
	}
	return out
}

// String says where the templates go, for the bench's heading.
func (l scaleLayout) String() string {
	if l.label == "" {
		return "on every member"
	}
	parts := make([]string, len(l.values))
	for g, v := range l.values {
		parts[g] = fmt.Sprintf("%s=%s (%d members)", l.label, v, len(l.groups[g]))
	}
	return "spread in turn over " + strings.Join(parts, ", ")
}

// templateIndex is i of the template named app-i; -1 for another name.
func templateIndex(name string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(name, "app-"))
	if err != nil || !strings.HasPrefix(name, "app-") {
		return -1
	}
	return i
}

// clustersPerTemplate is the fewest and most members a template is placed on.
func (l scaleLayout) clustersPerTemplate() (fewest, most int) {
	fewest = len(l.groups[0])
	for _, g := range l.groups {
		fewest, most = min(fewest, len(g)), max(most, len(g))
	}
	return fewest, most
}
