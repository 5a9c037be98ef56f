package historian

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	appsv1alpha1 "github.com/flotilla-dev/flotilla/api/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/audit"
	"github.com/flotilla-dev/flotilla/internal/history"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/names"
)

// A staged adoption, a hand-back and a take-back of one cluster: each record says which,
// with a pass that changes nothing in between (the removal must be remembered).
func TestAdoptionUnmanageAndManageHaveTheirCauses(t *testing.T) {
	ctx := context.Background()
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "legacy-deployment", UID: "u1", Generation: 1},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "a", Name: "legacy"},
			Clusters: []workv1alpha1.TargetCluster{{Name: "east"}}, Revisions: &workv1alpha1.Revisions{Latest: 1, Stable: 1}},
		Status: workv1alpha1.ResourceBindingStatus{Clusters: []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy}}}}
	rel := &rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "legacy-deployment-r1"},
		Spec: rolloutv1alpha1.ReleaseSpec{Binding: rolloutv1alpha1.BindingReference{Kind: "ResourceBinding", Name: "legacy-deployment"}, Revision: 1, StableRevision: 0}}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(b, rel).WithStatusSubresource(b).Build()
	store := &memStore{recs: map[string]history.Record{}}
	h := &Historian{Client: c, Reader: c, Store: store, Clock: clocktesting.NewFakePassiveClock(time.Now())}
	req := ctrl.Request{}
	req.Namespace, req.Name = "a", "legacy-deployment"
	step := func(mut func(*workv1alpha1.ResourceBinding)) {
		cur := &workv1alpha1.ResourceBinding{}
		_ = c.Get(ctx, req.NamespacedName, cur)
		mut(cur)
		cur.Generation++
		st := cur.Status.DeepCopy()
		if err := c.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		cur.Status = *st
		if err := c.Status().Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if _, err := h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
			t.Fatal(err)
		}
	}
	step(func(*workv1alpha1.ResourceBinding) {})
	step(func(b *workv1alpha1.ResourceBinding) {
		b.Spec.UnmanagedClusters = []string{"east"}
		b.Status.Clusters = nil
	})
	step(func(*workv1alpha1.ResourceBinding) {}) // a pass with nothing new must not forget the removal
	step(func(b *workv1alpha1.ResourceBinding) {
		b.Spec.UnmanagedClusters = nil
		b.Status.Clusters = []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy}}
	})
	var got []string
	for _, r := range store.recs {
		got = append(got, fmt.Sprintf("%s %d->%d %s %s", r.Cluster, r.FromRevision, r.ToRevision, r.Cause, r.Outcome))
	}
	slices.Sort(got)
	want := []string{"east 0->1 adoption healthy", "east 0->1 manage healthy", "east 1->0 unmanage removed"}
	if !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
}

func TestTargetedByNamesTheTargetPoliciesAndTheApplication(t *testing.T) {
	generated := workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "app-app1"}
	cases := []struct {
		name     string
		policies []string
		want     string
	}{
		{"a team's TargetPolicy", []string{"shop/team"}, "TargetPolicy shop/team for Application shop/app1"},
		{"a team's and the platform's", []string{"shop/team", "everywhere"}, "TargetPolicy shop/team, ClusterTargetPolicy everywhere for Application shop/app1"},
		{"none known any more: the generated policy", nil, "PropagationPolicy shop/app-app1 (generated for Application shop/app1)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := targetedBy(generated, "shop", "app1", c.policies); got != c.want {
				t.Errorf("targetedBy = %q, want %q", got, c.want)
			}
		})
	}
}

