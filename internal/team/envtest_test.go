package team

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/testenv"
)

// admission starts a real API server with the Team CRD of config/crd/bases; create reports
// whether a Team with spec is admitted, each in a namespace of its own (one Team per namespace).
func admission(t *testing.T) (create func(spec tenancyv1alpha1.TeamSpec) error, c client.Client) {
	t.Helper()
	ctx := context.Background()
	_, c = testenv.Start(t)
	i := 0
	return func(spec tenancyv1alpha1.TeamSpec) error {
		i++
		ns := fmt.Sprintf("team-%d", i)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		return c.Create(ctx, &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenancyv1alpha1.TeamName}, Spec: spec})
	}, c
}

// refused fails the test unless err is the API server's refusal naming every want.
func refused(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Errorf("%s: %v, want refused as Invalid", what, err)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: refusal %q does not say %q", what, err, w)
		}
	}
}

// A Team naming a group that means everyone (or bypasses authorization) as contributor or
// reader would open its namespace to every caller: admission refuses it, naming the field and
// the fix; one namespace's service accounts may be named.
func TestTeamRefusesGroupsThatMeanEveryone(t *testing.T) {
	create, _ := admission(t)
	attacks := []string{tenancyv1alpha1.NeverBoundGroupPrefix + "kubeadm:default-node-token"}
	for g := range tenancyv1alpha1.NeverBoundGroups {
		attacks = append(attacks, g)
	}
	for _, g := range attacks {
		refused(t, "contributor "+g, create(tenancyv1alpha1.TeamSpec{Contributors: []string{"shop-devs", g}}), "spec.contributors[1]", "contributors: system:unauthenticated", "name the team's own groups")
		refused(t, "reader "+g, create(tenancyv1alpha1.TeamSpec{Readers: []string{g}}), "spec.readers[0]", "readers: system:unauthenticated")
	}
	if err := create(tenancyv1alpha1.TeamSpec{Contributors: []string{"shop-devs", "system:serviceaccounts:shop"}, Readers: []string{"shop-viewers", "system:serviceaccounts:shop"}}); err != nil {
		t.Errorf("a team's own groups and one namespace's service accounts: %v", err)
	}
}

// A repositories glob that path.Match cannot parse matches nothing, silently: admission allows
// the wildcards * and ? only, and says so.
func TestTeamRefusesAGlobThatDoesNotParse(t *testing.T) {
	create, _ := admission(t)
	for _, glob := range []string{"https://git.example.com/shop/[", "https://git.example.com/shop/web\\", "https://git.example.com/shop/[ab]", "https://git.example.com/shop/]"} {
		refused(t, glob, create(tenancyv1alpha1.TeamSpec{Repositories: []string{glob}}), "spec.repositories[0]", "only the wildcards * and ? are allowed")
	}
	if err := create(tenancyv1alpha1.TeamSpec{Repositories: []string{"https://git.example.com/shop/*", "git@git.example.com:shop/web-?.git"}}); err != nil {
		t.Errorf("globs with * and ?: %v", err)
	}
}

// clusters.selector is a bounded label selector: an operator Kubernetes does not know or a key
// that is no label key is refused, where metav1.LabelSelector let them through to fail later.
// Teams keep the JSON shape they were stored in.
func TestTeamRefusesUnknownSelectorOperator(t *testing.T) {
	create, c := admission(t)
	sel := func(s policyv1alpha1.LabelSelector) tenancyv1alpha1.TeamSpec {
		return tenancyv1alpha1.TeamSpec{Clusters: &tenancyv1alpha1.TeamClusters{Selector: s}}
	}
	refused(t, "operator Like", create(sel(policyv1alpha1.LabelSelector{MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "region", Operator: "Like", Values: []string{"us-*"}}}})),
		"spec.clusters.selector.matchExpressions[0].operator", `"In", "NotIn", "Exists", "DoesNotExist"`)
	refused(t, "key bad key!", create(sel(policyv1alpha1.LabelSelector{MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "bad key!", Operator: "Exists"}}})),
		"spec.clusters.selector.matchExpressions[0].key")
	refused(t, "matchLabels key bad key!", create(sel(policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"bad key!": "x"}})),
		"spec.clusters.selector.matchLabels")
	refused(t, "In without values", create(sel(policyv1alpha1.LabelSelector{MatchExpressions: []policyv1alpha1.LabelSelectorRequirement{{Key: "region", Operator: "In"}}})),
		"In and NotIn need at least one value")

	// The shape of metav1.LabelSelector, as Teams were stored before, reads back unchanged.
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": tenancyv1alpha1.GroupVersion.String(), "kind": "Team",
		"metadata": map[string]any{"namespace": "shop", "name": tenancyv1alpha1.TeamName},
		"spec": map[string]any{"clusters": map[string]any{"selector": map[string]any{
			"matchLabels":      map[string]any{"tier": "gold"},
			"matchExpressions": []any{map[string]any{"key": "region", "operator": "In", "values": []any{"us-east", "us-west"}}},
		}}},
	}}
	if err := c.Create(ctx, u); err != nil {
		t.Fatalf("a selector in the metav1 shape: %v", err)
	}
	team := &tenancyv1alpha1.Team{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(u), team); err != nil {
		t.Fatal(err)
	}
	got := team.Spec.Clusters.Selector.AsMetav1()
	if got.MatchLabels["tier"] != "gold" || len(got.MatchExpressions) != 1 || got.MatchExpressions[0].Operator != metav1.LabelSelectorOpIn || len(got.MatchExpressions[0].Values) != 2 {
		t.Errorf("selector read back as %+v", got)
	}
}
