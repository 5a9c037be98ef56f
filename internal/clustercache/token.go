package clustercache

import (
	"net/http"
	"reflect"
	"sync/atomic"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// swappableToken lets a connection whose credentials are a bearer token take a renewed token
// in place: the clients, informers and object watches stay, so renewing the token (the cluster
// controller does, well before it expires) interrupts nothing. Requests in flight and open
// watches keep the token they started with, which is still valid.
type swappableToken struct {
	token atomic.Pointer[string]
	// given is the config as connected, its token blanked, to tell a renewed token from other
	// changed credentials (which replace the connection).
	given *rest.Config
}

// withSwappableToken moves cfg's bearer token into a round tripper that reads it on every
// request; nil when cfg has no inline token.
func withSwappableToken(cfg *rest.Config) *swappableToken {
	if cfg.BearerToken == "" || cfg.BearerTokenFile != "" {
		return nil
	}
	s := &swappableToken{given: withoutToken(cfg)}
	token := cfg.BearerToken
	s.token.Store(&token)
	cfg.BearerToken = ""
	wrap := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if wrap != nil {
			rt = wrap(rt)
		}
		return &bearer{token: &s.token, next: rt}
	}
	return s
}

// swap takes cfg's token when cfg differs from the connected config only in its token.
func (s *swappableToken) swap(cfg *rest.Config) bool {
	if s == nil || cfg.BearerToken == "" || cfg.BearerTokenFile != "" || !reflect.DeepEqual(s.given, withoutToken(cfg)) {
		return false
	}
	token := cfg.BearerToken
	s.token.Store(&token)
	return true
}

func withoutToken(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.BearerToken = ""
	return c
}

type bearer struct {
	token *atomic.Pointer[string]
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return b.next.RoundTrip(req)
	}
	req = utilnet.CloneRequest(req)
	req.Header.Set("Authorization", "Bearer "+*b.token.Load())
	return b.next.RoundTrip(req)
}

func (b *bearer) WrappedRoundTripper() http.RoundTripper { return b.next }
