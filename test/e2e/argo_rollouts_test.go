package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// The real Argo Rollouts controller and kubectl plugin, pinned in hack/interop/argo-rollouts and
// built into bin/ by `make tools` with their CRDs beside them.
const (
	argoController = "rollouts-controller"
	argoPlugin     = "kubectl-argo-rollouts"
	argoCRDs       = "argo-rollouts-crds"
	// rolloutHashLabel is the label Argo Rollouts puts on a ReplicaSet, its selector and its pod
	// template: the one label that tells stable from canary pods in the members.
	rolloutHashLabel = "rollouts-pod-template-hash"
)

var (
	rolloutGVK     = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout"}
	analysisRunGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "AnalysisRun"}
)

// argoTool is the path of a tool `make tools` builds; without it the scenario cannot run, which
// is a failure, not a skip (`make test` and `make e2e` build it first).
func argoTool(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(binDir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no %s in %s: run `make tools` (it builds hack/interop/argo-rollouts)", name, binDir)
	}
	return path
}

// installArgoRolloutsCRDs installs the pinned release's CRDs in the control plane only (the
// members run ReplicaSets and Jobs, never Rollouts) and removes them when the test ends.
func installArgoRolloutsCRDs(t *testing.T, g gomega.Gomega) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(argoTool(t, argoCRDs), "*.yaml"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(files).NotTo(gomega.BeEmpty(), "Argo Rollouts CRDs in bin/%s", argoCRDs)
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		crds, err := localfleet.DecodeCRDs(data)
		g.Expect(err).NotTo(gomega.HaveOccurred(), f)
		for _, crd := range crds {
			g.Expect(cp.Create(context.Background(), crd)).To(gomega.Succeed(), "installing CRD %s", crd.Name)
			t.Cleanup(func() { _ = cp.Delete(context.Background(), crd) })
			names = append(names, crd.Name)
		}
	}
	for _, name := range names {
		g.Eventually(func() bool {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if cp.Get(context.Background(), client.ObjectKey{Name: name}, crd) != nil {
				return false
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true
				}
			}
			return false
		}).Should(gomega.BeTrue(), "CRD %s established", name)
	}
}

// loopbackPort is a port free on 127.0.0.1 now.
func loopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// listeningOn lists the local addresses (as /proc/net/tcp{,6} spell them: 0100007F is
// 127.0.0.1, 00000000 is every interface) of the sockets listening on a TCP port.
func listeningOn(port int) []string {
	var out []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			addr, p, _ := strings.Cut(fields[1], ":")
			if n, err := strconv.ParseInt(p, 16, 32); err == nil && int(n) == port {
				out = append(out, addr)
			}
		}
	}
	return out
}

// startArgoRollouts runs the controller against the control plane, watching one namespace,
// without leader election, its metrics and healthz on free loopback ports; its log goes beside
// the fleet's (FLOTILLA_E2E_KEEP_LOGS keeps it). It stops when the test ends.
func startArgoRollouts(t *testing.T, g gomega.Gomega, ns string) {
	t.Helper()
	bin := argoTool(t, argoController)
	metrics, healthz := loopbackPort(t), loopbackPort(t)
	logFile, err := os.Create(filepath.Join(fleet.StateDir(), "logs", "argo-rollouts-controller.log"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	cmd := exec.Command(bin, "--kubeconfig", fleet.Kubeconfig(""), "--namespaced", "--namespace", ns,
		"--leader-elect=false", fmt.Sprintf("--metricsPort=%d", metrics), fmt.Sprintf("--healthzPort=%d", healthz))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	g.Expect(cmd.Start()).To(gomega.Succeed())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = logFile.Close()
	})
	g.Eventually(func() int {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("%s exited: %v; see %s", argoController, err, logFile.Name())
		default:
		}
		_, code := get(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz))
		return code
	}).Should(gomega.Equal(200), "the controller's healthz")
	for _, port := range []int{metrics, healthz} {
		g.Expect(listeningOn(port)).To(gomega.Equal([]string{"0100007F"}), "port %d is served on 127.0.0.1 only", port)
	}
}

