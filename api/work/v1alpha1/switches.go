package v1alpha1

import (
	"maps"
	"slices"
	"strings"
)

// The user's switches live on the template, where users write (kubectl annotate, the
// flotilla CLI, or the manifest in git); the detector alone copies them into the binding's
// spec.suspend and spec.unmanagedClusters. They are not part of the template's content: they
// change no revision and never reach a member.
const (
	// SuspendAnnotation stops Flotilla's writes to members: "*" in every cluster, else the
	// comma-separated clusters.
	SuspendAnnotation = "work.flotilla.dev/suspend"
	// UnmanagedAnnotation lists the comma-separated clusters whose object is handed back to
	// unmanaged.
	UnmanagedAnnotation = "work.flotilla.dev/unmanaged"
	// AllClusters is SuspendAnnotation's value for every cluster.
	AllClusters = "*"
)

// SwitchAnnotations are the annotations that are switches, not content.
var SwitchAnnotations = []string{SuspendAnnotation, UnmanagedAnnotation}

// WithoutSwitches returns annotations without the switch annotations (a copy when it drops
// any, else annotations itself).
func WithoutSwitches(annotations map[string]string) map[string]string {
	if _, s := annotations[SuspendAnnotation]; !s {
		if _, u := annotations[UnmanagedAnnotation]; !u {
			return annotations
		}
	}
	out := maps.Clone(annotations)
	for _, a := range SwitchAnnotations {
		delete(out, a)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// SwitchesFrom reads the switches of a template's annotations.
func SwitchesFrom(annotations map[string]string) (*Suspension, []string) {
	var suspend *Suspension
	if v, ok := annotations[SuspendAnnotation]; ok {
		if strings.TrimSpace(v) == AllClusters {
			suspend = &Suspension{Dispatching: true}
		} else if cs := clusterList(v); len(cs) > 0 {
			suspend = &Suspension{Clusters: cs}
		}
	}
	return suspend, clusterList(annotations[UnmanagedAnnotation])
}

// SetSwitches writes the switches into a template's annotations, removing the empty ones.
func SetSwitches(annotations map[string]string, suspend *Suspension, unmanaged []string) map[string]string {
	if annotations == nil {
		annotations = map[string]string{}
	}
	switch {
	case suspend == nil || (!suspend.Dispatching && len(suspend.Clusters) == 0):
		delete(annotations, SuspendAnnotation)
	case suspend.Dispatching:
		annotations[SuspendAnnotation] = AllClusters
	default:
		annotations[SuspendAnnotation] = strings.Join(clusterList(strings.Join(suspend.Clusters, ",")), ",")
	}
	if cs := clusterList(strings.Join(unmanaged, ",")); len(cs) > 0 {
		annotations[UnmanagedAnnotation] = strings.Join(cs, ",")
	} else {
		delete(annotations, UnmanagedAnnotation)
	}
	return annotations
}

// clusterList parses comma-separated cluster names: trimmed, sorted, without repeats or
// empty entries.
func clusterList(v string) []string {
	var out []string
	for c := range strings.SplitSeq(v, ",") {
		if c = strings.TrimSpace(c); c != "" && c != AllClusters {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
