package targetplan

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

func regionIn(regions ...string) policyv1alpha1.LabelSelector {
	return policyv1alpha1.LabelSelector{MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "region", Operator: "In", Values: regions}}}
}

func tier(t policyv1alpha1.LabelValue) policyv1alpha1.LabelSelector {
	return policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"tier": t}}
}

func targetPolicy(ns, name string, spec appsv1alpha1.TargetSpec) *appsv1alpha1.TargetPolicy {
	return &appsv1alpha1.TargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func clusterTargetPolicy(name string, spec appsv1alpha1.TargetSpec) *appsv1alpha1.ClusterTargetPolicy {
	return &appsv1alpha1.ClusterTargetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func TestPlanForWithAProposedTargetPolicy(t *testing.T) {
	fleet := []client.Object{
		&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "east", Labels: map[string]string{"region": "us-east"}}},
		&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "west", Labels: map[string]string{"region": "us-west"}}},
		&clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "europe", Labels: map[string]string{"region": "eu-west"}}},
		targetPolicy("shop", "web", appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: regionIn("us-east")}),
	}
	web := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"tier": "web"}},
		Status: appsv1alpha1.ApplicationStatus{Clusters: []string{"east"}, Objects: []appsv1alpha1.ApplicationObject{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}}
	api := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api", Labels: map[string]string{"tier": "api"}},
		Status: appsv1alpha1.ApplicationStatus{Objects: []appsv1alpha1.ApplicationObject{{APIVersion: "apps/v1", Kind: "Deployment", Name: "api"}}}}
	// refused: its Team refuses its repository, so it has no templates and runs nowhere,
	// although it still claims the clusters of an earlier status.
	refused := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "refused", Labels: map[string]string{"tier": "web"}},
		Status: appsv1alpha1.ApplicationStatus{Clusters: []string{"east"}}}
	usOnly := &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: tenancyv1alpha1.TeamName},
		Spec: tenancyv1alpha1.TeamSpec{Clusters: &tenancyv1alpha1.TeamClusters{Selector: policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"region": "us-east"}}}}}
	divided := &policyv1alpha1.ReplicaScheduling{Type: "Divided"}
	duplicated := &policyv1alpha1.ReplicaScheduling{Type: "Duplicated"}

	cases := []struct {
		name     string
		extra    []client.Object
		app      *appsv1alpha1.Application
		proposed client.Object

		reason, kind, policy string
		clusters, left       []string
		targets              []string
		message              []string // parts of the message
		affinity             *policyv1alpha1.ClusterAffinity
	}{
		{name: "as stored", app: web,
			reason: appsv1alpha1.ReasonPlaced, kind: "PropagationPolicy", policy: "shop/app-web", clusters: []string{"east"}, targets: []string{"shop/web"},
			message: []string{"placed on 1 cluster by shop/web"}, affinity: &policyv1alpha1.ClusterAffinity{LabelSelector: ptr.To(regionIn("us-east"))}},
		{name: "the proposed policy replaces the stored one of its name", app: web,
			proposed: targetPolicy("shop", "web", appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: regionIn("us-east", "us-west")}),
			reason:   appsv1alpha1.ReasonPlaced, kind: "PropagationPolicy", policy: "shop/app-web", clusters: []string{"east", "west"}, targets: []string{"shop/web"},
			message: []string{"placed on 2 clusters"}, affinity: &policyv1alpha1.ClusterAffinity{LabelSelector: ptr.To(regionIn("us-east", "us-west"))}},
		{name: "the Team still bounds the proposal", app: web, extra: []client.Object{usOnly},
			proposed: targetPolicy("shop", "web", appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: regionIn("us-east", "us-west")}),
			reason:   appsv1alpha1.ReasonPlaced, kind: "PropagationPolicy", policy: "shop/app-web", clusters: []string{"east"}, left: []string{"west"}, targets: []string{"shop/web"},
			message: []string{"left out west", "Team shop/team"}, affinity: &policyv1alpha1.ClusterAffinity{LabelSelector: ptr.To(regionIn("us-east", "us-west"))}},
		{name: "a proposal that no longer selects the application leaves it without target", app: web,
			proposed: targetPolicy("shop", "web", appsv1alpha1.TargetSpec{AppSelector: tier("api"), ClusterSelector: regionIn("us-east")}),
			reason:   appsv1alpha1.ReasonNoTarget, message: []string{"runs nowhere"}},
		{name: "a proposal of another namespace does not take part", app: web,
			proposed: targetPolicy("other", "everything", appsv1alpha1.TargetSpec{ClusterSelector: regionIn("eu-west")}),
			reason:   appsv1alpha1.ReasonPlaced, kind: "PropagationPolicy", policy: "shop/app-web", clusters: []string{"east"}, targets: []string{"shop/web"},
			message: []string{"placed on 1 cluster"}, affinity: &policyv1alpha1.ClusterAffinity{LabelSelector: ptr.To(regionIn("us-east"))}},
		{name: "a new policy adds an application no policy selected", app: api,
			proposed: targetPolicy("shop", "api", appsv1alpha1.TargetSpec{AppSelector: tier("api"), ClusterSelector: regionIn("eu-west")}),
			reason:   appsv1alpha1.ReasonPlaced, kind: "PropagationPolicy", policy: "shop/app-api", clusters: []string{"europe"}, targets: []string{"shop/api"},
			message: []string{"placed on 1 cluster by shop/api"}, affinity: &policyv1alpha1.ClusterAffinity{LabelSelector: ptr.To(regionIn("eu-west"))}},
		{name: "an application without templates (refused) lists no clusters, and says which it would go to", app: refused,
			reason: appsv1alpha1.ReasonNoTarget, targets: []string{"shop/web"}, message: []string{"no templates yet", "Ready condition", "select east"}},
		{name: "without the proposal that application has no target", app: api,
			reason: appsv1alpha1.ReasonNoTarget, message: []string{"no TargetPolicy of namespace shop", "runs nowhere"}},
		{name: "a ClusterTargetPolicy joining makes the placement the platform's", app: web,
			proposed: clusterTargetPolicy("everywhere-web", appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: regionIn("eu-west")}),
			reason:   appsv1alpha1.ReasonPlaced, kind: "ClusterPropagationPolicy", policy: "app-shop.web", clusters: []string{"east", "europe"}, targets: []string{"shop/web", "everywhere-web"},
			message: []string{"placed on 2 clusters by shop/web, everywhere-web"}, affinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "europe"}}},
		{name: "a conflicting proposal moves nothing and names both policies", app: web,
			extra:    []client.Object{targetPolicy("shop", "spread", appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: regionIn("us-west"), ReplicaScheduling: divided})},
			proposed: clusterTargetPolicy("platform", appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: regionIn("eu-west"), ReplicaScheduling: duplicated}),
			reason:   appsv1alpha1.ReasonTargetConflict, clusters: []string{"east"}, targets: []string{"shop/spread", "shop/web", "platform"},
			message: []string{"TargetPolicy shop/spread", "ClusterTargetPolicy platform", "spec.replicaScheduling"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(append(fleet, c.extra...)...).Build()
			p, err := PlanFor(context.Background(), r, c.app, c.proposed)
			if err != nil {
				t.Fatal(err)
			}
			if p.Reason != c.reason || p.Kind != c.kind || strings.TrimPrefix(p.Namespace+"/"+p.Name, "/") != strings.TrimPrefix(c.policy, "/") {
				t.Errorf("plan %s %s %s/%s, want %s %s %s", p.Reason, p.Kind, p.Namespace, p.Name, c.reason, c.kind, c.policy)
			}
			if d := cmp.Diff(c.clusters, p.Clusters); d != "" {
				t.Errorf("clusters (-want +got):\n%s", d)
			}
			if d := cmp.Diff(c.left, p.Left); d != "" {
				t.Errorf("left out (-want +got):\n%s", d)
			}
			if d := cmp.Diff(c.targets, p.TargetPolicies); d != "" {
				t.Errorf("target policies (-want +got):\n%s", d)
			}
			for _, part := range c.message {
				if !strings.Contains(p.Message, part) {
					t.Errorf("message %q does not say %q", p.Message, part)
				}
			}
			if d := cmp.Diff(c.affinity, p.Spec.Placement.ClusterAffinity); d != "" {
				t.Errorf("cluster affinity (-want +got):\n%s", d)
			}
			if p.Placed() && len(p.Spec.ResourceSelectors) != 1 {
				t.Errorf("resource selectors %+v, want the application's Deployments", p.Spec.ResourceSelectors)
			}
		})
	}
}

