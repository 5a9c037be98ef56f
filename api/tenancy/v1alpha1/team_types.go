package v1alpha1

import (
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
)

// TeamName is the one name a Team may have: one Team per namespace.
const TeamName = "team"

// Names of what the team controller keeps in a team's namespace, and the ClusterRoles they grant.
const (
	ContributorRoleBinding = "flotilla-team-contributors"
	ReaderRoleBinding      = "flotilla-team-readers"
	ContributorClusterRole = "flotilla-contributor"
	ReaderClusterRole      = "flotilla-reader"
)

// Condition types and reasons of a Team.
const (
	// ConditionReady is True once the namespace's RoleBindings grant exactly what the Team says.
	ConditionReady = "Ready"

	ReasonRoleBindingsInSync = "RoleBindingsInSync"
	ReasonRoleBindingsFailed = "RoleBindingsFailed"
	// ReasonGroupNeverBound: the Team names a group of NeverBoundGroups (a Team stored before
	// admission refused them); the other groups are bound, that one is not.
	ReasonGroupNeverBound = "GroupNeverBound"
)

// WebhookSecretKey is the key of a Team's webhook Secret that holds the shared secret.
const WebhookSecretKey = "secret"

// NeverBoundGroups are the groups a Team may not name, as contributor or reader, with what each
// means: every caller, every service account, or an identity that bypasses authorization.
// Admission refuses them (the CEL rules on contributors and readers list the same groups); the
// team controller never binds them and Applications never act as them, for Teams stored before.
var NeverBoundGroups = map[string]string{
	"system:unauthenticated": "every anonymous request",
	"system:authenticated":   "every authenticated user",
	"system:serviceaccounts": "every service account of every namespace",
	"system:masters":         "unrestricted access that bypasses authorization",
	"system:nodes":           "every node's kubelet",
	"system:bootstrappers":   "every bootstrap token",
}

// NeverBoundGroupPrefix starts the groups of bootstrap tokens, never bound either.
const NeverBoundGroupPrefix = "system:bootstrappers:"

// WhyNeverBound says what a group means when a Team may not name it, or "" when it may.
// system:serviceaccounts:NAMESPACE (one namespace's service accounts) may be named.
func WhyNeverBound(group string) string {
	if why, ok := NeverBoundGroups[group]; ok {
		return why
	}
	if strings.HasPrefix(group, NeverBoundGroupPrefix) {
		return "a group of bootstrap tokens"
	}
	return ""
}

// TeamSpec names the groups that work in the team's namespace. Groups come from the control
// plane's own authentication: client-certificate organisations, or OIDC groups where the API
// server is set up for them.
type TeamSpec struct {
	// description says who the team is, for people and portals.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// contributors are groups that may create, change and delete the namespace's templates,
	// policies and analysis templates, and steer its releases (the flotilla-contributor role,
	// which aggregates Kubernetes' edit role). Groups that mean everyone or bypass
	// authorization are refused: system:unauthenticated, system:authenticated,
	// system:serviceaccounts, system:masters, system:nodes, system:bootstrappers and its
	// system:bootstrappers:* groups (system:serviceaccounts:NAMESPACE is allowed).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:XValidation:rule="!(self in ['system:unauthenticated', 'system:authenticated', 'system:serviceaccounts', 'system:masters', 'system:nodes', 'system:bootstrappers']) && !self.startsWith('system:bootstrappers:')",message="contributors: system:unauthenticated, system:authenticated, system:serviceaccounts, system:masters, system:nodes and system:bootstrappers(:*) mean everyone or bypass authorization and are never bound; name the team's own groups (system:serviceaccounts:NAMESPACE, one namespace's service accounts, is allowed)"
	Contributors []string `json:"contributors,omitempty"`

	// readers are groups that may only get, list and watch in the namespace (the
	// flotilla-reader role, which aggregates Kubernetes' view role). The groups contributors
	// refuse are refused here too.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:XValidation:rule="!(self in ['system:unauthenticated', 'system:authenticated', 'system:serviceaccounts', 'system:masters', 'system:nodes', 'system:bootstrappers']) && !self.startsWith('system:bootstrappers:')",message="readers: system:unauthenticated, system:authenticated, system:serviceaccounts, system:masters, system:nodes and system:bootstrappers(:*) mean everyone or bypass authorization and are never bound; name the team's own groups (system:serviceaccounts:NAMESPACE, one namespace's service accounts, is allowed)"
	Readers []string `json:"readers,omitempty"`

	// repositories are the git repositories the team's Applications may use, as URL globs
	// (path.Match: * matches within one path segment, ? one character), e.g.
	// https://git.example.com/team-a/*. Only the wildcards * and ? are allowed: [, ] and a
	// backslash (character classes and escapes) are refused. Unset allows no repository:
	// Applications can then only carry inline manifests.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=2048
	// +kubebuilder:validation:items:XValidation:rule="self.startsWith('https://') || self.startsWith('http://') || self.startsWith('ssh://') || self.startsWith('git://') || self.matches('^[A-Za-z0-9._-]+@[A-Za-z0-9.*-]+:.+$')",message="repositories: each is an https://, http://, ssh://, git:// or git@host:path URL glob, as an Application's repoURL (file:// is not one)"
	// +kubebuilder:validation:items:XValidation:rule="!self.contains('[') && !self.contains(']') && !self.contains('\\\\')",message="repositories: only the wildcards * and ? are allowed; remove [, ] and backslashes (character classes and escapes), e.g. https://git.example.com/team-a/*"
	Repositories []string `json:"repositories,omitempty"`

	// clusters limits the clusters the team's templates may run on; unset allows every cluster.
	// +optional
	Clusters *TeamClusters `json:"clusters,omitempty"`

	// webhook says how git push webhooks (POST /hooks/git) wake the team's Applications.
	// Unset: unsigned pushes wake them, unless the controller-manager runs with
	// --git-webhook-require-signature.
	// +optional
	Webhook *TeamWebhook `json:"webhook,omitempty"`
}

