package binding

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/traffic"
)

// hostileController is a binding controller over a fake control plane holding objs, with the
// traffic index the manager registers.
func hostileController(t *testing.T, objs ...client.Object) *Controller {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1alpha1.AddToScheme, policyv1alpha1.AddToScheme, workv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithIndex(&workv1alpha1.ResourceBinding{}, dependenciesIndex, recordedDependencies).WithIndex(&workv1alpha1.ClusterResourceBinding{}, dependenciesIndex, recordedDependencies).WithObjects(objs...).
		WithIndex(&workv1alpha1.ResourceBinding{}, trafficIndex, func(o client.Object) []string {
			if rb := o.(*workv1alpha1.ResourceBinding); rb.Spec.Revisions != nil && rb.Spec.Resource.Kind == "Deployment" {
				return traffic.Names(rb.Spec.Revisions.Traffic)
			}
			return nil
		}).Build()
	return &Controller{Client: c, Reader: c}
}

// routedWorkload is a namespace's Deployment binding whose release routes through HTTPRoute web.
func routedWorkload(ns string, policy workv1alpha1.PolicyReference) *workv1alpha1.ResourceBinding {
	return &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-deployment"},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"}, PolicyRef: policy,
			Revisions: &workv1alpha1.Revisions{Latest: 2, Stable: 1, Traffic: &workv1alpha1.TrafficTargets{StableService: "web", CanaryService: "web-canary", HTTPRoute: "web"}}}}
}

// route is a namespace's HTTPRoute web and its binding by policy.
func route(ns string, policy workv1alpha1.PolicyReference) (*workv1alpha1.ResourceBinding, *unstructured.Unstructured) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("gateway.networking.k8s.io/v1")
	u.SetKind("HTTPRoute")
	u.SetNamespace(ns)
	u.SetName("web")
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-httproute"},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute", Namespace: ns, Name: "web"}, PolicyRef: policy}}
	return b, u
}

// Team A's rollout routes through "HTTPRoute web": team B's route of the same name takes no
// split from it (Flotilla would rewrite team B's route in every member with its own
// credentials), while team A's own route does.
func TestRoutesTakeNoSplitFromAnotherNamespace(t *testing.T) {
	c := hostileController(t, routedWorkload("team-a", ppTeamA))
	ctx := context.Background()
	b, tmpl := route("team-b", workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "team-b", Name: "pp"})
	srcs, err := c.routedBy(ctx, b, tmpl)
	if err != nil || len(srcs) != 0 {
		t.Fatalf("team-b's route is routed by %+v, %v; want by nothing of team-a's", srcs, err)
	}
	b, tmpl = route("team-a", ppTeamA)
	srcs, err = c.routedBy(ctx, b, tmpl)
	if err != nil || len(srcs) != 1 || srcs[0].targets == nil || srcs[0].targets.HTTPRoute != "web" {
		t.Fatalf("team-a's route is routed by %+v, %v; want team-a's Deployment web", srcs, err)
	}
}

// The platform's route (placed by a ClusterPropagationPolicy) takes no split from a workload a
// namespace's own policy releases: a tenant's rollout cannot steer the platform's traffic by
// naming its route. A workload the platform's policy releases still routes through it.
func TestThePlatformsRoutesTakeNoSplitFromATeamsPolicy(t *testing.T) {
	ctx := context.Background()
	b, tmpl := route("team-a", cppPlatform)
	srcs, err := hostileController(t, routedWorkload("team-a", ppTeamA)).routedBy(ctx, b, tmpl)
	if err != nil || len(srcs) != 0 {
		t.Fatalf("the platform's route is routed by %+v, %v; want by no team's rollout", srcs, err)
	}
	srcs, err = hostileController(t, routedWorkload("team-a", cppPlatform)).routedBy(ctx, b, tmpl)
	if err != nil || len(srcs) != 1 {
		t.Fatalf("the platform's route under the platform's rollout is routed by %+v, %v; want the Deployment", srcs, err)
	}
}

