package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/install"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/testenv"
)

// A bare kube-apiserver and etcd that `flotilla up` never configured: `flotilla install` puts
// Flotilla in, and the controller-manager runs as nothing but the installed ServiceAccount, so
// a missing rule breaks delivery here and an excess one shows in its rights. Two members are
// joined from their admin kubeconfigs; a Deployment is divided between them, released in
// waves, and moves to one member when the other dies.
func TestInstallOnABareControlPlane(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	dir := t.TempDir()
	env, _ := testenv.StartBare(t, nil)
	admin, err := env.AddUser(envtest.User{Name: "platform-admin", Groups: []string{"system:masters"}}, nil)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	adminKubeconfig := filepath.Join(dir, "admin.kubeconfig")
	data, err := admin.KubeConfig()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(os.WriteFile(adminKubeconfig, data, 0o600)).To(gomega.Succeed())
	managerKubeconfig := filepath.Join(dir, "manager.kubeconfig")

	out, err := flotilla("install", "--layout", "dedicated", "--kubeconfig", adminKubeconfig, "--manager-kubeconfig", managerKubeconfig, "--manager-token-ttl", "2h")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("clusterrole.rbac.authorization.k8s.io/flotilla:controller-manager created"))
	out, err = flotilla("install", "--layout", "dedicated", "--kubeconfig", adminKubeconfig)
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.MatchRegexp(`0 created, 0 configured, \d+ unchanged`), "a second install changes nothing")

	// The manager's rights, as it sees them: no wildcard anywhere.
	canI, err := exec.Command(filepath.Join(binDir, "kubectl"), "--kubeconfig", managerKubeconfig, "auth", "can-i", "--list").CombinedOutput()
	g.Expect(err).NotTo(gomega.HaveOccurred(), string(canI))
	for _, line := range strings.Split(string(canI), "\n")[1:] {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "[/") {
			continue // non-resource URLs (discovery, /healthz) every user may read
		}
		g.Expect(line).NotTo(gomega.ContainSubstring("*"), "the manager's rights have no wildcard: %s", line)
	}
	g.Expect(string(canI)).To(gomega.ContainSubstring("resourcebindings.work.flotilla.dev"))

	cp2 := clientFor(t, managerKubeconfig)
	review := &authenticationv1.SelfSubjectReview{}
	g.Expect(cp2.Create(ctx, review)).To(gomega.Succeed())
	g.Expect(review.Status.UserInfo.Username).To(gomega.Equal("system:serviceaccount:" + install.Namespace + ":" + install.ManagerServiceAccount))

	manager := startInstalledManager(t, g, dir, managerKubeconfig)

	adminCP := clientFor(t, adminKubeconfig)
	for _, member := range []string{"east", "west"} {
		out, err := flotilla("join", member, "--kubeconfig", adminKubeconfig, "--member-kubeconfig", fleet.Kubeconfig(member), "--label", "installed=yes")
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	}
	g.Eventually(func() string {
		out, _ := flotilla("get", "clusters", "--kubeconfig", adminKubeconfig)
		return out
	}).WithTimeout(2*time.Minute).Should(gomega.MatchRegexp(`(?m)^east\s+.*True[\s\S]*^west\s+.*True`), "both members Ready (manager log: %s)", manager)
	for _, member := range []string{"east", "west"} {
		secret := &corev1.Secret{}
		g.Expect(adminCP.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: "cluster-" + member + "-credentials"}, secret)).To(gomega.Succeed())
		admin, err := os.ReadFile(fleet.Kubeconfig(member))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		adminCfg, err := clientcmd.Load(admin)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		for _, a := range adminCfg.AuthInfos {
			if len(a.ClientKeyData) > 0 {
				g.Expect(string(secret.Data["kubeconfig"])).NotTo(gomega.ContainSubstring(string(a.ClientKeyData)), "the admin key of %s is not in the control plane", member)
			}
		}
		stored, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["kubeconfig"])
		g.Expect(err).NotTo(gomega.HaveOccurred())
		who, err := kubernetes.NewForConfigOrDie(stored).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(who.Status.UserInfo.Username).To(gomega.Equal("system:serviceaccount:flotilla-system:flotilla-agent"), "the stored credentials of %s are the agent's", member)
	}

	ns := "installed"
	ensureNamespace(t, adminCP, ns)
	web := webDeployment(ns, 4)
	policy := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaScheduling{
				Type: policyv1alpha1.ReplicaSchedulingDivided, DivisionPreference: policyv1alpha1.DivisionWeighted,
				WeightPreference: &policyv1alpha1.WeightPreference{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
					{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east"}}, Weight: 1},
					{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"west"}}, Weight: 1},
				}},
			}},
			Rollout: &policyv1alpha1.RolloutStrategy{Waves: []policyv1alpha1.Wave{
				{Name: "first", ClusterNames: []string{"east"}, Gates: policyv1alpha1.Gates{BakeTime: policyv1alpha1.DurationOf(2 * time.Second)}},
			}},
		},
	}
	createAllIn(t, g, adminCP, policy, web)
	g.Eventually(func() []int32 {
		return []int32{memberAvailable(t, "east", ns, "web"), memberAvailable(t, "west", ns, "web")}
	}).WithTimeout(2*time.Minute).Should(gomega.Equal([]int32{2, 2}), "divided between east and west (manager log: %s)", manager)

	// A release in waves: east first, then west.
	g.Eventually(func() error {
		cur := &appsv1.Deployment{}
		if err := adminCP.Get(ctx, client.ObjectKeyFromObject(web), cur); err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = "registry.example/web:2"
		return adminCP.Update(ctx, cur)
	}).Should(gomega.Succeed())
	g.Eventually(func() rolloutv1alpha1.ReleasePhase {
		rel := &rolloutv1alpha1.Release{}
		if adminCP.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-deployment-r2"}, rel) != nil {
			return ""
		}
		return rel.Status.Phase
	}).WithTimeout(2*time.Minute).Should(gomega.Equal(rolloutv1alpha1.ReleaseSucceeded), "manager log: %s", manager)
	g.Expect(memberImage(t, "east", ns, "web")).To(gomega.Equal("registry.example/web:2"))
	g.Expect(memberImage(t, "west", ns, "web")).To(gomega.Equal("registry.example/web:2"))

	// Failover: west dies, its replicas run on east.
	t.Cleanup(func() { _ = fleet.StartMember(context.Background(), "west") })
	g.Expect(fleet.StopComponent("west-apiserver")).To(gomega.Succeed())
	g.Eventually(func() int32 { return memberAvailable(t, "east", ns, "web") }).
		WithTimeout(probePeriod*failureThreshold+probeTimeout+failoverGrace+30*time.Second).Should(gomega.Equal(int32(4)), "manager log: %s", manager)
	g.Expect(fleet.StartMember(ctx, "west")).To(gomega.Succeed())

	g.Expect(refusedAsTheManager(t, manager)).To(gomega.BeEmpty(), "the installed roles lack a rule")

	// Unjoined with their objects, the members keep nothing of this control plane: not the
	// workload, not the agent identity join made.
	g.Eventually(func() int32 { return memberAvailable(t, "west", ns, "web") }).WithTimeout(2*time.Minute).Should(gomega.BeNumerically(">", 0), "west is back")
	for _, member := range []string{"east", "west"} {
		out, err := flotilla("unjoin", member, "--kubeconfig", adminKubeconfig, "--objects", "Delete", "--wait", "2m")
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
		g.Eventually(func() bool {
			return apierrors.IsNotFound(memberClient(t, member).Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{}))
		}).Should(gomega.BeTrue(), "web is deleted from %s", member)
		g.Eventually(func() bool {
			return apierrors.IsNotFound(memberClient(t, member).Get(ctx, client.ObjectKey{Namespace: "flotilla-system", Name: "flotilla-agent"}, &corev1.ServiceAccount{}))
		}).Should(gomega.BeTrue(), "the agent identity is gone from %s", member)
	}

	// Nothing the manager did in the control plane was refused for want of a right. (The
	// members' refusals are not the roles': an unjoined member's informers are refused once its
	// agent binding is gone.)
	g.Expect(refusedAsTheManager(t, manager)).To(gomega.BeEmpty(), "the installed roles lack a rule")
}