// TeamWebhook authenticates git push webhooks for a team's Applications.
type TeamWebhook struct {
	// secretRef names a Secret in the team's namespace whose key `secret` holds the shared
	// secret the git server signs push webhooks with, used byte for byte (mind a trailing
	// newline): GitHub's X-Hub-Signature-256 and Gitea's or Forgejo's X-Gitea-Signature or
	// X-Forgejo-Signature (HMAC-SHA256 of the body), or GitLab's X-Gitlab-Token (the secret
	// itself). Once set, a push wakes the team's Applications only when it verifies with this
	// secret; while the Secret or its key is missing or empty, pushes wake none of them (they
	// still poll). Unset: unsigned pushes wake them, unless the controller-manager runs with
	// --git-webhook-require-signature.
	// +optional
	SecretRef *SecretReference `json:"secretRef,omitempty"`
}

// SecretReference names a Secret in the Team's namespace.
type SecretReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// TeamClusters is where a team's templates may run.
type TeamClusters struct {
	// selector selects the allowed Clusters by their labels; the scheduler never places a
	// template of the team's namespace on another cluster, whatever its policy says, and the
	// binding's Scheduled condition names the clusters it left out. matchExpressions take the
	// operators In, NotIn, Exists and DoesNotExist; keys and values follow Kubernetes' label
	// syntax. An empty selector allows every cluster.
	// +required
	Selector policyv1alpha1.LabelSelector `json:"selector"`
}

// TeamStatus says whether the namespace's RoleBindings match the Team.
type TeamStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Team turns its namespace of the control plane into a team's space: its contributor groups
// may write there, its reader groups may read there, and nobody gets anything in another
// team's namespace (Kubernetes RBAC grants nothing by default). One per namespace, named team.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=flotilla
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'team'",message="a namespace holds one Team, named team: metadata.name must be team"
// +kubebuilder:printcolumn:name="Contributors",type=string,JSONPath=`.spec.contributors`
// +kubebuilder:printcolumn:name="Readers",type=string,JSONPath=`.spec.readers`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Description",type=string,JSONPath=`.spec.description`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Team struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TeamSpec `json:"spec"`

	// +optional
	Status TeamStatus `json:"status,omitempty"`
}

// TeamList is a list of Teams.
// +kubebuilder:object:root=true
type TeamList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Team `json:"items"`
}

// ActingGroups are the groups Flotilla acts as, or asks about, on the team's behalf: its
// contributors, less any group a Team may not name (a Team stored before admission refused
// them), plus system:authenticated, which every authenticated identity carries.
func (t *Team) ActingGroups() []string {
	var groups []string
	for _, g := range t.Spec.Contributors {
		if WhyNeverBound(g) == "" {
			groups = append(groups, g)
		}
	}
	sort.Strings(groups)
	return append(groups, "system:authenticated")
}
