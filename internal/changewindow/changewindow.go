// Package changewindow reads change windows (ChangeWindow, ClusterChangeWindow): when each is
// open, what it selects, and whether a change to a workload in a cluster is held now and until
// when. It owns no controller and writes nothing: the release controller asks it before a wave
// or a canary step changes a cluster, the application controller before a render applies, and
// the CLI to list the windows in force.
package changewindow

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	// Distroless images carry no zone database: the windows' time zones come with the binary.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// maxFirings bounds the walk over a schedule's firings when openings overlap (an hourly
// schedule open for two hours never closes): past it, the window counts as open that long, and
// the next look walks on from there. A window anyone may write must not cost a controller more.
const maxFirings = 1000

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Window is one change window, parsed. Not safe for concurrent use: List makes new ones per
// caller.
type Window struct {
	// Name is NAMESPACE/NAME for a ChangeWindow, NAME for a ClusterChangeWindow.
	Name string
	// Namespace is the ChangeWindow's namespace; "" for a ClusterChangeWindow.
	Namespace string
	Spec      rolloutv1alpha1.ChangeWindowSpec

	schedule cron.Schedule
	location *time.Location
	duration time.Duration
	clusters labels.Selector // nil: every cluster
	work     labels.Selector // nil: not given
	apps     labels.Selector // nil: not given

	// opened memoizes OpenAt for one time: a release asks it once per cluster, with one now.
	opened *opening
}

type opening struct {
	at     time.Time
	open   bool
	closes time.Time
}

// New parses a window's spec; an error names the field and the fix.
func New(namespace, name string, spec rolloutv1alpha1.ChangeWindowSpec) (*Window, error) {
	w := &Window{Name: name, Namespace: namespace, Spec: spec, location: time.UTC}
	if namespace != "" {
		w.Name = namespace + "/" + name
	}
	if spec.TimeZone != "" {
		loc, err := time.LoadLocation(spec.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("spec.timeZone: %q is not a time zone: write an IANA name such as UTC, Europe/Berlin or America/New_York", spec.TimeZone)
		}
		w.location = loc
	}
	sched, err := parser.Parse(spec.Schedule)
	if err != nil {
		return nil, fmt.Errorf("spec.schedule: %q is not a cron schedule (%v): write minute hour day-of-month month day-of-week, such as \"0 22 * * 5\", or @daily", spec.Schedule, err)
	}
	if s, ok := sched.(*cron.SpecSchedule); ok {
		s.Location = w.location
	}
	w.schedule = sched
	d, err := time.ParseDuration(spec.Duration)
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("spec.duration: %q: write a duration above 0 such as 2h or 90m", spec.Duration)
	}
	w.duration = d
	if spec.Kind != rolloutv1alpha1.WindowDeny && spec.Kind != rolloutv1alpha1.WindowAllow {
		return nil, fmt.Errorf("spec.kind: %q: write Deny or Allow", spec.Kind)
	}
	for _, sel := range []struct {
		field string
		in    *policyv1alpha1.LabelSelector
		out   *labels.Selector
	}{{"spec.clusterSelector", spec.ClusterSelector, &w.clusters}, {"spec.workloadSelector", spec.WorkloadSelector, &w.work}, {"spec.applicationSelector", spec.ApplicationSelector, &w.apps}} {
		if sel.in == nil {
			continue
		}
		s, err := metav1.LabelSelectorAsSelector(sel.in.AsMetav1())
		if err != nil {
			return nil, fmt.Errorf("%s: %v", sel.field, err)
		}
		*sel.out = s
	}
	return w, nil
}

// Overridable says whether a release or Application may pass the window by override.
func (w *Window) Overridable() bool { return w.Spec.Overridable == nil || *w.Spec.Overridable }

// OpenAt says whether the window is open at t and, when it is, when it closes (windows whose
// openings overlap close when the last of them does).
func (w *Window) OpenAt(t time.Time) (bool, time.Time) {
	if w.opened != nil && w.opened.at.Equal(t) {
		return w.opened.open, w.opened.closes
	}
	open, closes := w.openAt(t)
	w.opened = &opening{at: t, open: open, closes: closes}
	return open, closes
}

func (w *Window) openAt(t time.Time) (bool, time.Time) {
	f := w.schedule.Next(t.Add(-w.duration))
	if f.IsZero() || f.After(t) {
		return false, time.Time{}
	}
	closes := f.Add(w.duration)
	for i := 0; i < maxFirings; i++ {
		next := w.schedule.Next(f)
		if next.IsZero() || !next.Before(closes) {
			return true, closes
		}
		f, closes = next, next.Add(w.duration)
	}
	return true, closes
}

// NextOpen is when the window opens next after t, and when that opening closes.
func (w *Window) NextOpen(t time.Time) (time.Time, time.Time) {
	f := w.schedule.Next(t)
	if f.IsZero() {
		return time.Time{}, time.Time{}
	}
	_, closes := w.OpenAt(f)
	return f, closes
}

// Subject is a workload a window may hold: a template, and its Application when it has one.
type Subject struct {
	// Namespace of the template or Application; "" for a cluster-scoped template.
	Namespace string
	// Labels of the template; nil for an Application's render as a whole.
	Labels map[string]string
	// Application's labels when the workload belongs to one (HasApplication).
	ApplicationLabels map[string]string
	HasApplication    bool
}