// refusedAsTheManager are the log lines where the control plane refused the manager's
// ServiceAccount.
func refusedAsTheManager(t *testing.T, logFile string) []string {
	t.Helper()
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "forbidden") && strings.Contains(line, "system:serviceaccount:"+install.Namespace+":"+install.ManagerServiceAccount) {
			refused = append(refused, line)
		}
	}
	return refused
}

// startInstalledManager runs flotilla-controller-manager as the installed ServiceAccount
// until the test ends, and returns its log file.
func startInstalledManager(t *testing.T, g gomega.Gomega, dir, kubeconfig string) string {
	t.Helper()
	bin := filepath.Join(dir, "flotilla-controller-manager")
	build := exec.Command("go", "build", "-o", bin, "github.com/flotilla-dev/flotilla/cmd/flotilla-controller-manager")
	build.Stderr = os.Stderr
	g.Expect(build.Run()).To(gomega.Succeed())
	logFile := filepath.Join(dir, "manager.log")
	f, err := os.Create(logFile)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--leader-elect",
		"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0",
		"--history-dsn=sqlite://"+filepath.Join(dir, "history.db"), "--git-cache-dir="+filepath.Join(dir, "git"),
		"--probe-period="+probePeriod.String(), "--probe-timeout="+probeTimeout.String(),
		fmt.Sprintf("--failure-threshold=%d", failureThreshold), "--failover-grace-period="+failoverGrace.String())
	cmd.Stdout, cmd.Stderr = f, f
	g.Expect(cmd.Start()).To(gomega.Succeed())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = f.Close()
		if t.Failed() {
			if data, err := os.ReadFile(logFile); err == nil {
				t.Logf("installed manager's log (last 4 KiB):\n%s", tail(data, 4096))
			}
		}
	})
	return logFile
}

