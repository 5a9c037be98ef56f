package release

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// A release of a workload that depends on a database pins no cluster where the database does
// not run healthy: east takes revision 2, west waits saying for what, its wave's deadline not
// running; once the database is healthy in west, the release goes on there and succeeds.
func TestDependenciesHoldAReleaseWhereTheyAreNotHealthy(t *testing.T) {
	ctx := context.Background()
	c, b := releaseFixture(t, &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
		{Name: "all", ClusterNames: []string{"east", "west"}}}}, healthyAsPinned)
	db := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-statefulset"},
		Spec: workv1alpha1.ResourceBindingSpec{
			Resource:  workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: "shop", Name: "db"},
			PolicyRef: workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "db"},
			Clusters:  []workv1alpha1.TargetCluster{{Name: "east"}, {Name: "west"}}}}
	if err := c.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	report := func(west workv1alpha1.Health) {
		t.Helper()
		db.Status.Clusters = []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true, Health: workv1alpha1.HealthHealthy},
			{Cluster: "west", Applied: true, Health: west}}
		if err := c.Status().Update(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	report(workv1alpha1.HealthProgressing)
	stableRevision1(t, c, b)
	policy := &policyv1alpha1.PropagationPolicy{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web"}, policy); err != nil {
		t.Fatal(err)
	}
	policy.Spec.DependsOn = []policyv1alpha1.DependencySelector{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}}
	if err := c.Update(ctx, policy); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the detector copied dependsOn into the binding, with its namespace", func() bool {
		cur := &workv1alpha1.ResourceBinding{}
		return c.Get(ctx, client.ObjectKeyFromObject(b), cur) == nil && len(cur.Spec.DependsOn) == 1 && cur.Spec.DependsOn[0].Namespace == "shop"
	})

	changeImage(t, c, "registry.example/web:2")
	rel := &rolloutv1alpha1.Release{}
	get := func() *rolloutv1alpha1.Release {
		if c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web-deployment-r2"}, rel) != nil {
			return &rolloutv1alpha1.Release{}
		}
		return rel
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("release: %+v", rel.Status)
		}
	})
	const waits = "waits for dependencies: StatefulSet shop/db is Progressing in cluster west"
	eventually(t, "east runs revision 2 and west waits for the database", func() bool {
		r := get()
		return len(r.Status.Waves) == 1 && len(r.Status.Waves[0].Clusters) == 2 && r.Status.Waves[0].Clusters[1].Message == waits &&
			r.Status.Waves[0].Clusters[0].Phase == rolloutv1alpha1.ClusterHealthy
	})
	cur := &workv1alpha1.ResourceBinding{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(b), cur); err != nil || cur.Spec.Revisions.RevisionFor("west") != 1 || cur.Spec.Revisions.RevisionFor("east") != 2 {
		t.Fatalf("pins %+v while the database is not healthy in west", cur.Spec.Revisions)
	}
	if rel.Status.Phase != rolloutv1alpha1.ReleaseProgressing {
		t.Fatalf("release %s: %s", rel.Status.Phase, rel.Status.Message)
	}

	report(workv1alpha1.HealthHealthy)
	eventually(t, "the release went on in west and succeeded", func() bool {
		return get().Status.Phase == rolloutv1alpha1.ReleaseSucceeded
	})
}
