package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

// ChangeWindowKind says whether a window freezes changes or is the only time they may happen.
// +kubebuilder:validation:Enum=Deny;Allow
type ChangeWindowKind string

// Change window kinds.
const (
	// WindowDeny: while the window is open, nothing it selects changes.
	WindowDeny ChangeWindowKind = "Deny"
	// WindowAllow: what the window selects changes only while it (or another allow window
	// selecting it) is open.
	WindowAllow ChangeWindowKind = "Allow"
)

// CronPattern is the schedules a window accepts: five fields (minute hour day-of-month month
// day-of-week, with *, ?, ranges, lists, steps and English names) or a descriptor such as
// @daily. The CRD's validation rule carries the same expression; a test keeps them equal.
const CronPattern = `(?i)^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|([*?]|([0-5]?[0-9])(-([0-5]?[0-9]))?)(/[1-9][0-9]?)?(,([*?]|([0-5]?[0-9])(-([0-5]?[0-9]))?)(/[1-9][0-9]?)?)*[ ]+([*?]|([01]?[0-9]|2[0-3])(-([01]?[0-9]|2[0-3]))?)(/[1-9][0-9]?)?(,([*?]|([01]?[0-9]|2[0-3])(-([01]?[0-9]|2[0-3]))?)(/[1-9][0-9]?)?)*[ ]+([*?]|(0?[1-9]|[12][0-9]|3[01])(-(0?[1-9]|[12][0-9]|3[01]))?)(/[1-9][0-9]?)?(,([*?]|(0?[1-9]|[12][0-9]|3[01])(-(0?[1-9]|[12][0-9]|3[01]))?)(/[1-9][0-9]?)?)*[ ]+([*?]|(0?[1-9]|1[0-2]|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)(-(0?[1-9]|1[0-2]|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))?)(/[1-9][0-9]?)?(,([*?]|(0?[1-9]|1[0-2]|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)(-(0?[1-9]|1[0-2]|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))?)(/[1-9][0-9]?)?)*[ ]+([*?]|([0-6]|sun|mon|tue|wed|thu|fri|sat)(-([0-6]|sun|mon|tue|wed|thu|fri|sat))?)(/[1-9][0-9]?)?(,([*?]|([0-6]|sun|mon|tue|wed|thu|fri|sat)(-([0-6]|sun|mon|tue|wed|thu|fri|sat))?)(/[1-9][0-9]?)?)*)$`

// OverrideWindowAnnotation on an Application lets its next render through the change windows
// that hold it; the value is the reason, recorded in its status and events.
const OverrideWindowAnnotation = "rollout.flotilla.dev/override-window"

