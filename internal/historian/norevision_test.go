package historian

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// Without a rollout a template has no revisions, yet a changed template, or a changed
// override, applied in a cluster is history there: one record per outcome, cause apply, with
// the image the cluster was given. Replicas moving are not a change of what runs.
func TestChangesWithoutRevisionsAreRecordedPerCluster(t *testing.T) {
	tmpl, b := webBinding("u3", 1, workv1alpha1.ClusterStatus{Cluster: "east", Applied: true, Health: workv1alpha1.HealthHealthy}, workv1alpha1.ClusterStatus{Cluster: "west", Applied: true, Health: workv1alpha1.HealthHealthy})
	b.Spec.TemplateGeneration = 1
	c, store, h, req := historianOf(tmpl, b)
	ctx := context.Background()
	work := func(cluster, image string, replicas int32, env string, applied bool) {
		t.Helper()
		d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
		d.Spec.Replicas = &replicas
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "web", Image: image, Env: []corev1.EnvVar{{Name: "MODE", Value: env}}}}
		raw, _ := json.Marshal(d)
		w := &workv1alpha1.Work{}
		key := client.ObjectKey{Namespace: kube.ExecutionNamespacePrefix + cluster, Name: workv1alpha1.WorkName("shop", "web-deployment")}
		exists := c.Get(ctx, key, w) == nil
		w.Namespace, w.Name, w.Generation = key.Namespace, key.Name, w.Generation+1
		w.Spec.Manifests = []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}
		if applied { // the fake control plane keeps a Work's status with its spec
			w.Status.AppliedHash = kube.ManifestsHash(w)
			w.Status.Conditions = []metav1.Condition{{Type: workv1alpha1.ConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: w.Generation, LastTransitionTime: metav1.Now()}}
		}
		write := c.Create
		if exists {
			write = func(ctx context.Context, o client.Object, _ ...client.CreateOption) error { return c.Update(ctx, o) }
		}
		if err := write(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	health := func(cluster string, hl workv1alpha1.Health) {
		t.Helper()
		cur := &workv1alpha1.ResourceBinding{}
		if err := c.Get(ctx, req.NamespacedName, cur); err != nil {
			t.Fatal(err)
		}
		for i := range cur.Status.Clusters {
			if cur.Status.Clusters[i].Cluster == cluster {
				cur.Status.Clusters[i].Health = hl
			}
		}
		if err := c.Status().Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if _, err := h.reconcile(ctx, &workv1alpha1.ResourceBinding{}, req); err != nil {
			t.Fatal(err)
		}
	}
	records := func() []string {
		var out []string
		for _, r := range store.recs {
			out = append(out, fmt.Sprintf("%s r%d->%d %s %s %s", r.Cluster, r.FromRevision, r.ToRevision, r.Cause, r.Outcome, strings.Join(r.Images, ",")))
		}
		slices.Sort(out)
		return out
	}

	work("east", "web:1", 2, "a", true)
	work("west", "web:1", 2, "a", true)
	health("east", workv1alpha1.HealthHealthy)
	want := []string{"east r0->1 placement healthy web:1", "west r0->1 placement healthy web:1"}
	if got := records(); !slices.Equal(got, want) {
		t.Fatalf("first placement: records %v, want %v", got, want)
	}

	// The template changes (generation 3: a scale made 2 in between): east's new render is
	// written but not applied yet, nothing happened.
	cur := &workv1alpha1.ResourceBinding{}
	if err := c.Get(ctx, req.NamespacedName, cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.TemplateGeneration = 3
	if err := c.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	work("east", "web:2", 2, "a", false)
	health("east", workv1alpha1.HealthHealthy)
	if got := records(); !slices.Equal(got, want) {
		t.Fatalf("before the apply: records %v, want %v", got, want)
	}
	work("east", "web:2", 2, "a", true)
	health("east", workv1alpha1.HealthProgressing)
	health("east", workv1alpha1.HealthHealthy)
	want = append(want, "east r1->3 apply applied web:2", "east r1->3 apply healthy web:2")
	slices.Sort(want)
	if got := records(); !slices.Equal(got, want) {
		t.Fatalf("after the change: records %v, want %v", got, want)
	}

	// West's share of replicas moves: no change of what runs there.
	work("west", "web:1", 3, "a", true)
	health("west", workv1alpha1.HealthHealthy)
	if got := records(); !slices.Equal(got, want) {
		t.Fatalf("after a replica move: records %v, want %v", got, want)
	}

	// An override changes west's env only; the binding's generation stays: still one record.
	work("west", "web:1", 3, "b", true)
	health("west", workv1alpha1.HealthHealthy)
	want = append(want, "west r1->3 apply healthy web:1")
	slices.Sort(want)
	if got := records(); !slices.Equal(got, want) {
		t.Fatalf("after an override change: records %v, want %v", got, want)
	}
}

func TestUntrackedDetailSaysWhatChanged(t *testing.T) {
	if got := untrackedDetail(1, 3); !strings.HasPrefix(got, "generation 3 of the template applied as it is") {
		t.Errorf("template change: %q", got)
	}
	if got := untrackedDetail(3, 3); !strings.HasPrefix(got, "an override changed what generation 3 of the template renders") {
		t.Errorf("override change: %q", got)
	}
}
