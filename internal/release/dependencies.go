package release

import (
	"context"
	"fmt"
	"strings"
	"time"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/dependency"
)

// dependencyRecheck is how often a release held by dependencies looks again: their status
// changes wake their own releases, not their dependents'.
const dependencyRecheck = 5 * time.Second

// dependencyWait is a cluster a release waits in for the template's dependencies.
type dependencyWait string

func (w dependencyWait) String() string { return dependencyWaitPrefix + string(w) }

const dependencyWaitPrefix = "waits for dependencies: "

// HeldByDependencies says whether a cluster's message in a release says its dependencies hold
// it.
func HeldByDependencies(message string) bool { return strings.HasPrefix(message, dependencyWaitPrefix) }

// dependencyHolds holds, beside the change windows, every placed cluster that has not taken the
// release's revision while the template's dependencies (spec.dependsOn) do not run there
// Healthy at their current revision: it is not pinned, its wave's deadline does not run for
// it, and a stepped wave does not start. The binding controller holds a cluster's first Work on
// the same verdict (package dependency), so the two cannot disagree. A window's hold, which
// says until when, is kept where both hold.
func (c *Controller) dependencyHolds(ctx context.Context, s *step, placed []clusterv1alpha1.Cluster) error {
	if len(s.binding.BindingSpec().DependsOn) == 0 {
		return nil
	}
	c.depsOnce.Do(func() { c.deps = &dependency.Reader{Client: c.Client, Board: c.Board} })
	deps, err := c.deps.Of(ctx, s.binding)
	if err != nil {
		return err
	}
	for _, cl := range placed {
		if s.pinnedTo(cl.Name) == s.rel.Spec.Revision || s.held[cl.Name] != nil {
			continue
		}
		why := dependency.Verdict(cl.Name, deps)
		if why == "" {
			continue
		}
		if s.held == nil {
			s.held = map[string]fmt.Stringer{}
		}
		s.held[cl.Name] = dependencyWait(why)
		s.after(dependencyRecheck)
	}
	return nil
}