func TestPlanForRefusesOtherKinds(t *testing.T) {
	r := fake.NewClientBuilder().WithScheme(kube.Scheme).Build()
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	if _, err := PlanFor(context.Background(), r, app, &policyv1alpha1.PropagationPolicy{}); err == nil {
		t.Error("a PropagationPolicy was taken as a target policy")
	}
}

// Trust follows the writer: a team's rollout copied into the platform's generated policy is
// named as the team's, so its gates never run with the platform's allowances.
func TestATeamsRolloutInThePlatformsPolicyIsMarkedAsTheTeams(t *testing.T) {
	cluster := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "east", Labels: map[string]string{"region": "us-east"}}}
	web := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"tier": "web"}},
		Status: appsv1alpha1.ApplicationStatus{Objects: []appsv1alpha1.ApplicationObject{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}}
	gated := &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "checked", Gates: policyv1alpha1.Gates{Analysis: &policyv1alpha1.AnalysisGate{
		Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: "host-probe", ClusterScope: true}}}}}}}
	cases := []struct {
		name      string
		policies  []client.Object
		kind      string
		writtenBy string
	}{
		{"the team's rollout, the platform's placement", []client.Object{
			targetPolicy("shop", "web", appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: regionIn("us-east"), Rollout: gated}),
			clusterTargetPolicy("platform", appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: regionIn("us-east")}),
		}, "ClusterPropagationPolicy", "shop/web"},
		{"the platform's rollout", []client.Object{
			targetPolicy("shop", "web", appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: regionIn("us-east")}),
			clusterTargetPolicy("platform", appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: regionIn("us-east"), Rollout: gated}),
		}, "ClusterPropagationPolicy", ""},
		{"the team's copy of the platform's rollout", []client.Object{
			targetPolicy("shop", "web", appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: regionIn("us-east"), Rollout: gated.DeepCopy()}),
			clusterTargetPolicy("platform", appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: regionIn("us-east"), Rollout: gated}),
		}, "ClusterPropagationPolicy", ""},
		{"the team's own policy", []client.Object{
			targetPolicy("shop", "web", appsv1alpha1.TargetSpec{AppSelector: tier("web"), ClusterSelector: regionIn("us-east"), Rollout: gated}),
		}, "PropagationPolicy", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(append(c.policies, cluster)...).Build()
			p, err := PlanFor(context.Background(), r, web, nil)
			if err != nil {
				t.Fatal(err)
			}
			if p.Kind != c.kind || p.RolloutWrittenBy != c.writtenBy {
				t.Errorf("plan %s with rollout written by %q, want %s by %q", p.Kind, p.RolloutWrittenBy, c.kind, c.writtenBy)
			}
			if p.Spec.Rollout == nil {
				t.Errorf("the rollout is not carried")
			}
		})
	}
}

