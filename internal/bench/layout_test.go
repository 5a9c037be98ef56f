package bench

import (
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// Spread by region, each template goes to one region's members, the regions in turn; what
// each member is given, the object count and the policies agree with that.
func TestScaleLayoutSpreadsTemplatesOverLabelValues(t *testing.T) {
	fleet := localfleet.GeneratedFleet(7, localfleet.ProfileSlim)
	l, err := newScaleLayout(fleet, "region")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.values, []string{"eu-central", "us-east", "us-west"}) {
		t.Fatalf("values %v", l.values)
	}
	const n = 10
	total := 0
	for i := range n {
		placed := l.members(i)
		total += len(placed)
		region := l.values[i%3]
		for _, m := range placed {
			member, _ := fleet.Member(m)
			if member.Labels["region"] != region {
				t.Fatalf("template %d placed on %s in %s, want only %s", i, m, member.Labels["region"], region)
			}
			if !slices.Contains(l.templatesOf(m, n), i) {
				t.Fatalf("templatesOf(%s) lacks template %d", m, i)
			}
		}
		if d := l.deployment("ns", i); d.Labels["region"] != region {
			t.Fatalf("template %d labelled %v, want region=%s", i, d.Labels, region)
		}
	}
	if got := l.objects(n); got != total {
		t.Fatalf("objects %d, want %d", got, total)
	}
	perMember := 0
	for _, k := range l.perMember(n) {
		perMember += k
	}
	if perMember != total {
		t.Fatalf("per-member counts add to %d, want %d", perMember, total)
	}
	if fewest, most := l.clustersPerTemplate(); fewest != 2 || most != 3 {
		t.Fatalf("clusters per template %d to %d, want 2 to 3", fewest, most)
	}
	ps := l.policies("ns")
	if len(ps) != 3 {
		t.Fatalf("%d policies, want one per region", len(ps))
	}
	for g, p := range ps {
		want := l.values[g]
		if string(p.Spec.ResourceSelectors[0].LabelSelector.MatchLabels["region"]) != want ||
			string(p.Spec.Placement.ClusterAffinity.LabelSelector.MatchLabels["region"]) != want {
			t.Fatalf("policy %s does not select templates and clusters of region %s: %+v", p.Name, want, p.Spec)
		}
	}
}

// Without a label every template is on every member, by one policy; a label some member
// lacks is refused, naming the flag.
func TestScaleLayoutEverywhereAndAMissingLabel(t *testing.T) {
	fleet := localfleet.GeneratedFleet(4, localfleet.ProfileSlim)
	l, err := newScaleLayout(fleet, "")
	if err != nil {
		t.Fatal(err)
	}
	if l.objects(5) != 20 || len(l.templatesOf("member-03", 5)) != 5 || len(l.policies("ns")) != 1 {
		t.Fatalf("everywhere: %d objects, member-03 has %v, %d policies", l.objects(5), l.templatesOf("member-03", 5), len(l.policies("ns")))
	}
	if templateIndex("app-0042") != 42 || templateIndex("web") != -1 {
		t.Fatal("templateIndex reads app-NNNN only")
	}
	_, err = newScaleLayout(fleet, "zone")
	if err == nil || !strings.Contains(err.Error(), "--spread-by zone: member member-01 has no such label") {
		t.Fatalf("a missing label: %v", err)
	}
}
