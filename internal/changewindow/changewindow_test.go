package changewindow

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/robfig/cron/v3"
)

func mustWindow(t *testing.T, namespace, name string, spec rolloutv1alpha1.ChangeWindowSpec) *Window {
	t.Helper()
	w, err := New(namespace, name, spec)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAWindowIsOpenFromEachFiringForItsDurationInItsTimeZone(t *testing.T) {
	// Fridays 22:00 in Berlin (UTC+1 in November) for 48h: open 21:00 UTC Friday to 21:00 UTC Sunday.
	w := mustWindow(t, "", "weekend", rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowDeny, Schedule: "0 22 * * fri", Duration: "48h", TimeZone: "Europe/Berlin"})
	for _, c := range []struct {
		now    string
		open   bool
		closes string
	}{
		{"2026-11-27T20:59:00Z", false, ""},
		{"2026-11-27T21:00:00Z", true, "2026-11-29T21:00:00Z"},
		{"2026-11-29T20:59:59Z", true, "2026-11-29T21:00:00Z"},
		{"2026-11-29T21:00:00Z", false, ""},
	} {
		open, closes := w.OpenAt(at(t, c.now))
		if open != c.open || (open && !closes.Equal(at(t, c.closes))) {
			t.Errorf("at %s: open=%v closes=%s, want %v %s", c.now, open, closes.UTC(), c.open, c.closes)
		}
	}
	opens, closes := w.NextOpen(at(t, "2026-11-30T00:00:00Z"))
	if !opens.Equal(at(t, "2026-12-04T21:00:00Z")) || !closes.Equal(at(t, "2026-12-06T21:00:00Z")) {
		t.Errorf("next opening %s-%s, want Friday 4 December 21:00 UTC to Sunday", opens.UTC(), closes.UTC())
	}
}

func TestOverlappingOpeningsCloseWithTheLast(t *testing.T) {
	// Every hour for 90 minutes: once open, it never closes.
	w := mustWindow(t, "", "always", rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowDeny, Schedule: "@hourly", Duration: "90m"})
	open, closes := w.OpenAt(at(t, "2026-11-27T10:30:00Z"))
	if !open || closes.Before(at(t, "2026-12-27T00:00:00Z")) {
		t.Errorf("open=%v closes=%s: overlapping openings must chain", open, closes)
	}
	// Every hour for 30 minutes closes at half past.
	w = mustWindow(t, "", "half", rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowDeny, Schedule: "0 * * * *", Duration: "30m"})
	if open, closes := w.OpenAt(at(t, "2026-11-27T10:10:00Z")); !open || !closes.Equal(at(t, "2026-11-27T10:30:00Z")) {
		t.Errorf("open=%v closes=%s, want open until 10:30", open, closes)
	}
}

func TestHeldAtDenyAllowAndSelection(t *testing.T) {
	now := at(t, "2026-11-27T12:00:00Z")
	west := map[string]string{"region": "west"}
	east := map[string]string{"region": "east"}
	freeze := mustWindow(t, "", "freeze", rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowDeny, Schedule: "0 12 * * *", Duration: "2h",
		ClusterSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "west"}}})
	web := Subject{Namespace: "shop", Labels: map[string]string{"app": "web"}}
	h, held := HeldAt([]*Window{freeze}, web, west, now)
	if !held || !h.Deny || !h.Until.Equal(at(t, "2026-11-27T14:00:00Z")) || !h.Overridable {
		t.Fatalf("west: %+v held=%v, want held by freeze until 14:00, overridable", h, held)
	}
	if got := h.String(); got != "held by change window freeze until 2026-11-27 14:00:00 UTC" {
		t.Errorf("message %q", got)
	}
	if _, held := HeldAt([]*Window{freeze}, web, east, now); held {
		t.Error("east is not selected by the freeze")
	}

	// A team's window holds only its own namespace.
	team := mustWindow(t, "shop", "nights", rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowDeny, Schedule: "0 12 * * *", Duration: "1h", Overridable: ptr.To(false)})
	if _, held := HeldAt([]*Window{team}, Subject{Namespace: "bank"}, east, now); held {
		t.Error("a ChangeWindow of shop held bank's workload")
	}
	if h, held := HeldAt([]*Window{team}, web, east, now); !held || h.Overridable || !strings.Contains(h.String(), "no override") {
		t.Errorf("shop's own window: %+v held=%v", h, held)
	}

	// Allow windows: outside every one that selects the workload, it waits for the next opening.
	office := mustWindow(t, "", "office", rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowAllow, Schedule: "0 9 * * 1-5", Duration: "8h",
		WorkloadSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"tier": "critical"}}})
	critical := Subject{Namespace: "shop", Labels: map[string]string{"tier": "critical"}}
	if _, held := HeldAt([]*Window{office}, critical, east, now); held {
		t.Error("Friday 12:00 is inside the office allow window")
	}
	evening := at(t, "2026-11-27T18:00:00Z")
	if h, held := HeldAt([]*Window{office}, critical, east, evening); !held || h.Deny || !h.Until.Equal(at(t, "2026-11-30T09:00:00Z")) {
		t.Errorf("Friday evening: %+v held=%v, want held until Monday 09:00", h, held)
	}
	if _, held := HeldAt([]*Window{office}, web, east, evening); held {
		t.Error("a workload the allow window does not select is not held by it")
	}

	// Applications by their labels.
	apps := mustWindow(t, "", "payments", rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowDeny, Schedule: "0 12 * * *", Duration: "1h",
		ApplicationSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"domain": "payments"}}})
	if _, held := HeldAt([]*Window{apps}, Subject{Namespace: "shop", HasApplication: true, ApplicationLabels: map[string]string{"domain": "payments"}}, east, now); !held {
		t.Error("the payments Application is not held")
	}
	if _, held := HeldAt([]*Window{apps}, web, east, now); held {
		t.Error("a template of no Application is held by an application selector")
	}
}

