package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// Previewer schedules a binding with a given policy spec and clusters, writing nothing.
type Previewer interface {
	Preview(ctx context.Context, b workv1alpha1.Binding, spec *policyv1alpha1.PropagationSpec, clusters []clusterv1alpha1.Cluster) ([]workv1alpha1.TargetCluster, error)
}

// Change is what a proposed object would do to one template's placement.
type Change struct {
	Namespace     string                       `json:"namespace,omitempty"`
	Kind          string                       `json:"kind"`
	Name          string                       `json:"name"`
	Before        []workv1alpha1.TargetCluster `json:"before"`
	After         []workv1alpha1.TargetCluster `json:"after"`
	Added         []string                     `json:"added,omitempty"`
	Removed       []string                     `json:"removed,omitempty"`
	ReplicasMoved int32                        `json:"replicasMoved"`
	Error         string                       `json:"error,omitempty"`
}

// WhatIf is the answer: every placement that would change, and how many would not.
type WhatIf struct {
	Object    string   `json:"object"`
	Changes   []Change `json:"changes"`
	Unchanged int      `json:"unchanged"`
	Releases  int      `json:"releases"`
	Note      string   `json:"note"`
}

// whatIf previews a changed Cluster, PropagationPolicy, ClusterPropagationPolicy, TargetPolicy
// or ClusterTargetPolicy (YAML or JSON) against the bindings the user may read, writing
// nothing. The user must be allowed to make the change they ask about.
func (s *Server) whatIf(w http.ResponseWriter, r *http.Request, u *User) {
	if s.Preview == nil {
		fail(w, http.StatusServiceUnavailable, "", "what-if is not served by this process")
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil || len(raw) > 1<<20 {
		fail(w, http.StatusBadRequest, "body", "send one object of at most 1 MiB as YAML or JSON")
		return
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		fail(w, http.StatusBadRequest, "body", "not YAML or JSON: %v", err)
		return
	}
	var tm metav1.TypeMeta
	_ = json.Unmarshal(js, &tm)
	strict := func(into any) error {
		d := json.NewDecoder(bytes.NewReader(js))
		d.DisallowUnknownFields()
		return d.Decode(into)
	}
	ctx := r.Context()
	var clusters clusterv1alpha1.ClusterList
	if err := s.Client.List(ctx, &clusters); err != nil {
		fail(w, http.StatusServiceUnavailable, "", "listing clusters: %v", err)
		return
	}
	var (
		spec     *policyv1alpha1.PropagationSpec
		applies  func(workv1alpha1.Binding) bool
		proposed client.Object // a target policy: each application it selects is planned anew
		check    access
		object   string
	)
	switch {
	case tm.Kind == "Cluster" && tm.APIVersion == clusterv1alpha1.GroupVersion.String():
		cl := &clusterv1alpha1.Cluster{}
		if err := strict(cl); err != nil {
			fail(w, http.StatusBadRequest, "body", "Cluster: %v", err)
			return
		}
		check = access{verb: "update", group: clusterv1alpha1.GroupVersion.Group, resource: "clusters"}
		i := slices.IndexFunc(clusters.Items, func(c clusterv1alpha1.Cluster) bool { return c.Name == cl.Name })
		if i < 0 {
			clusters.Items = append(clusters.Items, *cl)
		} else {
			cl.Status = clusters.Items[i].Status // the proposal changes spec and labels, not what the member reports
			clusters.Items[i] = *cl
		}
		applies = func(workv1alpha1.Binding) bool { return true }
		object = "Cluster " + cl.Name
	case tm.Kind == "PropagationPolicy" && tm.APIVersion == policyv1alpha1.GroupVersion.String():
		p := &policyv1alpha1.PropagationPolicy{}
		if err := strict(p); err != nil {
			fail(w, http.StatusBadRequest, "body", "PropagationPolicy: %v", err)
			return
		}
		if p.Namespace == "" {
			fail(w, http.StatusBadRequest, "metadata.namespace", "PropagationPolicy %s: set metadata.namespace", p.Name)
			return
		}
		check = access{verb: "update", group: policyv1alpha1.GroupVersion.Group, resource: "propagationpolicies", namespace: p.Namespace}
		spec = &p.Spec
		applies = func(b workv1alpha1.Binding) bool {
			ref := b.BindingSpec().PolicyRef
			return ref.Kind == "PropagationPolicy" && ref.Namespace == p.Namespace && ref.Name == p.Name
		}
		object = "PropagationPolicy " + p.Namespace + "/" + p.Name
	case tm.Kind == "ClusterPropagationPolicy" && tm.APIVersion == policyv1alpha1.GroupVersion.String():
		p := &policyv1alpha1.ClusterPropagationPolicy{}
		if err := strict(p); err != nil {
			fail(w, http.StatusBadRequest, "body", "ClusterPropagationPolicy: %v", err)
			return
		}
		check = access{verb: "update", group: policyv1alpha1.GroupVersion.Group, resource: "clusterpropagationpolicies"}
		spec = &p.Spec
		applies = func(b workv1alpha1.Binding) bool {
			ref := b.BindingSpec().PolicyRef
			return ref.Kind == "ClusterPropagationPolicy" && ref.Name == p.Name
		}
		object = "ClusterPropagationPolicy " + p.Name
	case tm.Kind == "TargetPolicy" && tm.APIVersion == appsv1alpha1.GroupVersion.String():
		p := &appsv1alpha1.TargetPolicy{}
		if err := strict(p); err != nil {
			fail(w, http.StatusBadRequest, "body", "TargetPolicy: %v", err)
			return
		}
		if p.Namespace == "" {
			fail(w, http.StatusBadRequest, "metadata.namespace", "TargetPolicy %s: set metadata.namespace", p.Name)
			return
		}
		check = access{verb: "update", group: appsv1alpha1.GroupVersion.Group, resource: "targetpolicies", namespace: p.Namespace}
		proposed = p
		object = "TargetPolicy " + p.Namespace + "/" + p.Name
	case tm.Kind == "ClusterTargetPolicy" && tm.APIVersion == appsv1alpha1.GroupVersion.String():
		p := &appsv1alpha1.ClusterTargetPolicy{}
		if err := strict(p); err != nil {
			fail(w, http.StatusBadRequest, "body", "ClusterTargetPolicy: %v", err)
			return
		}
		check = access{verb: "update", group: appsv1alpha1.GroupVersion.Group, resource: "clustertargetpolicies"}
		proposed = p
		object = "ClusterTargetPolicy " + p.Name
	default:
		fail(w, http.StatusBadRequest, "kind", "what-if takes a cluster.flotilla.dev/v1alpha1 Cluster, a policy.flotilla.dev/v1alpha1 PropagationPolicy or ClusterPropagationPolicy, "+
			"or an apps.flotilla.dev/v1alpha1 TargetPolicy or ClusterTargetPolicy; got %s %s", tm.APIVersion, tm.Kind)
		return
	}
	ok, err := s.authz.allowed(ctx, u, check)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "", "authorizing with the control plane: %v", err)
		return
	}
	if !ok {
		fail(w, http.StatusForbidden, "", "%s may not %s %s.%s%s: what-if answers only for changes its asker may make", u.Name, check.verb, check.resource, check.group, inNamespace(check.namespace))
		return
	}
	scope, err := s.scope(ctx, u)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "", "authorizing with the control plane: %v", err)
		return
	}
	var bl workv1alpha1.ResourceBindingList
	if err := s.Client.List(ctx, &bl); err != nil {
		fail(w, http.StatusServiceUnavailable, "", "listing bindings: %v", err)
		return
	}
	out := WhatIf{Object: object, Changes: []Change{},
		Note: "placement changes start no release: a cluster added receives the revision the others run as stable; policy selectors are not re-matched, only the placement of the templates the policy places now"}
	if proposed != nil {
		out.Note = "placement changes start no release: a cluster added receives the revision the others run as stable; each application the policy selects before or after the change is placed anew, " +
			"its templates by the policy it would generate; overrideRules are not previewed"
		if err := s.whatIfTargets(ctx, &out, proposed, scope, bl.Items, clusters.Items); err != nil {
			fail(w, http.StatusServiceUnavailable, "", "%v", err)
			return
		}
		reply(w, out)
		return
	}
	for i := range bl.Items {
		b := &bl.Items[i]
		if !inScope(scope, b.Namespace) || !applies(b) || !b.DeletionTimestamp.IsZero() {
			continue
		}
		s.preview(ctx, &out, b, spec, clusters.Items)
	}
	reply(w, out)
}

