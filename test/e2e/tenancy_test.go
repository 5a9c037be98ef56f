package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// teamNamespace makes namespace ns whose group may edit it through Kubernetes' built-in edit
// role, the way a platform team hands a namespace to a team; it returns a client of a member of
// that group.
func teamNamespace(t *testing.T, ns, user, group string) client.Client {
	t.Helper()
	ensureNamespace(t, cp, ns)
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "team-edit", Namespace: ns},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}},
		RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", APIGroup: rbacv1.GroupName, Name: "edit"},
	}
	if err := cp.Create(context.Background(), rb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return userClient(t, "", user, group)
}

// waitFirstRevision waits until the template's first revision is recorded: a change made
// before that would be recorded as the first revision itself, and no release would follow.
func waitFirstRevision(g gomega.Gomega, ns string) {
	g.Eventually(func() int64 {
		b := &workv1alpha1.ResourceBinding{}
		if err := cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web-deployment"}, b); err != nil || b.Spec.Revisions == nil {
			return 0
		}
		return b.Spec.Revisions.Latest
	}).Should(gomega.BeNumerically(">=", 1))
}

// releaseState describes a namespace's binding revisions and releases, for a failed wait.
func releaseState(ns string) func() string {
	return func() string {
		ctx := context.Background()
		out := ""
		b := &workv1alpha1.ResourceBinding{}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-deployment"}, b); err == nil {
			out += fmt.Sprintf("binding policy %v revisions %+v status gen %d/%d\n", b.Spec.PolicyRef, b.Spec.Revisions, b.Status.ObservedGeneration, b.Generation)
		}
		rels := &rolloutv1alpha1.ReleaseList{}
		_ = cp.List(ctx, rels, client.InNamespace(ns))
		for _, r := range rels.Items {
			out += fmt.Sprintf("release %s rev %d phase %s message %q waves %+v conditions %+v\n", r.Name, r.Spec.Revision, r.Status.Phase, r.Status.Message, r.Status.Waves, r.Status.Conditions)
		}
		d := &appsv1.Deployment{}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d); err == nil {
			out += "template image " + d.Spec.Template.Spec.Containers[0].Image + "\n"
		}
		return out
	}
}