func tail(data []byte, n int) []byte {
	if len(data) > n {
		return data[len(data)-n:]
	}
	return data
}

func clientFor(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: kube.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The hosted layout on a cluster whose pods run (kwok's): install waits until the manager's
// Deployment is available, under the namespace's restricted Pod Security; uninstall takes the
// manager out and keeps the CRDs, and purge takes those too.
func TestInstallHostedWaitsForTheManager(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	member := "west"
	// The member is left as it was: no Flotilla CRDs in the other tests' discovery.
	t.Cleanup(func() { _, _ = flotilla("uninstall", "--purge", "--kubeconfig", fleet.Kubeconfig(member)) })
	out, err := flotilla("install", "--kubeconfig", fleet.Kubeconfig(member), "--image", "registry.example/flotilla-controller-manager:test", "--wait", "2m")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("waiting for deployment flotilla-controller-manager"))
	g.Expect(out).To(gomega.ContainSubstring("deployment flotilla-controller-manager available after"))
	g.Expect(out).To(gomega.MatchRegexp(`Flotilla .* installed \(hosted layout\)`))
	c := memberClient(t, member)
	d := &appsv1.Deployment{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: install.ManagerDeployment}, d)).To(gomega.Succeed())
	g.Expect(d.Status.AvailableReplicas).To(gomega.Equal(int32(2)))
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(gomega.Equal("registry.example/flotilla-controller-manager:test"))

	out, err = flotilla("uninstall", "--kubeconfig", fleet.Kubeconfig(member))
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(out).To(gomega.ContainSubstring("deployment.apps/flotilla-controller-manager -n flotilla-system deleted"))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(d), &appsv1.Deployment{}))
	}).Should(gomega.BeTrue())
	crds, err := kubernetes.NewForConfigOrDie(restConfigOf(t, member)).Discovery().ServerResourcesForGroupVersion("cluster.flotilla.dev/v1alpha1")
	g.Expect(err).NotTo(gomega.HaveOccurred(), "uninstall keeps the CRDs")
	g.Expect(crds.APIResources).NotTo(gomega.BeEmpty())
}

func restConfigOf(t *testing.T, name string) *rest.Config {
	t.Helper()
	cfg, err := fleet.RESTConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