// An OverridePolicy changes templates of its own namespace only: team B's policies, whether
// their selectors leave the namespace out or name team A's, never apply to team A's template.
func TestOverridePoliciesOfAnotherNamespaceNeverApply(t *testing.T) {
	rule := []policyv1alpha1.OverrideRule{{Overriders: policyv1alpha1.Overriders{LabelsOverrider: []policyv1alpha1.LabelAnnotationOverrider{
		{Operator: policyv1alpha1.OverrideAdd, Value: map[string]string{"who": "x"}}}}}}
	op := func(ns, name, selectorNamespace string) *policyv1alpha1.OverridePolicy {
		return &policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: policyv1alpha1.OverrideSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: selectorNamespace, Name: "web"}},
				OverrideRules: rule}}
	}
	c := hostileController(t, op("team-a", "mine", ""), op("team-b", "steal", ""), op("team-b", "aimed", "team-a"))
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion("apps/v1")
	tmpl.SetKind("Deployment")
	tmpl.SetNamespace("team-a")
	tmpl.SetName("web")
	rules, err := c.overrideRules(context.Background(), tmpl)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		got = append(got, r.policy)
	}
	if len(got) != 1 || got[0] != "OverridePolicy team-a/mine" {
		t.Errorf("rules for team-a/web come from %v, want OverridePolicy team-a/mine only", got)
	}
}

// An override is content, and content is checked after it: an OverridePolicy that turns an
// ordinary Deployment into one with the node's PID namespace or a privileged container is
// refused for the cluster, naming the Pod Security level, and nothing is written.
func TestAnOverrideCannotMakeAWorkloadPrivileged(t *testing.T) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(deployment("team-a", "web", false))
	if err != nil {
		t.Fatal(err)
	}
	manifest := &unstructured.Unstructured{Object: m}
	manifest.SetAPIVersion("apps/v1")
	manifest.SetKind("Deployment")
	if err := overrideAndCheck(manifest.DeepCopy(), nil, "east", "baseline"); err != nil {
		t.Fatalf("the ordinary Deployment: %v", err)
	}
	for name, op := range map[string]policyv1alpha1.PlaintextOverrider{
		"host PID":             {Path: "/spec/template/spec/hostPID", Operator: policyv1alpha1.OverrideAdd, Value: &policyv1alpha1.JSON{Raw: []byte(`true`)}},
		"privileged container": {Path: "/spec/template/spec/containers/0/securityContext", Operator: policyv1alpha1.OverrideAdd, Value: &policyv1alpha1.JSON{Raw: []byte(`{"privileged":true}`)}},
		"host path volume": {Path: "/spec/template/spec/volumes", Operator: policyv1alpha1.OverrideAdd,
			Value: &policyv1alpha1.JSON{Raw: []byte(`[{"name":"root","hostPath":{"path":"/"}}]`)}},
	} {
		ovs := []namedOverriders{{"OverridePolicy team-a/escalate", policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{op}}}}
		err := overrideAndCheck(manifest.DeepCopy(), ovs, "east", "baseline")
		var re *renderError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), `violates Pod Security level "baseline"`) || !strings.Contains(err.Error(), "nothing is written") {
			t.Errorf("%s: %v, want a render error naming the Pod Security level", name, err)
		}
	}
}

// What a member says about an object (its conditions' messages, which whoever controls the
// object or its controller writes) reaches the binding bounded, however long or many.
func TestMemberConditionsAreBoundedWhenEchoedOnTheBinding(t *testing.T) {
	type condition struct{ Type, Status, Reason, Message string }
	for name, conds := range map[string][]condition{
		"one long message": {{"Progressing", "False", "ProgressDeadlineExceeded", strings.Repeat("x", 1<<20) + "TAIL"}},
		"many conditions": func() []condition {
			var out []condition
			for i := range 5000 {
				out = append(out, condition{"Ready", "False", fmt.Sprint("R", i), "not ready"})
			}
			return append(out, condition{"Ready", "False", "Last", "TAIL"})
		}(),
	} {
		raw, err := json.Marshal(map[string]any{"conditions": conds})
		if err != nil {
			t.Fatal(err)
		}
		got := failingConditions(&runtime.RawExtension{Raw: raw})
		if len(got) > 4096 || strings.Contains(got, "TAIL") {
			t.Errorf("%s: %d bytes echoed (ending %q), want at most 4096", name, len(got), got[max(0, len(got)-20):])
		}
	}
}
