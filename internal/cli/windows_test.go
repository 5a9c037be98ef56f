package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/changewindow"
)

func TestWindowsListsWhatIsOpenAndWhatOpensNext(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 30, 0, 0, time.UTC)
	freeze, err := changewindow.New("", "sale", rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowDeny, Schedule: "0 12 * * *", Duration: "2h", Overridable: ptr.To(false),
		ClusterSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "west"}}})
	if err != nil {
		t.Fatal(err)
	}
	office, err := changewindow.New("shop", "office", rolloutv1alpha1.ChangeWindowSpec{Kind: rolloutv1alpha1.WindowAllow, Schedule: "0 9 * * 1-5", Duration: "8h", TimeZone: "Europe/Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printWindows(&out, []*changewindow.Window{freeze, office}, nil, "", nil, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%s", out.String())
	}
	for _, want := range []string{"sale", "Deny", "open until 2026-11-27 14:00 UTC", "2026-11-28 12:00 - 2026-11-28 14:00 UTC", "clusters region=west", "no (hard freeze)"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("sale row %q lacks %q", lines[1], want)
		}
	}
	for _, want := range []string{"shop/office", "Allow", "open until 2026-11-27 16:00 UTC", "(Europe/Berlin)", "every cluster; namespace shop", "allowed"} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("office row %q lacks %q", lines[2], want)
		}
	}
	out.Reset()
	if err := printWindows(&out, []*changewindow.Window{freeze}, nil, "", map[string]string{"region": "east"}, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no change window selects this") {
		t.Errorf("--cluster east: %s", out.String())
	}
}
