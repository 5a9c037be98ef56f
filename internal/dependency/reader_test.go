package dependency

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// A dependency in another namespace counts only where the dependent namespace's Team may read
// it, as the control plane answers for the Team's contributors (never a group that means
// everyone or bypasses authorization); otherwise, and without a Team, it reads exactly as an
// Application that does not exist, so the dependent learns nothing of the other team.
func TestACrossNamespaceDependencyNeedsTheTeamsRead(t *testing.T) {
	ctx := context.Background()
	secretDB := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "db"},
		Status: appsv1alpha1.ApplicationStatus{Objects: []appsv1alpha1.ApplicationObject{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}}}}
	dbBinding := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "db-statefulset"},
		Spec:   workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "east"}}},
		Status: workv1alpha1.ResourceBindingStatus{Clusters: []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true, Health: workv1alpha1.HealthDegraded}}}}
	team := &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: tenancyv1alpha1.TeamName},
		Spec: tenancyv1alpha1.TeamSpec{Contributors: []string{"shop-devs", "system:masters"}}}
	api := func(ns, app string) *workv1alpha1.ResourceBinding {
		return &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api-deployment"},
			Spec: workv1alpha1.ResourceBindingSpec{DependsOn: []policyv1alpha1.DependencySelector{
				{APIVersion: "apps.flotilla.dev/v1alpha1", Kind: "Application", Namespace: ns, Name: app}}}}
	}
	for _, tc := range []struct {
		name    string
		team    bool
		allowed bool
		dep     *workv1alpha1.ResourceBinding
		want    string
		asked   []authorizationv1.SubjectAccessReviewSpec
	}{
		{name: "no Team", dep: api("payments", "db"), want: "Application payments/db is not found or not readable"},
		{name: "not readable", team: true, dep: api("payments", "db"), want: "Application payments/db is not found or not readable",
			asked: []authorizationv1.SubjectAccessReviewSpec{{User: "flotilla:team:shop", Groups: []string{"shop-devs", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "payments", Verb: "get", Group: "work.flotilla.dev", Resource: "resourcebindings"}}}},
		{name: "not there, readable", team: true, allowed: true, dep: api("payments", "nothing"), want: "Application payments/nothing is not found or not readable",
			asked: []authorizationv1.SubjectAccessReviewSpec{{User: "flotilla:team:shop", Groups: []string{"shop-devs", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "payments", Verb: "get", Group: "work.flotilla.dev", Resource: "resourcebindings"}}}},
		{name: "readable", team: true, allowed: true, dep: api("payments", "db"), want: "Application payments/db is Degraded in cluster east",
			asked: []authorizationv1.SubjectAccessReviewSpec{{User: "flotilla:team:shop", Groups: []string{"shop-devs", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "payments", Verb: "get", Group: "work.flotilla.dev", Resource: "resourcebindings"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{secretDB, dbBinding}
			if tc.team {
				objs = append(objs, team)
			}
			var asked []authorizationv1.SubjectAccessReviewSpec
			c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
						asked = append(asked, sar.Spec)
						sar.Status.Allowed = tc.allowed
						return nil
					}
					return c.Create(ctx, obj, opts...)
				}}).Build()
			r := &Reader{Client: c}
			for range 2 { // the second answer comes from the cache: one review
				deps, err := r.Of(ctx, tc.dep)
				if err != nil {
					t.Fatal(err)
				}
				if got := Verdict("east", deps); got != tc.want {
					t.Errorf("verdict %q, want %q", got, tc.want)
				}
			}
			if diff := cmp.Diff(tc.asked, asked); diff != "" {
				t.Errorf("reviews asked (-want +got):\n%s", diff)
			}
		})
	}
}

// An Application's own templates do not wait for each other, and a template of a dependency
// Application not placed yet holds its dependents.
func TestApplicationDependenciesResolveToTheirTemplates(t *testing.T) {
	ctx := context.Background()
	db := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"},
		Status: appsv1alpha1.ApplicationStatus{Objects: []appsv1alpha1.ApplicationObject{
			{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}, {APIVersion: "v1", Kind: "Service", Name: "db"}}}}
	sts := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-statefulset"},
		Spec:   workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{Kind: "StatefulSet", Name: "db"}, Clusters: []workv1alpha1.TargetCluster{{Name: "east"}}},
		Status: workv1alpha1.ResourceBindingStatus{Clusters: []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true, Health: workv1alpha1.HealthHealthy}}}}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(db, sts).Build()
	r := &Reader{Client: c}
	dependent := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api-deployment"},
		Spec: workv1alpha1.ResourceBindingSpec{DependsOn: []policyv1alpha1.DependencySelector{
			{APIVersion: "apps.flotilla.dev/v1alpha1", Kind: "Application", Namespace: "shop", Name: "db"}}}}
	deps, err := r.Of(ctx, dependent)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Verdict("east", deps), "Application shop/db (Service db) is not placed in cluster east"; got != want {
		t.Errorf("verdict %q, want %q", got, want)
	}
	// The Service of db depends on db itself (an Application's templates share its dependsOn
	// only when it names another one): its own binding is left out.
	own := sts.DeepCopy()
	own.Spec.DependsOn = dependent.Spec.DependsOn
	deps, err = r.Of(ctx, own)
	if err != nil {
		t.Fatal(err)
	}
	if len(deps) != 1 || len(deps[0].Bindings) != 1 || deps[0].Bindings[0].Binding.GetName() != "db-service" {
		t.Errorf("own binding not left out: %+v", deps)
	}
}
