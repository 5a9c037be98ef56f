package e2e

import (
	"context"
	"net"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/registration"
)

// hangingServer accepts TCP connections and never answers, like a member whose apiserver is
// wedged or whose network drops packets.
func hangingServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "https://" + l.Addr().String()
}

// A member that accepts connections but never answers turns NotReady through the probe
// timeout, and meanwhile the other members go on being probed at their own pace.
func TestHangingMemberDelaysNoOtherMember(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	endpoint := hangingServer(t)
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: hang, cluster: {server: "` + endpoint + `", insecure-skip-tls-verify: true}}]
users: [{name: hang, user: {token: not-checked}}]
contexts: [{name: hang, context: {cluster: hang, user: hang}}]
current-context: hang
`
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: kube.SystemNamespace, Name: registration.SecretName("hang"),
			Labels: map[string]string{registration.ClusterNameLabel: "hang"}},
		Data: map[string][]byte{clusterv1alpha1.CredentialsSecretKey: []byte(kubeconfig)},
	}
	// Written directly: join would rightly refuse a member that does not answer.
	g.Expect(cp.Create(ctx, secret)).To(gomega.Succeed())
	cluster := &clusterv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "hang"},
		Spec: clusterv1alpha1.ClusterSpec{
			Endpoint:             endpoint,
			CredentialsSecretRef: clusterv1alpha1.SecretReference{Namespace: secret.Namespace, Name: secret.Name},
			SyncMode:             clusterv1alpha1.SyncModePush,
		},
	}
	g.Expect(cp.Create(ctx, cluster)).To(gomega.Succeed())
	t.Cleanup(func() {
		_ = cp.Delete(context.Background(), cluster)
		_ = cp.Delete(context.Background(), secret)
	})

	eastBefore := probeCount(t, "east")
	g.Eventually(func() metav1.ConditionStatus { return readyStatus(t, "hang") }).
		WithTimeout(30 * time.Second).Should(gomega.Equal(metav1.ConditionFalse))
	g.Expect(readyCondition(t, "hang").Message).To(gomega.MatchRegexp(`(?i)deadline|timeout`))

	// While the probes of "hang" waited out their timeouts, the other members went on being
	// probed and stayed Ready. (Each member has its own probe goroutine; counting probes, not
	// timing them, keeps this free of wall-clock assertions.)
	g.Eventually(func() int { return probeCount(t, "east") - eastBefore }).Should(gomega.BeNumerically(">=", 2))
	for _, name := range fleet.Fleet().Names() {
		g.Expect(readyStatus(t, name)).To(gomega.Equal(metav1.ConditionTrue), "cluster %s", name)
	}
}

var probeCountRE = regexp.MustCompile(`flotilla_cluster_probe_duration_seconds_count\{cluster="([^"]+)"\} (\d+)`)

func probeCount(t *testing.T, cluster string) int {
	t.Helper()
	body, _ := get(t, "http://"+fleet.ManagerMetricsAddress()+"/metrics")
	for _, m := range probeCountRE.FindAllStringSubmatch(body, -1) {
		if m[1] == cluster {
			n, _ := strconv.Atoi(m[2])
			return n
		}
	}
	return 0
}
