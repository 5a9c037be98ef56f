package changewindow

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/testenv"
)

// The API server refuses a window that could not open or close, naming the field; what it
// takes, List reads.
func TestTheAPIServerRefusesBadWindowsNamingTheField(t *testing.T) {
	ctx := context.Background()
	_, c := testenv.Start(t)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
		t.Fatal(err)
	}
	good := rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowDeny, Schedule: "0 22 * * fri", Duration: "48h", TimeZone: "Europe/Berlin"}
	for _, c2 := range []struct {
		name   string
		change func(*rolloutv1alpha1.ChangeWindowSpec)
		field  string
	}{
		{"cron", func(s *rolloutv1alpha1.ChangeWindowSpec) { s.Schedule = "every friday" }, "spec.schedule"},
		{"minute", func(s *rolloutv1alpha1.ChangeWindowSpec) { s.Schedule = "75 22 * * 5" }, "spec.schedule"},
		{"zone", func(s *rolloutv1alpha1.ChangeWindowSpec) { s.TimeZone = "Mars/Olympus" }, "spec.timeZone"},
		{"zero", func(s *rolloutv1alpha1.ChangeWindowSpec) { s.Duration = "0s" }, "spec.duration"},
		{"days", func(s *rolloutv1alpha1.ChangeWindowSpec) { s.Duration = "2d" }, "spec.duration"},
		{"kind", func(s *rolloutv1alpha1.ChangeWindowSpec) { s.Kind = "Maybe" }, "spec.kind"},
	} {
		spec := good
		c2.change(&spec)
		err := c.Create(ctx, &rolloutv1alpha1.ClusterChangeWindow{ObjectMeta: metav1.ObjectMeta{Name: "bad-" + c2.name}, Spec: spec})
		if err == nil || !strings.Contains(err.Error(), c2.field) {
			t.Errorf("%s: %v, want a refusal naming %s", c2.name, err, c2.field)
		}
	}
	err := c.Create(ctx, &rolloutv1alpha1.ChangeWindow{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "other"},
		Spec: rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowDeny, Schedule: "@daily", Duration: "1h", Namespaces: []string{"bank"}}})
	if err == nil || !strings.Contains(err.Error(), "spec.namespaces") {
		t.Errorf("a team's window naming another namespace: %v, want a refusal naming spec.namespaces", err)
	}

	if err := c.Create(ctx, &rolloutv1alpha1.ClusterChangeWindow{ObjectMeta: metav1.ObjectMeta{Name: "weekend"}, Spec: good}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &rolloutv1alpha1.ChangeWindow{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "nights"},
		Spec: rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowAllow, Schedule: "0 9 * * 1-5", Duration: "8h"}}); err != nil {
		t.Fatal(err)
	}
	windows, bad, err := List(ctx, c, "shop", false)
	if err != nil || len(bad) > 0 || len(windows) != 2 {
		t.Fatalf("List: %d windows, bad %v, err %v", len(windows), bad, err)
	}
	for _, w := range windows {
		if !w.Overridable() {
			t.Errorf("%s: overridable defaults to true", w.Name)
		}
	}
	if windows[1].Name != "shop/nights" || windows[0].Name != "weekend" {
		t.Errorf("names %s, %s", windows[0].Name, windows[1].Name)
	}
}