// ChangeWindowSpec is when changes may happen, and to what.
type ChangeWindowSpec struct {
	// description says why the window exists (a sale weekend, an incident), for people.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Description string `json:"description,omitempty"`

	// kind is Deny (a freeze while open) or Allow (changes only while open).
	// +required
	Kind ChangeWindowKind `json:"kind"`

	// schedule opens the window, in cron syntax: five fields (minute hour day-of-month month
	// day-of-week), such as "0 22 * * 5" for Fridays at 22:00, or @daily, @weekly, @monthly.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('(?i)^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|([*?]|([0-5]?[0-9])(-([0-5]?[0-9]))?)(/[1-9][0-9]?)?(,([*?]|([0-5]?[0-9])(-([0-5]?[0-9]))?)(/[1-9][0-9]?)?)*[ ]+([*?]|([01]?[0-9]|2[0-3])(-([01]?[0-9]|2[0-3]))?)(/[1-9][0-9]?)?(,([*?]|([01]?[0-9]|2[0-3])(-([01]?[0-9]|2[0-3]))?)(/[1-9][0-9]?)?)*[ ]+([*?]|(0?[1-9]|[12][0-9]|3[01])(-(0?[1-9]|[12][0-9]|3[01]))?)(/[1-9][0-9]?)?(,([*?]|(0?[1-9]|[12][0-9]|3[01])(-(0?[1-9]|[12][0-9]|3[01]))?)(/[1-9][0-9]?)?)*[ ]+([*?]|(0?[1-9]|1[0-2]|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)(-(0?[1-9]|1[0-2]|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))?)(/[1-9][0-9]?)?(,([*?]|(0?[1-9]|1[0-2]|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)(-(0?[1-9]|1[0-2]|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))?)(/[1-9][0-9]?)?)*[ ]+([*?]|([0-6]|sun|mon|tue|wed|thu|fri|sat)(-([0-6]|sun|mon|tue|wed|thu|fri|sat))?)(/[1-9][0-9]?)?(,([*?]|([0-6]|sun|mon|tue|wed|thu|fri|sat)(-([0-6]|sun|mon|tue|wed|thu|fri|sat))?)(/[1-9][0-9]?)?)*)$')",message="schedule is not a cron schedule: write five fields, minute (0-59) hour (0-23) day-of-month (1-31) month (1-12 or jan-dec) day-of-week (0-6 or sun-sat), such as \"0 22 * * 5\", or @hourly, @daily, @weekly, @monthly, @yearly"
	Schedule string `json:"schedule"`

	// duration is how long the window stays open from each time the schedule fires, such as
	// "2h" or "48h30m" (hours, minutes and seconds; more than 0, at most 8760h).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(h|m|s))+$') && duration(self) > duration('0s') && duration(self) <= duration('8760h')",message="duration: write more than 0 and at most 8760h in hours, minutes and seconds, such as \"2h\", \"90m\" or \"48h30m\""
	Duration string `json:"duration"`

	// timeZone the schedule is read in, an IANA name such as Europe/Berlin; UTC when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2}$') && timestamp('2000-01-01T00:00:00Z').getHours(self) >= 0",message="timeZone: not a time zone this server knows: write an IANA name such as UTC, Europe/Berlin or America/New_York"
	TimeZone string `json:"timeZone,omitempty"`

	// clusterSelector selects the member clusters the window holds by their labels; every
	// cluster when absent.
	// +optional
	ClusterSelector *policyv1alpha1.LabelSelector `json:"clusterSelector,omitempty"`

	// namespaces the window holds (a ClusterChangeWindow only; a ChangeWindow holds its own
	// namespace); every namespace when empty, and cluster-scoped templates always.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`

	// workloadSelector selects the templates the window holds by their labels; every template
	// when absent (and applicationSelector is absent too).
	// +optional
	WorkloadSelector *policyv1alpha1.LabelSelector `json:"workloadSelector,omitempty"`

	// applicationSelector selects Applications by their labels: the window holds their git
	// syncs and the releases of their templates.
	// +optional
	ApplicationSelector *policyv1alpha1.LabelSelector `json:"applicationSelector,omitempty"`

	// overridable lets `flotilla release promote --override-window --reason TEXT` (and the
	// rollout.flotilla.dev/override-window annotation of an Application) pass the window, for
	// an emergency change. false makes the window a hard freeze: only changing or deleting the
	// window ends it early.
	// +optional
	// +kubebuilder:default=true
	Overridable *bool `json:"overridable,omitempty"`
}

// ChangeWindow is a freeze (Deny) or the only time changes may happen (Allow) for one
// namespace's templates and Applications: while a deny window is open, or outside every allow
// window that selects it, no release starts a wave or a canary step in a selected cluster and
// no Application render applies. Failover, drift correction and rollback still run: they
// restore, they do not change.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=cw,categories=flotilla
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.kind`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Duration",type=string,JSONPath=`.spec.duration`
// +kubebuilder:printcolumn:name="TimeZone",type=string,JSONPath=`.spec.timeZone`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.namespaces) || size(self.spec.namespaces) == 0",message="spec.namespaces: a ChangeWindow holds its own namespace only; leave namespaces out (a ClusterChangeWindow selects namespaces)"
type ChangeWindow struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec ChangeWindowSpec `json:"spec"`
}

// ChangeWindowList is a list of ChangeWindows.
// +kubebuilder:object:root=true
type ChangeWindowList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ChangeWindow `json:"items"`
}

// ClusterChangeWindow is a change window of the platform: it holds the namespaces it names
// (every namespace when none) and cluster-scoped templates. Only cluster admins write it.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ccw,categories=flotilla
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.kind`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Duration",type=string,JSONPath=`.spec.duration`
// +kubebuilder:printcolumn:name="TimeZone",type=string,JSONPath=`.spec.timeZone`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterChangeWindow struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec ChangeWindowSpec `json:"spec"`
}

// ClusterChangeWindowList is a list of ClusterChangeWindows.
// +kubebuilder:object:root=true
type ClusterChangeWindowList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterChangeWindow `json:"items"`
}

// WindowOverride lets a release pass the change windows that hold it.
type WindowOverride struct {
	// reason is why the change cannot wait, for history and the people reading it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.matches('[[:cntrl:]]')",message="reason: write plain text on one line, without control characters"
	Reason string `json:"reason"`
}
