package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// DriftOptions size the drift bench.
type DriftOptions struct {
	Templates int // Deployments placed on every member
	Changes   int // hand-made changes timed, one at a time
}

// Validate names the flag that is out of range.
func (o DriftOptions) Validate() error {
	switch {
	case o.Templates < 1:
		return fmt.Errorf("--templates %d: give at least 1", o.Templates)
	case o.Changes < 1:
		return fmt.Errorf("--changes %d: give at least 1", o.Changes)
	}
	return nil
}

const (
	// driftPoll is how often the changed member object is read back.
	driftPoll = 10 * time.Millisecond
	// driftTimeout is longer than the executor's periodic drift check (5 minutes), so a change
	// its member events missed is still timed rather than failed.
	driftTimeout = 6 * time.Minute
)

// Drift places Templates Deployments on every member with the default drift correction
// (Correct), then Changes times updates one member object's image, as a person would with
// kubectl edit, and times until the member object holds the template's image again. The
// clock starts before the update is sent, so each figure includes the update's own round
// trip, which is printed too.
func Drift(ctx context.Context, lf *localfleet.LocalFleet, o DriftOptions, out io.Writer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	c, err := newClients(lf)
	if err != nil {
		return err
	}
	members, memberCS, cp := c.members, c.memberCS, c.cp
	n := o.Templates
	fmt.Fprintf(out, "== drift: %d Deployments on %d clusters (%d member objects), %d hand-made image changes\n", n, len(members), n*len(members), o.Changes)

	ns := "bench-drift"
	if err := cp.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: ns},
		Spec:       policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}}},
	}
	if err := cp.Create(ctx, policy); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	start := time.Now()
	wait := watchPropagation(ctx, c, ns, n, start)
	if err := forEachParallel(n, inFlightPerMember, func(i int) error { return cp.Create(ctx, deployment(ns, i)) }); err != nil {
		return fmt.Errorf("creating templates: %w", err)
	}
	done, err := wait()
	if err != nil {
		return err
	}
	applied, aggregated := done.applied(), done.aggregated
	fmt.Fprintf(out, "templates applied in the members:   %7.1fs  (statuses aggregated %.1fs)\n", applied.Seconds(), aggregated.Seconds())
	// The members' controllers are still reacting to the new Deployments; let them finish so
	// the first changes do not queue behind them.
	if _, err := waitQuiet(ctx, lf); err != nil {
		return err
	}

	want := deployment(ns, 0).Spec.Template.Spec.Containers[0].Image
	var corrected, roundTrip []time.Duration
	for c := range o.Changes {
		name := fmt.Sprintf("app-%04d", (c*7919)%n)
		member := members[c%len(members)]
		cs := memberCS[member]
		took, rt, err := timeCorrection(ctx, cs, ns, name, want, fmt.Sprintf("registry.example/app:drift-%d", c))
		if err != nil {
			return fmt.Errorf("change %d of %d (%s/%s in %s): %w", c+1, o.Changes, ns, name, member, err)
		}
		corrected, roundTrip = append(corrected, took), append(roundTrip, rt)
	}
	fmt.Fprintf(out, "member-side change -> corrected:    p50 %s  p99 %s  max %s  (%d changes, %d templates in place, read back every %s)\n",
		pct(corrected, 50), pct(corrected, 99), pct(corrected, 100), len(corrected), n, driftPoll)
	fmt.Fprintf(out, "  of which the member update itself: p50 %s  p99 %s\n", pct(roundTrip, 50), pct(roundTrip, 99))
	return nil
}

// timeCorrection sets the first container's image of a member Deployment to changed with a
// plain update, and returns the time from sending the update until the member object holds
// want again, and the update's round trip.
func timeCorrection(ctx context.Context, cs kubernetes.Interface, ns, name, want, changed string) (time.Duration, time.Duration, error) {
	var start time.Time
	var rt time.Duration
	for attempt := 0; ; attempt++ {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return 0, 0, err
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != want {
			return 0, 0, fmt.Errorf("image %q before the change, want %q", got, want)
		}
		d.Spec.Template.Spec.Containers[0].Image = changed
		start = time.Now()
		_, err = cs.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		rt = time.Since(start)
		if err == nil {
			break
		}
		// Another writer (the member's deployment controller) got in between: read and try
		// again, as kubectl edit would ask the person to.
		if !apierrors.IsConflict(err) || attempt == 5 {
			return 0, 0, err
		}
	}
	for {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && d.Spec.Template.Spec.Containers[0].Image == want {
			return time.Since(start), rt, nil
		}
		if time.Since(start) > driftTimeout {
			return 0, 0, fmt.Errorf("image still %q after %s", changed, driftTimeout)
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(driftPoll):
		}
	}
}