// A placement through a policy the targeting controller generated names the TargetPolicy the
// team wrote and the Application, not the generated policy; a plain policy names itself.
func TestPlacementByATargetPolicyNamesIt(t *testing.T) {
	ctx := context.Background()
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app1"},
		Status: appsv1alpha1.ApplicationStatus{TargetPolicies: []string{"shop/team"}}}
	generated := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app-app1",
		Labels: map[string]string{names.GeneratedAppNameLabel: "app1", names.GeneratedAppNamespaceLabel: "shop"}}}
	plain := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	binding := func(name, policy string) *workv1alpha1.ResourceBinding {
		return &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name + "-configmap", UID: types.UID(name), Generation: 1},
			Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: name},
				PolicyRef: workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: policy},
				Clusters:  []workv1alpha1.TargetCluster{{Name: "east"}}},
			Status: workv1alpha1.ResourceBindingStatus{Clusters: []workv1alpha1.ClusterStatus{{Cluster: "east", Applied: true, Health: workv1alpha1.HealthHealthy}}}}
	}
	targeted, own := binding("app1", "app-app1"), binding("web", "web")
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(app, generated, plain, targeted, own).WithStatusSubresource(targeted, own).Build()
	store := &memStore{recs: map[string]history.Record{}}
	now := time.Now()
	// dave wrote the TargetPolicy; the Application's own write must not take the placement.
	stream := &streamAt{upTo: now.Add(time.Hour), writes: map[audit.Ref][]audit.Write{
		{Group: appsv1alpha1.GroupVersion.Group, Resource: "targetpolicies", Namespace: "shop", Name: "team"}: {{User: "dave", Time: now.Add(-time.Minute)}},
		{Group: appsv1alpha1.GroupVersion.Group, Resource: "applications", Namespace: "shop", Name: "app1"}:   {{User: "erin", Time: now.Add(-time.Second)}},
	}}
	h := &Historian{Client: c, Reader: c, Store: store, Writers: stream, Clock: clocktesting.NewFakePassiveClock(now)}
	for _, b := range []*workv1alpha1.ResourceBinding{targeted, own} {
		req := ctrl.Request{}
		req.Namespace, req.Name = b.Namespace, b.Name
		if _, err := h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]string{}
	for _, r := range store.recs {
		got[r.Name] = r.Cause + ": " + r.CauseDetail
	}
	want := map[string]string{
		"app1": "placement: placed by TargetPolicy shop/team for Application shop/app1",
		"web":  "placement: placed by PropagationPolicy shop/web",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("causes (-want +got):\n%s", d)
	}
	for _, r := range store.recs {
		if r.Name == "app1" && r.Actor != "dave" {
			t.Errorf("the targeted placement's actor is %q, want dave, the TargetPolicy's writer", r.Actor)
		}
	}
}

// A cluster a release took past a change window by override says so, with the reason.
func TestAReleasePastAChangeWindowSaysWhichAndWhy(t *testing.T) {
	ctx := context.Background()
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web-deployment", UID: "u1", Generation: 1},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "a", Name: "web"},
			Clusters: []workv1alpha1.TargetCluster{{Name: "east"}, {Name: "west"}}, Revisions: &workv1alpha1.Revisions{Latest: 1, Stable: 1}},
		Status: workv1alpha1.ResourceBindingStatus{Clusters: []workv1alpha1.ClusterStatus{
			{Cluster: "east", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy}, {Cluster: "west", Applied: true, Revision: 1, Health: workv1alpha1.HealthHealthy}}}}
	rel := &rolloutv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web-deployment-r2"},
		Spec: rolloutv1alpha1.ReleaseSpec{Binding: rolloutv1alpha1.BindingReference{Kind: "ResourceBinding", Name: "web-deployment"}, Revision: 2, StableRevision: 1,
			WindowOverride: &rolloutv1alpha1.WindowOverride{Reason: "CVE-2026-1234"}},
		Status: rolloutv1alpha1.ReleaseStatus{Waves: []rolloutv1alpha1.WaveStatus{
			{Name: "east", Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "east"}}},
			{Name: "west", Clusters: []rolloutv1alpha1.ClusterRelease{{Name: "west", OverriddenWindows: []string{"freeze"}}}}}}}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(b, rel).WithStatusSubresource(b).Build()
	store := &memStore{recs: map[string]history.Record{}}
	h := &Historian{Client: c, Reader: c, Store: store, Clock: clocktesting.NewFakePassiveClock(time.Now())}
	req := ctrl.Request{}
	req.Namespace, req.Name = "a", "web-deployment"
	if _, err := h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
		t.Fatal(err)
	}
	cur := &workv1alpha1.ResourceBinding{}
	_ = c.Get(ctx, req.NamespacedName, cur)
	cur.Spec.Revisions = &workv1alpha1.Revisions{Latest: 2, Stable: 2}
	if err := c.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.Clusters = []workv1alpha1.ClusterStatus{
		{Cluster: "east", Applied: true, Revision: 2, Health: workv1alpha1.HealthHealthy}, {Cluster: "west", Applied: true, Revision: 2, Health: workv1alpha1.HealthHealthy}}
	if err := c.Status().Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if _, err := h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
		t.Fatal(err)
	}
	details := map[string]string{}
	for _, r := range store.recs {
		if r.ToRevision == 2 {
			details[r.Cluster] = r.CauseDetail
		}
	}
	if want := "release web-deployment-r2 wave 2/2 (west), past change window freeze by override: CVE-2026-1234"; details["west"] != want {
		t.Errorf("west: %q, want %q", details["west"], want)
	}
	if want := "release web-deployment-r2 wave 1/2 (east)"; details["east"] != want {
		t.Errorf("east: %q, want %q", details["east"], want)
	}
}