func TestConflictNamesBothPoliciesAndTheField(t *testing.T) {
	divided := &policyv1alpha1.ReplicaScheduling{Type: "Divided"}
	duplicated := &policyv1alpha1.ReplicaScheduling{Type: "Duplicated"}
	cases := []struct {
		name    string
		targets []target
		field   string
	}{
		{"one sets it", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: divided}}, {ref: "b", spec: &appsv1alpha1.TargetSpec{}}}, ""},
		{"both agree", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: divided}}, {ref: "b", spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: divided.DeepCopy()}}}, ""},
		{"replicas differ", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: divided}}, {ref: "b", spec: &appsv1alpha1.TargetSpec{}}, {ref: "c", cluster: true, spec: &appsv1alpha1.TargetSpec{ReplicaScheduling: duplicated}}}, "spec.replicaScheduling"},
		{"rollouts differ", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "x"}}}}},
			{ref: "b", spec: &appsv1alpha1.TargetSpec{Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "y"}}}}}}, "spec.rollout"},
		{"deletion differs", []target{{ref: "a", spec: &appsv1alpha1.TargetSpec{DeletionPolicy: policyv1alpha1.DeletionOrphan}}, {ref: "b", spec: &appsv1alpha1.TargetSpec{DeletionPolicy: policyv1alpha1.DeletionDelete}}}, "spec.deletionPolicy"},
	}
	for _, c := range cases {
		field, a, b := conflict(c.targets)
		if field != c.field {
			t.Errorf("%s: conflict field %q, want %q", c.name, field, c.field)
		}
		if field != "" && (a.ref == "" || b.ref == "" || a.ref == b.ref) {
			t.Errorf("%s: conflict names %q and %q, want two policies", c.name, a.ref, b.ref)
		}
	}
	_, a, b := conflict(cases[2].targets)
	if a.describe() != "TargetPolicy a" || !strings.HasPrefix(b.describe(), "ClusterTargetPolicy c") {
		t.Errorf("conflict describes %q and %q", a.describe(), b.describe())
	}
}

func TestFirstTakesTheFirstSetValue(t *testing.T) {
	ts := []target{{spec: &appsv1alpha1.TargetSpec{}}, {spec: &appsv1alpha1.TargetSpec{DeletionPolicy: policyv1alpha1.DeletionOrphan}}}
	if got := first(ts, func(s *appsv1alpha1.TargetSpec) policyv1alpha1.DeletionPolicy { return s.DeletionPolicy }); got != policyv1alpha1.DeletionOrphan {
		t.Errorf("first deletion policy %q", got)
	}
	if got := first(ts, func(s *appsv1alpha1.TargetSpec) *policyv1alpha1.RolloutStrategy { return s.Rollout }); got != nil {
		t.Errorf("no rollout set, got %v", got)
	}
}

func TestSelectorsOnePerKindByApplicationLabel(t *testing.T) {
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Status: appsv1alpha1.ApplicationStatus{Objects: []appsv1alpha1.ApplicationObject{
		{APIVersion: "v1", Kind: "ConfigMap", Name: "a"}, {APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, {APIVersion: "v1", Kind: "ConfigMap", Name: "b"},
	}}}
	for _, platform := range []bool{false, true} {
		sels := selectors(app, platform)
		if len(sels) != 2 || sels[0].Kind != "Deployment" || sels[1].Kind != "ConfigMap" {
			t.Fatalf("selectors %+v", sels)
		}
		for _, s := range sels {
			if s.LabelSelector.MatchLabels[appsv1alpha1.ApplicationLabel] != "web" {
				t.Errorf("selector %+v does not select by the application label", s)
			}
			if platform != (s.Namespace == "shop") {
				t.Errorf("platform=%v: selector namespace %q", platform, s.Namespace)
			}
		}
	}
}

// A policy of the generated placement's name that Flotilla did not generate for the
// Application (a user's, or another Application's) is never taken over: the Application
// says so, and the policy keeps its spec.
