package inventory

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Fifty pages reading again at the same moment cost the control plane one TokenReview and
// one SubjectAccessReview, not fifty.
func TestChecksOfOneUserAtOnceAskTheControlPlaneOnce(t *testing.T) {
	kube := fake.NewClientset()
	var reviews, sars atomic.Int32
	kube.PrependReactor("create", "tokenreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		reviews.Add(1)
		time.Sleep(50 * time.Millisecond)
		return true, &authenticationv1.TokenReview{Status: authenticationv1.TokenReviewStatus{Authenticated: true,
			User: authenticationv1.UserInfo{Username: "carol"}}}, nil
	})
	kube.PrependReactor("create", "subjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		sars.Add(1)
		time.Sleep(50 * time.Millisecond)
		return true, &authorizationv1.SubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: true}}, nil
	})
	authn := &authenticator{kube: kube, ttl: 10 * time.Second}
	authz := &authorizer{kube: kube, ttl: 10 * time.Second}
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _ := http.NewRequest(http.MethodGet, "/api/v1/applications", nil)
			r.Header.Set("Authorization", "Bearer token-of-carol")
			u, err := authn.authenticate(r)
			if err != nil {
				t.Error(err)
				return
			}
			if ok, err := authz.allowed(context.Background(), u, access{verb: "list", resource: "resourcebindings"}); err != nil || !ok {
				t.Error(ok, err)
			}
		}()
	}
	wg.Wait()
	if reviews.Load() != 1 || sars.Load() != 1 {
		t.Fatalf("50 requests at once: %d TokenReviews and %d SubjectAccessReviews, want 1 and 1", reviews.Load(), sars.Load())
	}
}
