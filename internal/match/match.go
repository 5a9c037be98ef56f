// Package match decides whether a policy's selectors select a template or a cluster. The
// detector, the scheduler and the override step share it so "selects" means one thing.
// It is pure.
package match

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

// Specificity of a selector that matched: by name beats by labels beats by kind alone.
const (
	ByKind   = 1
	ByLabels = 2
	ByName   = 3
)

// Resource reports whether any selector matches the template and how specific the best
// matching one is. A selector's namespace restricts it: a cluster-wide policy's to that
// namespace; a namespaced policy only ever sees its own namespace, so a selector of it naming
// another one selects nothing (its policy reads Ready=False InvalidSelector), never the
// policy's whole namespace.
func Resource(sels []policyv1alpha1.ResourceSelector, tmpl *unstructured.Unstructured) (int, bool) {
	best, ok := 0, false
	for _, s := range sels {
		if s.APIVersion != tmpl.GetAPIVersion() || s.Kind != tmpl.GetKind() {
			continue
		}
		if s.Namespace != "" && s.Namespace != tmpl.GetNamespace() {
			continue
		}
		spec := ByKind
		switch {
		case s.Name != "":
			if s.Name != tmpl.GetName() {
				continue
			}
			spec = ByName
		case s.LabelSelector != nil:
			if !Labels(s.LabelSelector, tmpl.GetLabels()) {
				continue
			}
			spec = ByLabels
		}
		if spec > best {
			best, ok = spec, true
		}
	}
	return best, ok
}

// Labels reports whether a selector matches a label set; a malformed selector matches nothing.
func Labels(sel *policyv1alpha1.LabelSelector, set map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel.AsMetav1())
	return err == nil && s.Matches(labels.Set(set))
}

// Cluster reports whether a cluster affinity selects a cluster; nil selects every cluster.
func Cluster(a *policyv1alpha1.ClusterAffinity, cl *clusterv1alpha1.Cluster) bool {
	if a == nil {
		return true
	}
	for _, n := range a.Exclude {
		if n == cl.Name {
			return false
		}
	}
	if len(a.ClusterNames) > 0 {
		found := false
		for _, n := range a.ClusterNames {
			if n == cl.Name {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return a.LabelSelector == nil || Labels(a.LabelSelector, cl.Labels)
}