// argoRollouts runs the kubectl plugin against the control plane.
func argoRollouts(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(argoTool(t, argoPlugin), append(args, "--kubeconfig", fleet.Kubeconfig(""))...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// exampleObjects reads a multi-document YAML file of examples/.
func exampleObjects(t *testing.T, path string) []client.Object {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "examples", path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []client.Object
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// rolloutState reads what kubectl-argo-rollouts shows first: the phase, the step index, the
// stable and the current pod-template hash.
type rolloutState struct {
	Phase, Stable, Current string
	Step                   int64
	Aborted                bool
}

func (s rolloutState) String() string { return fmt.Sprintf("%s at step %d", s.Phase, s.Step) }

func getRollout(ns, name string) rolloutState {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(rolloutGVK)
	if err := cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return rolloutState{Phase: err.Error()}
	}
	var s rolloutState
	s.Phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
	s.Stable, _, _ = unstructured.NestedString(u.Object, "status", "stableRS")
	s.Current, _, _ = unstructured.NestedString(u.Object, "status", "currentPodHash")
	s.Step, _, _ = unstructured.NestedInt64(u.Object, "status", "currentStepIndex")
	s.Aborted, _, _ = unstructured.NestedBool(u.Object, "status", "abort")
	return s
}

// memberSplit is a member's Rollout ReplicaSets as "new DESIRED/AVAILABLE, old DESIRED/AVAILABLE",
// a ReplicaSet the member does not have counting 0/0.
func memberSplit(t *testing.T, cluster, ns, newHash, oldHash string) string {
	list := &appsv1.ReplicaSetList{}
	if err := memberClient(t, cluster).List(context.Background(), list, client.InNamespace(ns), client.HasLabels{rolloutHashLabel}); err != nil {
		return err.Error()
	}
	counts := map[string][2]int32{}
	for _, rs := range list.Items {
		if rs.DeletionTimestamp.IsZero() {
			counts[rs.Labels[rolloutHashLabel]] = [2]int32{ptr.Deref(rs.Spec.Replicas, 1), rs.Status.AvailableReplicas}
		}
	}
	n, o := counts[newHash], counts[oldHash]
	return fmt.Sprintf("new %d/%d, old %d/%d", n[0], n[1], o[0], o[1])
}

// podRoles counts a member's running pods of one ReplicaSet hash by their role label (the
// Rollout's canaryMetadata/stableMetadata), "-" for none.
func podRoles(t *testing.T, cluster, ns, hash string) map[string]int {
	pods := &corev1.PodList{}
	if err := memberClient(t, cluster).List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{rolloutHashLabel: hash}); err != nil {
		return map[string]int{err.Error(): 1}
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		role := p.Labels["role"]
		if role == "" {
			role = "-"
		}
		out[role]++
	}
	return out
}

// servicePods says which ReplicaSet a member Service selects (its rollouts-pod-template-hash,
// "any" when it selects none in particular) and how many of the member's pods it selects.
func servicePods(t *testing.T, cluster, ns, name string) string {
	c := memberClient(t, cluster)
	svc := &corev1.Service{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		return err.Error()
	}
	pods := &corev1.PodList{}
	if err := c.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels(svc.Spec.Selector)); err != nil {
		return err.Error()
	}
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() {
			n++
		}
	}
	hash := svc.Spec.Selector[rolloutHashLabel]
	if hash == "" {
		hash = "any"
	}
	return fmt.Sprintf("%s: %d pods", hash, n)
}

// memberTemplateRole is the role label of a member ReplicaSet's pod template.
func memberTemplateRole(t *testing.T, cluster, ns, name string) string {
	rs := &appsv1.ReplicaSet{}
	if err := memberClient(t, cluster).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, rs); err != nil {
		return err.Error()
	}
	return rs.Spec.Template.Labels["role"]
}

// stepAnalysisRuns names the AnalysisRuns of a revision's analysis steps.
func stepAnalysisRuns(ns, hash string) []string {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(analysisRunGVK.GroupVersion().WithKind("AnalysisRunList"))
	if err := cp.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{rolloutHashLabel: hash, "rollout-type": "Step"}); err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, ar := range list.Items {
		out = append(out, ar.GetName())
	}
	return out
}

