package render

import (
	"encoding/json"
	"strings"
	"testing"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

// Overrides that change what object is written are refused naming the field; content
// changes pass.
func TestCheckIdentityRefusesChangedIdentity(t *testing.T) {
	base := `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team-a}
data: {a: "1"}
`
	for _, tc := range []struct {
		name      string
		patch     []policyv1alpha1.PlaintextOverrider
		wantField string // empty: allowed
	}{
		{"content", []policyv1alpha1.PlaintextOverrider{{Path: "/data/a", Operator: policyv1alpha1.OverrideReplace, Value: jsonValue(t, "2")}}, ""},
		{"labels", []policyv1alpha1.PlaintextOverrider{{Path: "/metadata/labels", Operator: policyv1alpha1.OverrideAdd, Value: jsonValue(t, map[string]string{"x": "y"})}}, ""},
		{"kind", []policyv1alpha1.PlaintextOverrider{{Path: "/kind", Operator: policyv1alpha1.OverrideReplace, Value: jsonValue(t, "ClusterRoleBinding")}}, "kind"},
		{"apiVersion", []policyv1alpha1.PlaintextOverrider{{Path: "/apiVersion", Operator: policyv1alpha1.OverrideReplace, Value: jsonValue(t, "rbac.authorization.k8s.io/v1")}}, "apiVersion"},
		{"namespace", []policyv1alpha1.PlaintextOverrider{{Path: "/metadata/namespace", Operator: policyv1alpha1.OverrideReplace, Value: jsonValue(t, "kube-system")}}, "metadata.namespace"},
		{"namespace removed", []policyv1alpha1.PlaintextOverrider{{Path: "/metadata/namespace", Operator: policyv1alpha1.OverrideRemove}}, "metadata.namespace"},
		{"name", []policyv1alpha1.PlaintextOverrider{{Path: "/metadata/name", Operator: policyv1alpha1.OverrideReplace, Value: jsonValue(t, "other")}}, "metadata.name"},
		{"whole metadata", []policyv1alpha1.PlaintextOverrider{{Path: "/metadata", Operator: policyv1alpha1.OverrideReplace, Value: jsonValue(t, map[string]string{"name": "settings"})}}, "metadata.namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := mustObj(t, base)
			before := obj.DeepCopy()
			if err := Override(obj, []policyv1alpha1.Overriders{{Plaintext: tc.patch}}); err != nil {
				t.Fatalf("Override: %v", err)
			}
			err := CheckIdentity(before, obj)
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("CheckIdentity = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckIdentity = nil, want an error naming %s", tc.wantField)
			}
			for _, want := range []string{"changed " + tc.wantField + " ", "ConfigMap team-a/settings", "content, not identity"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func jsonValue(t *testing.T, v any) *policyv1alpha1.JSON {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &policyv1alpha1.JSON{Raw: raw}
}