// Selects says whether the window holds the subject in a cluster with these labels.
func (w *Window) Selects(s Subject, clusterLabels map[string]string) bool {
	switch {
	case w.Namespace != "" && w.Namespace != s.Namespace:
		return false
	case w.Namespace == "" && len(w.Spec.Namespaces) > 0 && s.Namespace != "" && !slices.Contains(w.Spec.Namespaces, s.Namespace):
		return false
	case w.clusters != nil && !w.clusters.Matches(labels.Set(clusterLabels)):
		return false
	case w.work == nil && w.apps == nil:
		return true
	}
	if w.work != nil && s.Labels != nil && w.work.Matches(labels.Set(s.Labels)) {
		return true
	}
	return w.apps != nil && s.HasApplication && w.apps.Matches(labels.Set(s.ApplicationLabels))
}

// SelectsCluster says whether the window selects a cluster with these labels at all (for
// listing); a window with no cluster selector selects every cluster.
func (w *Window) SelectsCluster(clusterLabels map[string]string) bool {
	return w.clusters == nil || w.clusters.Matches(labels.Set(clusterLabels))
}

// Hold is why a change waits.
type Hold struct {
	// Windows holding the change, by name.
	Windows []string
	// Deny: an open deny window holds it; otherwise it is outside every allow window.
	Deny bool
	// Until is when the change may go: the deny windows close, or an allow window opens.
	Until time.Time
	// Overridable: every window holding the change lets an override pass it.
	Overridable bool
}

// String says the hold in words, for status messages: "held by change window shop/freeze
// until 2026-11-28 18:00 UTC".
func (h Hold) String() string {
	until := h.Until.UTC().Format("2006-01-02 15:04:05 UTC")
	word := "window"
	if len(h.Windows) > 1 {
		word = "windows"
	}
	msg := fmt.Sprintf("held by change %s %s until %s", word, strings.Join(h.Windows, ", "), until)
	if !h.Deny {
		msg = fmt.Sprintf("held outside allow %s %s until %s", word, strings.Join(h.Windows, ", "), until)
	}
	if !h.Overridable {
		msg += " (no override: the window is a hard freeze)"
	}
	return msg
}

// HeldAt says whether the windows hold a change of the subject in a cluster with these labels
// at now: an open deny window that selects it, or allow windows that select it, none open.
func HeldAt(windows []*Window, s Subject, clusterLabels map[string]string, now time.Time) (Hold, bool) {
	deny := Hold{Deny: true, Overridable: true}
	allow := Hold{Overridable: true}
	allowOpen := false
	for _, w := range windows {
		if !w.Selects(s, clusterLabels) {
			continue
		}
		open, closes := w.OpenAt(now)
		switch {
		case w.Spec.Kind == rolloutv1alpha1.WindowDeny && open:
			deny.Windows = append(deny.Windows, w.Name)
			deny.Overridable = deny.Overridable && w.Overridable()
			if closes.After(deny.Until) {
				deny.Until = closes
			}
		case w.Spec.Kind == rolloutv1alpha1.WindowAllow && open:
			allowOpen = true
		case w.Spec.Kind == rolloutv1alpha1.WindowAllow:
			allow.Windows = append(allow.Windows, w.Name)
			allow.Overridable = allow.Overridable && w.Overridable()
			if opens, _ := w.NextOpen(now); !opens.IsZero() && (allow.Until.IsZero() || opens.Before(allow.Until)) {
				allow.Until = opens
			}
		}
	}
	if len(deny.Windows) > 0 {
		return deny, true
	}
	if len(allow.Windows) > 0 && !allowOpen {
		return allow, true
	}
	return Hold{}, false
}

// List reads and parses the ClusterChangeWindows and the namespace's ChangeWindows (every
// namespace's when namespace is "" and all is set). A window that does not parse (stored
// before validation caught it) is returned in bad with why, and holds nothing.
func List(ctx context.Context, r client.Reader, namespace string, all bool) (windows []*Window, bad []error, err error) {
	var cws rolloutv1alpha1.ClusterChangeWindowList
	if err := r.List(ctx, &cws); err != nil {
		return nil, nil, err
	}
	for _, cw := range cws.Items {
		w, perr := New("", cw.Name, cw.Spec)
		if perr != nil {
			bad = append(bad, fmt.Errorf("ClusterChangeWindow %s: %w", cw.Name, perr))
			continue
		}
		windows = append(windows, w)
	}
	if namespace == "" && !all {
		return windows, bad, nil
	}
	var nws rolloutv1alpha1.ChangeWindowList
	if err := r.List(ctx, &nws, client.InNamespace(namespace)); err != nil {
		return nil, nil, err
	}
	for _, nw := range nws.Items {
		w, perr := New(nw.Namespace, nw.Name, nw.Spec)
		if perr != nil {
			bad = append(bad, fmt.Errorf("ChangeWindow %s/%s: %w", nw.Namespace, nw.Name, perr))
			continue
		}
		windows = append(windows, w)
	}
	return windows, bad, nil
}