// preview adds what a spec would do to one binding's placement to the answer.
func (s *Server) preview(ctx context.Context, out *WhatIf, b *workv1alpha1.ResourceBinding, spec *policyv1alpha1.PropagationSpec, clusters []clusterv1alpha1.Cluster) {
	after, err := s.Preview.Preview(ctx, b, spec, clusters)
	ch := diff(b, after)
	if err != nil {
		ch.Error = err.Error()
		ch.After = nil
	}
	if err == nil && equality.Semantic.DeepEqual(normal(b.Spec.Clusters), normal(after)) ||
		err != nil && len(b.Spec.Clusters) == 0 { // placed nowhere before, and nowhere after
		out.Unchanged++
		return
	}
	out.Changes = append(out.Changes, ch)
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}

func normal(ts []workv1alpha1.TargetCluster) []workv1alpha1.TargetCluster {
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b workv1alpha1.TargetCluster) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	if out == nil {
		out = []workv1alpha1.TargetCluster{}
	}
	return out
}

func diff(b *workv1alpha1.ResourceBinding, after []workv1alpha1.TargetCluster) Change {
	res := b.Spec.Resource
	ch := Change{Namespace: res.Namespace, Kind: res.Kind, Name: res.Name, Before: normal(b.Spec.Clusters), After: normal(after)}
	before := map[string]int32{}
	for _, t := range b.Spec.Clusters {
		before[t.Name] = t.Replicas
	}
	now := map[string]int32{}
	for _, t := range after {
		now[t.Name] = t.Replicas
		if _, ok := before[t.Name]; !ok {
			ch.Added = append(ch.Added, t.Name)
		}
	}
	for name, n := range before {
		if _, ok := now[name]; !ok {
			ch.Removed = append(ch.Removed, name)
		}
		if d := n - now[name]; d > 0 {
			ch.ReplicasMoved += d
		}
	}
	slices.Sort(ch.Added)
	slices.Sort(ch.Removed)
	return ch
}
