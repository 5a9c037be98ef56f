package inventory

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// User is who made a request, as the control plane authenticates them.
type User struct {
	Name   string
	Groups []string
	UID    string
	Extra  map[string]authenticationv1.ExtraValue
}

// errUnauthenticated answers 401.
var errUnauthenticated = errors.New("no valid credentials: send a bearer token the control plane accepts, or a client certificate of its CA")

// authenticator checks a request's credentials through the control plane: bearer tokens with
// TokenReview, client certificates by the TLS handshake against the control plane's client CA.
type authenticator struct {
	kube kubernetes.Interface
	ttl  time.Duration

	mu    sync.Mutex
	cache map[[32]byte]cachedUser
	// flight asks the control plane once for many requests of one token at the same moment
	// (fifty open pages reading again after one change).
	flight singleflight.Group
}

type cachedUser struct {
	user *User
	at   time.Time
}

func (a *authenticator) authenticate(r *http.Request) (*User, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || token == "" {
			return nil, errUnauthenticated
		}
		return a.token(r.Context(), token)
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		c := r.TLS.PeerCertificates[0]
		return &User{Name: c.Subject.CommonName, Groups: append(c.Subject.Organization, "system:authenticated")}, nil
	}
	return nil, errUnauthenticated
}

func (a *authenticator) token(ctx context.Context, token string) (*User, error) {
	key := sha256.Sum256([]byte(token))
	a.mu.Lock()
	if c, ok := a.cache[key]; ok && time.Since(c.at) < a.ttl {
		a.mu.Unlock()
		return c.user, nil
	}
	a.mu.Unlock()
	v, err, _ := a.flight.Do(string(key[:]), func() (any, error) {
		tr, err := a.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		if !tr.Status.Authenticated {
			return nil, errUnauthenticated
		}
		u := &User{Name: tr.Status.User.Username, Groups: tr.Status.User.Groups, UID: tr.Status.User.UID, Extra: tr.Status.User.Extra}
		a.mu.Lock()
		if a.cache == nil {
			a.cache = map[[32]byte]cachedUser{}
		}
		a.cache[key] = cachedUser{user: u, at: time.Now()}
		a.mu.Unlock()
		return u, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*User), nil
}

// authorizer asks the control plane (SubjectAccessReview) whether the user may do something:
// nothing is answered with Flotilla's own rights.
type authorizer struct {
	kube kubernetes.Interface
	ttl  time.Duration

	mu     sync.Mutex
	cache  map[string]cachedDecision
	flight singleflight.Group
}

type cachedDecision struct {
	allowed bool
	at      time.Time
}

// access is one question: may the user VERB GROUP/RESOURCE in NAMESPACE ("" cluster-wide)?
type access struct {
	verb, group, resource, namespace string
}

func (z *authorizer) allowed(ctx context.Context, u *User, a access) (bool, error) {
	key := u.Name + "|" + strings.Join(u.Groups, ",") + "|" + a.verb + "|" + a.group + "|" + a.resource + "|" + a.namespace
	z.mu.Lock()
	if d, ok := z.cache[key]; ok && time.Since(d.at) < z.ttl {
		z.mu.Unlock()
		return d.allowed, nil
	}
	z.mu.Unlock()
	v, err, _ := z.flight.Do(key, func() (any, error) {
		extra := map[string]authorizationv1.ExtraValue{}
		for k, v := range u.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
		sar, err := z.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Name, Groups: u.Groups, UID: u.UID, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		z.mu.Lock()
		if z.cache == nil {
			z.cache = map[string]cachedDecision{}
		}
		z.cache[key] = cachedDecision{allowed: sar.Status.Allowed, at: time.Now()}
		z.mu.Unlock()
		return sar.Status.Allowed, nil
	})
	if err != nil {
		return false, err
	}
	return v.(bool), nil
}

// Authenticate checks r's credentials as the inventory API does (bearer token through
// TokenReview, or a client certificate of the control plane's CA), for other endpoints served
// beside it.
func (s *Server) Authenticate(r *http.Request) (*User, error) { return s.authn.authenticate(r) }
