package demo

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Traffic simulates users calling a Deployment in every member: each tick, every member
// serves requests, and the share that fail depends on the image tag its Deployment runs (a
// tag containing "bad" fails 30%, one containing "worse" 3%, any other 1%). It exposes demo_requests_total{cluster,code}
// for Prometheus to scrape.
type Traffic struct {
	Members   map[string]kubernetes.Interface
	Namespace string
	Name      string
	// RequestsPerTick per member; ticks are every 100ms.
	RequestsPerTick int

	mu     sync.Mutex
	images map[string]string
}

// ErrorRateFor is the simulated error rate of an image.
func ErrorRateFor(image string) float64 {
	tag := image[strings.LastIndexByte(image, ':')+1:]
	switch {
	case strings.Contains(tag, "bad"):
		return 0.30
	case strings.Contains(tag, "worse"):
		return 0.03 // three times the baseline, yet under a usual fixed threshold of 5%
	}
	return 0.01
}

// Serve listens on addr until ctx ends and returns the address it listens on.
func (t *Traffic) Serve(ctx context.Context, addr string) (string, error) {
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "demo_requests_total", Help: "Simulated requests by member cluster and HTTP code."}, []string{"cluster", "code"})
	reg.MustRegister(requests)
	t.images = map[string]string{}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	go t.followImages(ctx)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			t.mu.Lock()
			for cluster, image := range t.images {
				rate := ErrorRateFor(image)
				for range t.RequestsPerTick {
					code := "200"
					if rand.Float64() < rate {
						code = "500"
					}
					requests.WithLabelValues(cluster, code).Inc()
				}
			}
			t.mu.Unlock()
		}
	}()
	return lis.Addr().String(), nil
}

// followImages reads, every 250ms, which image each member's Deployment runs now.
func (t *Traffic) followImages(ctx context.Context) {
	for ctx.Err() == nil {
		for cluster, cs := range t.Members {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			d, err := cs.AppsV1().Deployments(t.Namespace).Get(cctx, t.Name, metav1.GetOptions{})
			cancel()
			t.mu.Lock()
			if err != nil {
				delete(t.images, cluster)
			} else {
				t.images[cluster] = runningImage(d)
			}
			t.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// runningImage is the image of the Deployment's pods once its rollout is under way in the
// member (the spec is what its ReplicaSets are moving to).
func runningImage(d *appsv1.Deployment) string {
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return ""
	}
	return d.Spec.Template.Spec.Containers[0].Image
}