// withoutConflict runs a read-modify-write until it is not refused for a stale read: the
// controllers write the same objects all the time.
func withoutConflict(update func() error) error {
	for {
		if err := update(); !apierrors.IsConflict(err) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func forbidden(g gomega.Gomega, err error, says string) {
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want Forbidden, got %v", err)
	if says != "" {
		g.Expect(err.Error()).To(gomega.ContainSubstring(says))
	}
}

// Given a team whose group has Kubernetes' edit role in its namespace and nothing else, when a
// member of it uses Flotilla, then they place and release their own workloads and steer their
// releases with the switches, but can forge none of Flotilla's derived objects; and neither can
// a cluster admin, since those objects would make Flotilla write into members as itself.
func TestTenantUsesFlotillaButCannotForgeItsObjects(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	alice := teamNamespace(t, "team-a", "alice", "team-a-devs")
	ensureNamespace(t, cp, "team-b")
	g.Expect(cp.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "team-b"}, StringData: map[string]string{"password": "team-b-only"}})).To(gomega.Succeed())

	// Alice places and releases her own workload, with nothing but the built-in edit role.
	web := webDeployment("team-a", 2)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{ManualApproval: true}},
				{Name: "second", ClusterNames: []string{"west"}},
			}},
		},
	}
	g.Expect(alice.Create(ctx, policy)).To(gomega.Succeed())
	g.Expect(alice.Create(ctx, web)).To(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), web); _ = cp.Delete(context.Background(), policy) })
	g.Eventually(func() int32 { return memberReplicas(t, "east", "team-a", "web") }).Should(gomega.Equal(int32(2)))
	waitFirstRevision(g, "team-a")

	g.Eventually(func() error {
		cur := &appsv1.Deployment{}
		if err := alice.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = "registry.example/web:2"
		return alice.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase("team-a", "web-deployment-r2", 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval), releaseState("team-a"))

	// The switches are hers: pause and resume, then promote.
	for _, paused := range []bool{true, false} {
		g.Eventually(func() error {
			rel := &rolloutv1alpha1.Release{}
			if err := alice.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "web-deployment-r2"}, rel); err != nil {
				return err
			}
			rel.Spec.Paused = paused
			return alice.Update(ctx, rel)
		}).Should(gomega.Succeed(), "paused=%v", paused)
	}
	g.Eventually(func() error {
		rel := &rolloutv1alpha1.Release{}
		if err := alice.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "web-deployment-r2"}, rel); err != nil {
			return err
		}
		rel.Spec.PromotedWave = ptr.To[int32](0)
		return alice.Update(ctx, rel)
	}).Should(gomega.Succeed())
	g.Eventually(func() rolloutv1alpha1.ReleasePhase { return releasePhase("team-a", "web-deployment-r2") }).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded))
	g.Eventually(func() string { return memberImage(t, "west", "team-a", "web") }).Should(gomega.Equal("registry.example/web:2"))

	// Changing what a release does, rather than steering it, is refused: to her and to the admin.
	// Bindings take no user writes: RBAC refuses her, admission the admin.
	bindingRefusal := map[client.Client]string{alice: "cannot update resource \"resourcebindings\"", cp: "a binding's spec is Flotilla's alone"}
	for _, c := range []client.Client{alice, cp} {
		forbidden(g, withoutConflict(func() error {
			rel := &rolloutv1alpha1.Release{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "web-deployment-r2"}, rel); err != nil {
				return err
			}
			rel.Spec.Revision = 1
			return c.Update(ctx, rel)
		}), "a release's spec is Flotilla's except paused")
		forbidden(g, withoutConflict(func() error {
			b := &workv1alpha1.ResourceBinding{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "web-deployment"}, b); err != nil {
				return err
			}
			b.Spec.Clusters = append(b.Spec.Clusters, workv1alpha1.TargetCluster{Name: "europe", Replicas: 1})
			return c.Update(ctx, b)
		}), bindingRefusal[c])
	}
	// Nor can the admin forge the scheduler's outcome, which binding status reports as Scheduled.
	forbidden(g, withoutConflict(func() error {
		b := &workv1alpha1.ResourceBinding{}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "web-deployment"}, b); err != nil {
			return err
		}
		b.Annotations[workv1alpha1.ScheduleAnnotation] = `{"placed":false,"reason":"Forged","message":"forged"}`
		return cp.Update(ctx, b)
	}), "a binding's annotations are Flotilla's alone")
	// Suspending is a switch on her template, not on the binding: the detector copies it.
	forbidden(g, withoutConflict(func() error {
		b := &workv1alpha1.ResourceBinding{}
		if err := alice.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "web-deployment"}, b); err != nil {
			return err
		}
		b.Spec.Suspend = &workv1alpha1.Suspension{Dispatching: true}
		return cp.Update(ctx, b)
	}), "switch the template instead")
	g.Eventually(func() error {
		cur := &appsv1.Deployment{}
		if err := alice.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
			return err
		}
		cur.Annotations = workv1alpha1.SetSwitches(cur.Annotations, &workv1alpha1.Suspension{Dispatching: true}, nil)
		return alice.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() *workv1alpha1.Suspension { return bindingNow(ctx, "team-a", "web-deployment").Spec.Suspend }).
		Should(gomega.Equal(&workv1alpha1.Suspension{Dispatching: true}))

	// A hand-written binding that would copy team-b's Secret into a member, a hand-written
	// Release and AnalysisRun, a status, and a revision are refused, even to the admin.
	forged := &workv1alpha1.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "steal", Namespace: "team-a"},
		Spec: workv1alpha1.ResourceBindingSpec{
			Resource:  workv1alpha1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: "team-b", Name: "db"},
			PolicyRef: workv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: "team-a", Name: "web"},
			Clusters:  []workv1alpha1.TargetCluster{{Name: "east"}},
		},
	}
	forbidden(g, alice.Create(ctx, forged.DeepCopy()), "")
	forbidden(g, cp.Create(ctx, forged.DeepCopy()), "resourcebindings are written by Flotilla alone")
	rel := &rolloutv1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: "skip-approval", Namespace: "team-a"},
		Spec: rolloutv1alpha1.ReleaseSpec{
			Binding:  rolloutv1alpha1.BindingReference{Kind: "ResourceBinding", Name: "web-deployment"},
			Resource: rolloutv1alpha1.ResourceReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team-a", Name: "web"},
			Revision: 3, PromoteFull: true,
			Strategy: policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{{Name: "all", Percentage: ptr.To[int32](100)}}},
		},
	}
	forbidden(g, alice.Create(ctx, rel.DeepCopy()), "")
	forbidden(g, cp.Create(ctx, rel.DeepCopy()), "releases are written by Flotilla alone")
	run := &rolloutv1alpha1.AnalysisRun{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: "team-a"},
		Spec: rolloutv1alpha1.AnalysisRunSpec{Metrics: []rolloutv1alpha1.Metric{{Name: "m", Provider: rolloutv1alpha1.MetricProvider{Web: &rolloutv1alpha1.WebMetric{URL: "https://example.com"}}}}}}
	forbidden(g, cp.Create(ctx, run), "analysisruns are written by Flotilla alone; spec.rollout.waves[].gates.analysis")
	forbidden(g, withoutConflict(func() error {
		b := &workv1alpha1.ResourceBinding{}
		if err := cp.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "web-deployment"}, b); err != nil {
			return err
		}
		b.Status.Health = workv1alpha1.HealthHealthy
		b.Status.Clusters = nil
		return cp.Status().Update(ctx, b)
	}), "resourcebindings status are written by Flotilla alone")
	revision := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "web-deployment-r3", Namespace: "team-a"},
		Data: runtime.RawExtension{Raw: []byte(`{}`)}, Revision: 3}
	forbidden(g, cp.Create(ctx, revision), "written by Flotilla alone")

	// Alice cannot place beyond her namespace: no cluster-scoped policies.
	cpp := &policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "alice-everything"},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Secret"}}}}
	forbidden(g, alice.Create(ctx, cpp), "")
}

