package render

import (
	"strings"
	"testing"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

// An override that fails is reported on the binding, which more people read than the
// template's Secret: the error names the object, the overrider and the path, never a value of
// the object it was applied to.
func TestOverrideErrorsQuoteNoValueOfTheObject(t *testing.T) {
	secret := `
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: shop, labels: {app: LABEL-VALUE-hunter2}}
stringData: {password: STRING-DATA-hunter2}
data: {token: REFUQS1odW50ZXIy}
`
	value := func(raw string) *policyv1alpha1.JSON { return &policyv1alpha1.JSON{Raw: []byte(raw)} }
	for name, ov := range map[string]policyv1alpha1.Overriders{
		"an image override":           {ImageOverrider: []policyv1alpha1.ImageOverrider{{Component: "Tag", Operator: "replace", Value: "2"}}},
		"a replace of a missing path": {Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: "/stringData/missing/deep", Operator: "replace", Value: value(`1`)}}},
		"an add under a string":       {Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: "/stringData/password/x", Operator: "add", Value: value(`1`)}}},
		"a remove of a missing key":   {Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: "/data/token/0", Operator: "remove"}}},
		"an add past a list's end":    {Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: "/metadata/labels/app/9", Operator: "add", Value: value(`"x"`)}}},
		"a replace without a value":   {Plaintext: []policyv1alpha1.PlaintextOverrider{{Path: "/stringData/password", Operator: "replace"}}},
	} {
		err := Override(mustObj(t, secret), []policyv1alpha1.Overriders{ov})
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "REFUQS1odW50ZXIy") {
			t.Errorf("%s: the error quotes a value of the Secret: %v", name, err)
		}
	}
}