// analysisJobs says, per member, how many Jobs of an AnalysisRun succeeded there.
func analysisJobs(t *testing.T, ns, run string) map[string]int32 {
	ar := &unstructured.Unstructured{}
	ar.SetGroupVersionKind(analysisRunGVK)
	if err := cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: run}, ar); err != nil {
		return nil
	}
	out := map[string]int32{}
	for _, cluster := range fleet.Fleet().Names() {
		jobs := &batchv1.JobList{}
		_ = memberClient(t, cluster).List(context.Background(), jobs, client.InNamespace(ns),
			client.MatchingLabels{"analysisrun.argoproj.io/uid": string(ar.GetUID())})
		for _, j := range jobs.Items {
			out[cluster] += j.Status.Succeeded
		}
	}
	return out
}

func analysisRunPhase(ns, run string) string {
	ar := &unstructured.Unstructured{}
	ar.SetGroupVersionKind(analysisRunGVK)
	if err := cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: run}, ar); err != nil {
		return err.Error()
	}
	phase, _, _ := unstructured.NestedString(ar.Object, "status", "phase")
	return phase
}

// controlPlaneRS is a control-plane ReplicaSet's aggregated status as
// "replicas READY/AVAILABLE of DESIRED".
func controlPlaneRS(ns, name string) string {
	rs := &appsv1.ReplicaSet{}
	if err := cp.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, rs); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("replicas %d, ready %d, available %d of %d", rs.Status.Replicas, rs.Status.ReadyReplicas, rs.Status.AvailableReplicas, ptr.Deref(rs.Spec.Replicas, 1))
}

// replicaCounts picks the Replicas block of `kubectl argo rollouts get rollout`.
func replicaCounts(out string) string {
	var parts []string
	for _, key := range []string{"Desired", "Current", "Updated", "Ready", "Available"} {
		m := regexp.MustCompile(`(?m)^\s+` + key + `:\s+(\d+)`).FindStringSubmatch(out)
		if m == nil {
			parts = append(parts, key+" ?")
			continue
		}
		parts = append(parts, key+" "+m[1])
	}
	return strings.Join(parts, ", ")
}