// Given the local fleet's etcd, which holds every Secret, when anything on the machine connects
// without the fleet's client certificate (plain HTTP, or TLS without a certificate, as an
// analysis aimed at 127.0.0.1 would), then it gets nothing.
func TestEtcdRequiresClientCertificates(t *testing.T) {
	g := newG(t)
	url := fleet.EtcdClientURL()
	plain := &http.Client{Timeout: 3 * time.Second}
	_, err := plain.Get("http" + url[len("https"):] + "/v3/kv/range")
	g.Expect(err).To(gomega.HaveOccurred(), "plain HTTP must not be served")

	// The server is not verified here: only what etcd demands of its clients is under test.
	noCert := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} // #nosec G402
	resp, err := noCert.Post(url+"/v3/kv/range", "application/json", nil)
	if err == nil {
		resp.Body.Close()
	}
	g.Expect(err).To(gomega.HaveOccurred(), "TLS without a client certificate must be refused")

	// A user certificate of the fleet's CA (what `flotilla kubeconfig --user` hands a tenant)
	// is no etcd credential: etcd trusts a CA of its own.
	path, err := fleet.UserKubeconfig("", "mallory", "team-a-devs")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	userCert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	asUser := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{userCert}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} // #nosec G402 -- only the client side is under test
	resp, err = asUser.Post(url+"/v3/kv/range", "application/json", strings.NewReader(`{"key":"AA=="}`))
	if err == nil {
		resp.Body.Close()
	}
	g.Expect(err).To(gomega.HaveOccurred(), "a user's certificate must not open etcd")
}