// A cluster relabelled into a TargetPolicy's selector after the policy was written: the
// placement is the doing of who relabelled it.
func TestPlacementOfARelabelledClusterNamesWhoRelabelledIt(t *testing.T) {
	ctx := context.Background()
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app1"},
		Status: appsv1alpha1.ApplicationStatus{TargetPolicies: []string{"gpu-apps"}}}
	generated := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app-app1",
		Labels: map[string]string{names.GeneratedAppNameLabel: "app1", names.GeneratedAppNamespaceLabel: "shop"}}}
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app1-configmap", UID: "u-relabel", Generation: 1},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "app1"},
			PolicyRef: workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "shop", Name: "app-app1"},
			Clusters:  []workv1alpha1.TargetCluster{{Name: "europe"}}},
		Status: workv1alpha1.ResourceBindingStatus{Clusters: []workv1alpha1.ClusterStatus{{Cluster: "europe", Applied: true, Health: workv1alpha1.HealthHealthy}}}}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(app, generated, b).WithStatusSubresource(b).Build()
	store := &memStore{recs: map[string]history.Record{}}
	now := time.Now()
	stream := &streamAt{upTo: now.Add(time.Hour), writes: map[audit.Ref][]audit.Write{
		{Group: appsv1alpha1.GroupVersion.Group, Resource: "clustertargetpolicies", Name: "gpu-apps"}: {{User: "platform-admin", Time: now.Add(-time.Hour)}},
		{Group: clusterv1alpha1.GroupVersion.Group, Resource: "clusters", Name: "europe"}:             {{User: "fleet-ops", Time: now.Add(-time.Second)}},
	}}
	h := &Historian{Client: c, Reader: c, Store: store, Writers: stream, Clock: clocktesting.NewFakePassiveClock(now)}
	req := ctrl.Request{}
	req.Namespace, req.Name = b.Namespace, b.Name
	if _, err := h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
		t.Fatal(err)
	}
	for _, r := range store.recs {
		if r.Actor != "fleet-ops" {
			t.Errorf("%s %s: actor %q, want fleet-ops, who relabelled europe", r.Cluster, r.Cause, r.Actor)
		}
	}
	if len(store.recs) != 1 {
		t.Errorf("%d records, want the one placement", len(store.recs))
	}
}

// An Application's override annotation let its template's release past a window: history
// names the window and the annotation's reason.
func TestAReleasePastAWindowByAnApplicationsAnnotationNamesItsReason(t *testing.T) {
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "app1",
		Annotations: map[string]string{rolloutv1alpha1.OverrideWindowAnnotation: "INC-42 rollback of a bad config"}}}
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion("v1")
	tmpl.SetKind("ConfigMap")
	tmpl.SetNamespace("a")
	tmpl.SetName("app1")
	tmpl.SetLabels(map[string]string{appsv1alpha1.ApplicationLabel: "app1"})
	c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(app, tmpl).Build()
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "app1-configmap"},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "app1"}}}
	l := &lazyContext{h: &Historian{Client: c, Reader: c}, ctx: context.Background(), b: b, tracked: true}
	rel := &rolloutv1alpha1.Release{}
	if got := l.overrideReason(rel); got != "INC-42 rollback of a bad config (annotation of Application a/app1)" {
		t.Errorf("reason %q", got)
	}
	rel.Spec.WindowOverride = &rolloutv1alpha1.WindowOverride{Reason: "CVE"}
	if got := l.overrideReason(rel); got != "CVE" {
		t.Errorf("the release's own override: %q", got)
	}
}
