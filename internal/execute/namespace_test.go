package execute

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/names"
)

// A member namespace the executor creates for a namespaced policy's objects enforces the
// platform's Pod Security level; others carry Flotilla's mark only.
func TestNamespaceLabels(t *testing.T) {
	for _, tc := range []struct {
		level string
		want  map[string]string
	}{
		{"", map[string]string{workv1alpha1.ManagedByLabel: workv1alpha1.ManagedByValue}},
		{"baseline", map[string]string{workv1alpha1.ManagedByLabel: workv1alpha1.ManagedByValue,
			"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "latest"}},
		{"restricted", map[string]string{workv1alpha1.ManagedByLabel: workv1alpha1.ManagedByValue,
			"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}},
	} {
		got, err := namespaceLabels(tc.level)
		if err != nil {
			t.Fatalf("%q: %v", tc.level, err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%q: labels (-want +got):\n%s", tc.level, d)
		}
	}
	if _, err := namespaceLabels("strict"); err == nil || !strings.Contains(err.Error(), names.PodSecurityLevelAnnotation) {
		t.Errorf("unknown level: error = %v, want it to name the annotation", err)
	}
}
