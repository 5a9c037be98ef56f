package release

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/changewindow"
)

// Change windows are read to hold waves and canary steps.
// +kubebuilder:rbac:groups=rollout.flotilla.dev,resources=changewindows;clusterchangewindows,verbs=get;list;watch

// heldMark starts every release message a window hold writes, so the next move clears it.
const heldMark = "held: "

// windowHolds finds the clusters the change windows hold for this release now: in them no
// wave starts, no cluster takes the revision and no canary step begins. A release with
// spec.windowOverride passes the windows that allow it, and records which.
func (c *Controller) windowHolds(ctx context.Context, s *step, placed []clusterv1alpha1.Cluster) error {
	s.held = nil
	rel := s.rel
	windows, _, err := changewindow.List(ctx, c.Client, rel.Spec.Resource.Namespace, false)
	if err != nil || len(windows) == 0 {
		return err
	}
	subject, appOverride, err := c.windowSubject(ctx, rel)
	if err != nil {
		return err
	}
	// The override of an Application's templates is the Application's annotation, which let
	// its render through the same windows.
	override := rel.Spec.WindowOverride != nil || appOverride
	for _, cl := range placed {
		if s.pinnedTo(cl.Name) == rel.Spec.Revision {
			continue // it took the revision already: a window holds changes, not what runs
		}
		hold, held := changewindow.HeldAt(windows, subject, cl.Labels, s.now)
		if !held {
			continue
		}
		if override && hold.Overridable {
			if s.overridden == nil {
				s.overridden = map[string][]string{}
			}
			s.overridden[cl.Name] = hold.Windows
			for _, w := range hold.Windows {
				if !slices.Contains(s.status.OverriddenWindows, w) {
					s.status.OverriddenWindows = append(s.status.OverriddenWindows, w)
					sort.Strings(s.status.OverriddenWindows)
				}
			}
			continue
		}
		if s.held == nil {
			s.held = map[string]fmt.Stringer{}
		}
		s.held[cl.Name] = hold
		s.after(hold.Until.Sub(s.now) + time.Second)
	}
	return nil
}

// windowSubject is the release's template as windows select it (its labels and its
// Application's), and whether its Application carries the override-window annotation. Read
// only while some window exists.
func (c *Controller) windowSubject(ctx context.Context, rel *rolloutv1alpha1.Release) (changewindow.Subject, bool, error) {
	ref := rel.Spec.Resource
	subject := changewindow.Subject{Namespace: ref.Namespace}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
	if err := c.Reader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, meta); err != nil {
		return subject, false, client.IgnoreNotFound(err)
	}
	subject.Labels = meta.GetLabels()
	if subject.Labels == nil {
		subject.Labels = map[string]string{}
	}
	override := false
	if name := subject.Labels[appsv1alpha1.ApplicationLabel]; name != "" && ref.Namespace != "" {
		app := &appsv1alpha1.Application{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: name}, app); err == nil {
			subject.HasApplication, subject.ApplicationLabels = true, app.Labels
			override = strings.TrimSpace(app.Annotations[rolloutv1alpha1.OverrideWindowAnnotation]) != ""
		} else if client.IgnoreNotFound(err) != nil {
			return subject, false, err
		}
	}
	return subject, override, nil
}

// HeldByWindow says whether a cluster's message in a release says change windows hold it.
func HeldByWindow(message string) bool {
	return strings.HasPrefix(message, "held by change window") || strings.HasPrefix(message, "held outside allow window")
}

// heldIn returns the holds of those clusters that windows hold, as "CLUSTER held by ...".
func (s *step) heldIn(clusters []string) []string {
	var out []string
	for _, cl := range clusters {
		if h, ok := s.held[cl]; ok && s.pinnedTo(cl) != s.rel.Spec.Revision {
			out = append(out, cl+" "+h.String())
		}
	}
	return out
}

// holdWave writes that the wave waits for change windows, in the wave and the release.
func (s *step) holdWave(i int, ws *rolloutv1alpha1.WaveStatus, what string, holds []string) {
	for j := range ws.Clusters {
		if h, ok := s.held[ws.Clusters[j].Name]; ok && s.pinnedTo(ws.Clusters[j].Name) != s.rel.Spec.Revision {
			ws.Clusters[j].Message = h.String()
		}
	}
	ws.Message = what + ": " + strings.Join(holds, "; ")
	s.status.Message = fmt.Sprintf("%swave %d/%d (%s) %s", heldMark, i+1, len(s.status.Waves), ws.Name, ws.Message)
}

// keepOverrides carries the windows each cluster passed by override into the wave's new
// cluster list: from this reconcile's holds, else from the list before (once a cluster took
// the revision no window is looked at for it again).
func (s *step) keepOverrides(before, now []rolloutv1alpha1.ClusterRelease) {
	for j := range now {
		if w, ok := s.overridden[now[j].Name]; ok {
			now[j].OverriddenWindows = w
			continue
		}
		for _, b := range before {
			if b.Name == now[j].Name {
				now[j].OverriddenWindows = b.OverriddenWindows
			}
		}
	}
}

// heldReasons is the judge's view of the holds: cluster to why.
func (s *step) heldReasons() map[string]string {
	if len(s.held) == 0 {
		return nil
	}
	out := make(map[string]string, len(s.held))
	for cl, h := range s.held {
		out[cl] = h.String()
	}
	return out
}

// releasesInScope are the unfinished releases a change of window o may hold or free.
func releasesInScope(ctx context.Context, c client.Reader, o client.Object) []reconcile.Request {
	var list rolloutv1alpha1.ReleaseList
	var opts []client.ListOption
	if o.GetNamespace() != "" {
		opts = append(opts, client.InNamespace(o.GetNamespace()))
	}
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, r := range list.Items {
		if !Final(r.Status.Phase) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&r)})
		}
	}
	return out
}