func TestBadWindowsNameTheField(t *testing.T) {
	for _, c := range []struct {
		spec  rolloutv1alpha1.ChangeWindowSpec
		field string
	}{
		{rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowDeny, Schedule: "61 * * * *", Duration: "1h"}, "spec.schedule"},
		{rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowDeny, Schedule: "@daily", Duration: "0s"}, "spec.duration"},
		{rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowDeny, Schedule: "@daily", Duration: "1h", TimeZone: "Mars/Olympus"}, "spec.timeZone"},
	} {
		if _, err := New("", "w", c.spec); err == nil || !strings.HasPrefix(err.Error(), c.field) {
			t.Errorf("%+v: %v, want an error naming %s", c.spec, err, c.field)
		}
	}
}

// The CRD refuses with CronPattern what the parser refuses; the parser is the authority for
// the few it catches past the pattern (a range running backwards).
func TestTheCRDCronPatternAgreesWithTheParser(t *testing.T) {
	re := regexp.MustCompile(rolloutv1alpha1.CronPattern)
	for _, s := range []string{"* * * * *", "0 22 * * 5", "0 22 * * FRI", "*/15 9-17 * * mon-fri", "0 0 1,15 * ?", "30 3 * jan-mar,dec 0", "@daily", "@weekly", "59 23 31 12 6"} {
		if !re.MatchString(s) {
			t.Errorf("%q: the pattern refuses a schedule the parser takes", s)
		}
		if _, err := parser.Parse(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 7", "* * * *", "* * * * * *", "*/0 * * * *", "@every 1h", "tomorrow", "0 22 * * 5; rm"} {
		if re.MatchString(s) {
			t.Errorf("%q: the pattern takes a schedule it should refuse", s)
		}
	}
}

func TestTheCRDsCarryCronPattern(t *testing.T) {
	for _, crdFile := range []string{"rollout.flotilla.dev_changewindows.yaml", "rollout.flotilla.dev_clusterchangewindows.yaml"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", crdFile))
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatal(err)
		}
		rules := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["schedule"].XValidations
		if len(rules) != 1 || rules[0].Rule != "self.matches('"+rolloutv1alpha1.CronPattern+"')" {
			t.Errorf("%s: the schedule's validation rule is not rolloutv1alpha1.CronPattern; copy the constant into the marker", crdFile)
		}
	}
}

// countingSchedule counts the firings a window walks.
type countingSchedule struct {
	cron.Schedule
	calls int
}

func (c *countingSchedule) Next(t time.Time) time.Time { c.calls++; return c.Schedule.Next(t) }

// A window that never closes (every minute, open a year), as any team may write, costs a
// release a bounded walk once, however many clusters it asks about.
func TestAWindowThatNeverClosesCostsABoundedWalkOnce(t *testing.T) {
	w := mustWindow(t, "shop", "forever", rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowDeny, Schedule: "* * * * *", Duration: "8760h"})
	counter := &countingSchedule{Schedule: w.schedule}
	w.schedule = counter
	now := at(t, "2026-11-27T12:00:30Z")
	for i := range 100 {
		h, held := HeldAt([]*Window{w}, Subject{Namespace: "shop"}, map[string]string{"n": fmt.Sprint(i)}, now)
		if !held || !h.Until.After(now) {
			t.Fatalf("cluster %d: %+v held=%v", i, h, held)
		}
	}
	if counter.calls > maxFirings+2 {
		t.Errorf("%d firings walked for 100 clusters, want at most %d (one walk)", counter.calls, maxFirings+2)
	}
}