// Given a platform ClusterPropagationPolicy whose rollout gates a tenant's Deployment, when the
// tenant tries the release switches, then they are refused (only those who may update
// ClusterPropagationPolicies steer the platform's releases) while a cluster admin's promote
// works; and a platform gate naming a namespace's AnalysisTemplate holds the release, since that
// namespace's users could make the platform's gate pass.
func TestTenantCannotPassThePlatformsGates(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	carol := teamNamespace(t, "team-c", "carol", "team-c-devs")
	web := webDeployment("team-c", 1)
	web.Labels["platform-gated"] = "true"
	cpp := &policyv1alpha1.ClusterPropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "platform-gated"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment",
				LabelSelector: &policyv1alpha1.LabelSelector{MatchLabels: map[string]policyv1alpha1.LabelValue{"platform-gated": "true"}}}},
			Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west"}}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{ManualApproval: true}},
				{Name: "second", ClusterNames: []string{"west"}},
			}},
		},
	}
	createAll(t, g, cpp)
	g.Expect(carol.Create(ctx, web)).To(gomega.Succeed())
	t.Cleanup(func() { _ = cp.Delete(context.Background(), web) })
	g.Eventually(func() int32 { return memberReplicas(t, "west", "team-c", "web") }).Should(gomega.Equal(int32(1)))
	waitFirstRevision(g, "team-c")
	g.Eventually(func() error {
		cur := &appsv1.Deployment{}
		if err := carol.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = "registry.example/web:2"
		return carol.Update(ctx, cur)
	}).Should(gomega.Succeed())
	const rel = "web-deployment-r2"
	g.Eventually(func() rolloutv1alpha1.WavePhase { return wavePhase("team-c", rel, 0) }).Should(gomega.Equal(rolloutv1alpha1.WaveWaitingForApproval), releaseState("team-c"))

	promote := func(c client.Client) error {
		r := &rolloutv1alpha1.Release{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "team-c", Name: rel}, r); err != nil {
			return err
		}
		r.Spec.PromoteFull = true
		return c.Update(ctx, r)
	}
	forbidden(g, withoutConflict(func() error { return promote(carol) }), "only those who may update ClusterPropagationPolicies use its switches")
	forbidden(g, withoutConflict(func() error {
		b := &workv1alpha1.ResourceBinding{}
		if err := carol.Get(ctx, client.ObjectKey{Namespace: "team-c", Name: "web-deployment"}, b); err != nil {
			return err
		}
		b.Spec.Suspend = &workv1alpha1.Suspension{Dispatching: true}
		return carol.Update(ctx, b)
	}), "cannot update resource \"resourcebindings\"")
	g.Consistently(func() string { return memberImage(t, "west", "team-c", "web") }).WithTimeout(2 * time.Second).Should(gomega.Equal("registry.example/web:1"))
	g.Eventually(func() error { return promote(cp) }).Should(gomega.Succeed())
	g.Eventually(func() string { return memberImage(t, "west", "team-c", "web") }).Should(gomega.Equal("registry.example/web:2"))

	// A platform gate naming a namespace's AnalysisTemplate holds the next release.
	g.Eventually(func() error {
		cur := &policyv1alpha1.ClusterPropagationPolicy{}
		if err := cp.Get(ctx, client.ObjectKeyFromObject(cpp), cur); err != nil {
			return err
		}
		cur.Spec.Rollout.Waves[0].Gates = policyv1alpha1.Gates{Analysis: &policyv1alpha1.AnalysisGate{Templates: []policyv1alpha1.AnalysisTemplateRef{{TemplateName: "always-passes"}}}}
		return cp.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() error {
		cur := &appsv1.Deployment{}
		if err := carol.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = "registry.example/web:3"
		return carol.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() string {
		if r := getRelease("team-c", "web-deployment-r3"); r != nil {
			return r.Status.Message
		}
		return ""
	}).Should(gomega.ContainSubstring("a ClusterPropagationPolicy's analysis runs ClusterAnalysisTemplates only"))
}
