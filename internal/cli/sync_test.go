package cli

import (
	"slices"
	"strings"
	"testing"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

func switchNamed(t *testing.T, verb string) syncSwitch {
	for _, sw := range syncSwitches {
		if strings.HasPrefix(sw.use, verb+" ") {
			return sw
		}
	}
	t.Fatalf("no switch %s", verb)
	return syncSwitch{}
}

// The switches refuse a cluster the template is not placed on, and unsuspending one cluster
// while every cluster is suspended, each with a message that says what to do.
func TestSyncSwitchesRejectNonsense(t *testing.T) {
	spec := func() *workv1alpha1.ResourceBindingSpec {
		return &workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "east"}, {Name: "west"}}}
	}
	for _, verb := range []string{"suspend", "unmanage"} {
		s := spec()
		if _, err := switchNamed(t, verb).apply(s, []string{"eats"}); err == nil || !strings.Contains(err.Error(), "--cluster eats: the template is not placed there (placed on: east, west)") {
			t.Errorf("%s --cluster eats: error = %v", verb, err)
		}
		if s.Suspend != nil || s.UnmanagedClusters != nil {
			t.Errorf("%s changed the spec on bad input: %+v", verb, s)
		}
	}
	s := spec()
	if _, err := switchNamed(t, "suspend").apply(s, nil); err != nil || !s.Suspended("east") || !s.Suspended("west") {
		t.Fatalf("suspend all: %v %+v", err, s.Suspend)
	}
	if _, err := switchNamed(t, "unsuspend").apply(s, []string{"east"}); err == nil || !strings.Contains(err.Error(), "run unsuspend without --cluster") {
		t.Errorf("unsuspend --cluster east while all are suspended: error = %v", err)
	}
	if _, err := switchNamed(t, "unsuspend").apply(s, nil); err != nil || s.Suspend != nil {
		t.Errorf("unsuspend all: %v %+v", err, s.Suspend)
	}
	if _, err := switchNamed(t, "suspend").apply(s, []string{"west"}); err != nil || s.Suspended("east") || !s.Suspended("west") {
		t.Errorf("suspend west: %v %+v", err, s.Suspend)
	}
}

// manage is unmanage's inverse: it takes back only clusters that are unmanaged, all of them
// without --cluster, and warns when the policy would not take the objects over.
func TestManageTakesBackUnmanagedClusters(t *testing.T) {
	manage := switchNamed(t, "manage")
	none := &workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "east"}}}
	if _, err := manage.apply(none, nil); err == nil || !strings.Contains(err.Error(), "no cluster is unmanaged") {
		t.Errorf("manage with nothing unmanaged: error = %v", err)
	}
	spec := func() *workv1alpha1.ResourceBindingSpec {
		return &workv1alpha1.ResourceBindingSpec{ConflictResolution: "Overwrite", UnmanagedClusters: []string{"east", "west"}}
	}
	s := spec()
	if _, err := manage.apply(s, []string{"europe"}); err == nil || !strings.Contains(err.Error(), "--cluster europe: the template is not unmanaged there (unmanaged in: east, west)") {
		t.Errorf("manage --cluster europe: error = %v", err)
	}
	if len(s.UnmanagedClusters) != 2 {
		t.Errorf("bad input changed the spec: %v", s.UnmanagedClusters)
	}
	msg, err := manage.apply(s, []string{"west"})
	if err != nil || msg != "managed again in west" || !slices.Equal(s.UnmanagedClusters, []string{"east"}) {
		t.Errorf("manage --cluster west: %q, %v, unmanaged %v", msg, err, s.UnmanagedClusters)
	}
	s = spec()
	s.ConflictResolution = ""
	msg, err = manage.apply(s, nil)
	if err != nil || s.UnmanagedClusters != nil || !strings.HasPrefix(msg, "managed again in east, west; the policy's conflictResolution is Abort") {
		t.Errorf("manage all under Abort: %q, %v, unmanaged %v", msg, err, s.UnmanagedClusters)
	}
}
