package detector

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/eventstest"
)

// An ignoreFields pointer that names no element of the selected template's lists (a container
// name misspelt) would silently ignore nothing: the template gets one warning naming the
// policy, the field and the pointer. A field the template leaves unset is no mistake.
func TestIgnoreFieldThatMatchesNothingIsReported(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	d := &Detector{Recorder: rec}
	tmpl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"namespace": "shop", "name": "web"},
		"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "web", "image": "web:1"}}}}},
	}}
	dc := &policyv1alpha1.DriftCorrection{IgnoreFields: []string{"/spec/paused", "/spec/template/spec/containers/nosuch/image", "/spec/template/spec/containers/web/image"}}
	for range 3 { // reconciled again: told once per generation
		d.warnIgnoredNothing(workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "web"}, dc, tmpl)
	}
	got := eventstest.Drain(rec)
	if len(got) != 1 {
		t.Fatalf("events %q, want one warning", got)
	}
	tmpl.SetGeneration(tmpl.GetGeneration() + 1)
	d.warnIgnoredNothing(workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "web"}, dc, tmpl)
	if again := eventstest.Drain(rec); len(again) != 1 {
		t.Errorf("a new generation still misses the container: events %q, want one more warning", again)
	}
	for _, part := range []string{"Warning IgnoreFieldMatchesNothing", "PropagationPolicy shop/web", "spec.driftCorrection.ignoreFields[1]", "/spec/template/spec/containers/nosuch/image"} {
		if !strings.Contains(got[0], part) {
			t.Errorf("event %q does not say %q", got[0], part)
		}
	}
}