// Given the unmodified Argo Rollouts controller running against the control plane, and the
// docs/releases.md's example (examples/argo-rollouts): a Rollout of 10 replicas whose workloadRef names a
// base Deployment no policy places, a policy dividing the Rollout's ReplicaSets 1:1 over east
// and west and keeping them (and their Services) together, and a policy sending analysis Jobs
// to both; when the Deployment's image changes, then each cluster runs 1 new + 4 stable pods at
// 20% and the smoke analysis Job runs in both and passes; `kubectl argo rollouts promote` gives
// 3 + 2 at 60%, and again 5 + 0; a later change aborted at 20% returns both clusters to 5
// stable pods; `kubectl argo rollouts get rollout` counts the fleet's replicas at every step,
// and the stable and canary Services select the right pods in the members throughout.
func TestArgoRolloutsControllerDrivesTheFleet(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	ns := "storefront" // the example's namespace
	installArgoRolloutsCRDs(t, g)
	createAll(t, g, exampleObjects(t, "argo-rollouts/policies.yaml")...)
	startArgoRollouts(t, g, ns)
	createAll(t, g, exampleObjects(t, "argo-rollouts/rollout.yaml")...)
	members := []string{"east", "west"}
	split := func(newHash, oldHash string) func() []string {
		return func() []string {
			var out []string
			for _, cluster := range []string{"east", "west", "europe"} {
				out = append(out, memberSplit(t, cluster, ns, newHash, oldHash))
			}
			return out
		}
	}
	// services: what web, web-stable and web-canary select in a member.
	services := func(cluster string) func() []string {
		return func() []string {
			return []string{servicePods(t, cluster, ns, "web"), servicePods(t, cluster, ns, "web-stable"), servicePods(t, cluster, ns, "web-canary")}
		}
	}
	get := func() string {
		out, err := argoRollouts(t, "get", "rollout", "web", "-n", ns)
		if err != nil {
			return out + err.Error()
		}
		return replicaCounts(out)
	}
	state := func() string { return getRollout(ns, "web").String() }
	promote := func() {
		t.Helper()
		out, err := argoRollouts(t, "promote", "web", "-n", ns)
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	}
	setImage := func(image string) {
		t.Helper()
		g.Eventually(func() error {
			d := &appsv1.Deployment{}
			if err := cp.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d); err != nil {
				return err
			}
			d.Spec.Template.Spec.Containers[0].Image = image
			return cp.Update(ctx, d)
		}).Should(gomega.Succeed())
	}
	// newRevision waits for the canary of a change and returns its hash.
	newRevision := func(stable string) string {
		t.Helper()
		var current string
		g.Eventually(func() string { current = getRollout(ns, "web").Current; return current }).ShouldNot(gomega.Or(gomega.BeEmpty(), gomega.Equal(stable)))
		return current
	}

	// The first revision is stable at once: 5 + 5, nothing in europe.
	var stable string
	g.Eventually(func() string { s := getRollout(ns, "web"); stable = s.Stable; return s.Phase }).WithTimeout(2 * time.Minute).Should(gomega.Equal("Healthy"))
	g.Eventually(split(stable, "")).Should(gomega.Equal([]string{"new 5/5, old 0/0", "new 5/5, old 0/0", "new 0/0, old 0/0"}))
	g.Eventually(get).Should(gomega.Equal("Desired 10, Current 10, Updated 10, Ready 10, Available 10"))
	g.Expect(controlPlaneRS(ns, "web-"+stable)).To(gomega.Equal("replicas 10, ready 10, available 10 of 10"), "the control plane's ReplicaSet reports the fleet's pods")
	g.Expect(bindingOf(ctx, ns, "web-deployment")).To(gomega.BeNil(), "no policy selects the base Deployment")
	g.Expect(bindingOf(ctx, ns, "web-"+stable+"-replicaset").Spec.Group).To(gomega.Equal("app=web"))
	for _, cluster := range fleet.Fleet().Names() {
		base := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
		g.Expect(existsIn(t, cluster, base)).To(gomega.BeFalse(), "the base Deployment is not placed in %s", cluster)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-stable"}}
		g.Eventually(func() bool { return existsIn(t, cluster, svc) }).Should(gomega.Equal(cluster != "europe"), "the Services follow the ReplicaSets' group to %s", cluster)
	}
	for _, cluster := range members {
		g.Eventually(services(cluster)).Should(gomega.Equal([]string{"any: 5 pods", stable + ": 5 pods", stable + ": 5 pods"}), cluster)
		g.Expect(podRoles(t, cluster, ns, stable)).To(gomega.Equal(map[string]int{"stable": 5}), "stableMetadata reaches the new pods in %s", cluster)
	}

	// A new image in the base Deployment: 20% is 2 of 10, 1 + 4 in each cluster, the smoke
	// analysis runs as a Job in both clusters and passes, and the Rollout pauses.
	setImage("registry.example/web:2")
	canary := newRevision(stable)
	g.Eventually(state).WithTimeout(2 * time.Minute).Should(gomega.Equal("Paused at step 2"))
	g.Eventually(split(canary, stable)).Should(gomega.Equal([]string{"new 1/1, old 4/4", "new 1/1, old 4/4", "new 0/0, old 0/0"}))
	g.Expect(bindingOf(ctx, ns, "web-"+canary+"-replicaset").Spec.Group).To(gomega.Equal("app=web"), "the canary's ReplicaSet is in the stable one's group")
	g.Eventually(func() string { return controlPlaneRS(ns, "web-"+canary) }).Should(gomega.Equal("replicas 2, ready 2, available 2 of 2"))
	g.Eventually(func() string { return controlPlaneRS(ns, "web-"+stable) }).Should(gomega.Equal("replicas 8, ready 8, available 8 of 8"))
	runs := stepAnalysisRuns(ns, canary)
	g.Expect(runs).To(gomega.HaveLen(1), "the analysis step's run")
	g.Expect(analysisRunPhase(ns, runs[0])).To(gomega.Equal("Successful"))
	g.Expect(analysisJobs(t, ns, runs[0])).To(gomega.Equal(map[string]int32{"east": 1, "west": 1}), "the smoke Job ran once in each of the Rollout's clusters")
	g.Eventually(get).Should(gomega.Equal("Desired 10, Current 10, Updated 2, Ready 10, Available 10"))
	for _, cluster := range members {
		g.Eventually(services(cluster)).Should(gomega.Equal([]string{"any: 5 pods", stable + ": 4 pods", canary + ": 1 pods"}), cluster)
		g.Expect(podRoles(t, cluster, ns, canary)).To(gomega.Equal(map[string]int{"canary": 1}), "canaryMetadata reaches the new pod in %s", cluster)
		g.Expect(podRoles(t, cluster, ns, stable)).To(gomega.Equal(map[string]int{"stable": 4}), cluster)
	}

	// promote: 60%, 3 + 2 in each cluster.
	promote()
	g.Eventually(state).Should(gomega.Equal("Paused at step 4"))
	g.Eventually(split(canary, stable)).Should(gomega.Equal([]string{"new 3/3, old 2/2", "new 3/3, old 2/2", "new 0/0, old 0/0"}))
	g.Eventually(get).Should(gomega.Equal("Desired 10, Current 10, Updated 6, Ready 10, Available 10"))

	// promote again: the new revision is stable, 5 + 0 in each cluster, and web-stable selects
	// its pods.
	promote()
	g.Eventually(func() string { s := getRollout(ns, "web"); return s.Phase + " " + s.Stable }).Should(gomega.Equal("Healthy " + canary))
	g.Eventually(split(canary, stable)).Should(gomega.Equal([]string{"new 5/5, old 0/0", "new 5/5, old 0/0", "new 0/0, old 0/0"}))
	g.Eventually(get).Should(gomega.Equal("Desired 10, Current 10, Updated 10, Ready 10, Available 10"))
	for _, cluster := range members {
		g.Eventually(services(cluster)).Should(gomega.Equal([]string{"any: 5 pods", canary + ": 5 pods", canary + ": 5 pods"}), cluster)
		// The limitation docs/releases.md states: Argo Rollouts now writes stableMetadata into the
		// ReplicaSet's template and relabels the ReplicaSet's pods where it looks for them, on
		// the control plane, which has none. The members' ReplicaSets get the new template, but
		// a pod keeps the labels it was created with: all five still say canary.
		g.Eventually(func() string { return memberTemplateRole(t, cluster, ns, "web-"+canary) }).Should(gomega.Equal("stable"), cluster)
		g.Expect(podRoles(t, cluster, ns, canary)).To(gomega.Equal(map[string]int{"canary": 5}), "pods are not relabelled in %s", cluster)
	}
	stable = canary

	// A next change, aborted at 20%: both clusters go back to 5 stable pods and no canary.
	setImage("registry.example/web:3")
	canary = newRevision(stable)
	g.Eventually(state).WithTimeout(2 * time.Minute).Should(gomega.Equal("Paused at step 2"))
	g.Eventually(split(canary, stable)).Should(gomega.Equal([]string{"new 1/1, old 4/4", "new 1/1, old 4/4", "new 0/0, old 0/0"}))
	out, err := argoRollouts(t, "abort", "web", "-n", ns)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Eventually(func() bool { return getRollout(ns, "web").Aborted }).Should(gomega.BeTrue())
	g.Eventually(split(canary, stable)).Should(gomega.Equal([]string{"new 0/0, old 5/5", "new 0/0, old 5/5", "new 0/0, old 0/0"}))
	g.Eventually(func() string { return getRollout(ns, "web").Phase }).Should(gomega.Equal("Degraded"), "an aborted Rollout is Degraded until its template changes")
	g.Eventually(get).Should(gomega.Equal("Desired 10, Current 10, Updated 0, Ready 10, Available 10"))
	g.Eventually(func() string { return controlPlaneRS(ns, "web-"+stable) }).Should(gomega.Equal("replicas 10, ready 10, available 10 of 10"))
	for _, cluster := range members {
		// Without a traffic router, an abort points web-canary back at the stable pods.
		g.Eventually(services(cluster)).Should(gomega.Equal([]string{"any: 5 pods", stable + ": 5 pods", stable + ": 5 pods"}), cluster)
		// The pod that replaced the one the canary step scaled away has the stable role; the
		// other four keep the canary role they were created with.
		g.Expect(podRoles(t, cluster, ns, stable)).To(gomega.Equal(map[string]int{"canary": 4, "stable": 1}), cluster)
	}
}
