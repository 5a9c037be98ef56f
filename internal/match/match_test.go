package match

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

// A selector naming a namespace selects only there: a namespaced policy's selector naming
// another namespace (Ready=False InvalidSelector) selects nothing, not its whole namespace.
func TestASelectorsNamespaceRestrictsIt(t *testing.T) {
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion("apps/v1")
	tmpl.SetKind("Deployment")
	tmpl.SetNamespace("shop")
	tmpl.SetName("web")
	for _, tt := range []struct {
		namespace string
		want      bool
	}{{"", true}, {"shop", true}, {"payments", false}} {
		_, got := Resource([]policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: tt.namespace}}, tmpl)
		if got != tt.want {
			t.Errorf("selector namespace %q selects shop/web: %v, want %v", tt.namespace, got, tt.want)
		}
	}
}
