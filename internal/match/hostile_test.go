package match

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

// Selectors reach this code from TargetPolicies, ClusterTargetPolicies and policies' resource
// selectors; one that does not parse (an operator Kubernetes does not know, In without values,
// a key or value that is no label's) selects nothing, never everything, whatever the labels.
func TestASelectorThatDoesNotParseSelectsNothing(t *testing.T) {
	set := map[string]string{"tier": "web", "team": "a"}
	for name, sel := range map[string]policyv1alpha1.LabelSelector{
		"an unknown operator":  {MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: "Matches", Values: []string{"web"}}}},
		"In without values":    {MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: "In"}}},
		"NotIn without values": {MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: "NotIn"}}},
		"a key with a space":   {MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "tier web", Operator: "Exists"}}},
		"a value with a slash": {MatchLabels: map[string]policyv1alpha1.LabelValue{"tier": "web/../admin"}},
		"an encoded value":     {MatchLabels: map[string]policyv1alpha1.LabelValue{"tier": "web%2F"}},
	} {
		if Labels(&sel, set) {
			t.Errorf("%s selects %v", name, set)
		}
		tmpl := &unstructured.Unstructured{}
		tmpl.SetAPIVersion("apps/v1")
		tmpl.SetKind("Deployment")
		tmpl.SetNamespace("shop")
		tmpl.SetName("web")
		tmpl.SetLabels(set)
		if _, ok := Resource([]policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", LabelSelector: &sel}}, tmpl); ok {
			t.Errorf("a resource selector with %s selects shop/web", name)
		}
	}
}
