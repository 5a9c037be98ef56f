package application

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
)

// The typed status apply claims exactly the fields the untyped one (the status struct
// converted to a map) claimed: the same object is sent, empty fields left out the same way, so
// the field manager's ownership is unchanged by the switch.
func TestStatusApplySendsWhatTheStatusStructDid(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Generation: 4},
		Status: appsv1alpha1.ApplicationStatus{
			ObservedGeneration: 3, Commit: "0123456789abcdef", LastFetchTime: &at,
			Objects:  []appsv1alpha1.ApplicationObject{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, {APIVersion: "v1", Kind: "Service", Name: "web"}},
			Clusters: []string{"east"}, TargetPolicies: []string{"shop/web"}, // the targeting controller's: never sent here
			Conditions: []metav1.Condition{
				{Type: appsv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Applied", Message: "2 objects", ObservedGeneration: 3, LastTransitionTime: at},
				{Type: "Placed", Status: metav1.ConditionTrue, Reason: "Placed", LastTransitionTime: at}, // the targeting controller's
			},
		}}
	for name, st := range map[string]*status{
		"a fresh Application": statusOf(&appsv1alpha1.Application{ObjectMeta: app.ObjectMeta}),
		"carried over":        statusOf(app),
		"stalled": func() *status {
			st := statusOf(app)
			st.stalled(app, appsv1alpha1.ReasonFetchFailed, "no such repository")
			return st
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			want := untypedStatusApply(t, app, &st.s)
			got := jsonMap(t, st.apply(app))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the typed apply sends another object (-untyped +typed):\n%s", diff)
			}
		})
	}
}

// untypedStatusApply is the object the untyped status apply sent for status.
func untypedStatusApply(t *testing.T, app *appsv1alpha1.Application, status *appsv1alpha1.ApplicationStatus) map[string]any {
	t.Helper()
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		t.Fatal(err)
	}
	return jsonMap(t, map[string]any{
		"apiVersion": appsv1alpha1.GroupVersion.String(), "kind": "Application",
		"metadata": map[string]any{"name": app.Name, "namespace": app.Namespace},
		"status":   st,
	})
}

func jsonMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
