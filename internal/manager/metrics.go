package manager

import (
	"fmt"
	"net"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// isLoopback reports whether a bind address (host:port) listens on loopback only. An empty
// host listens on every interface.
func isLoopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// metricsSecure says whether metrics are served over HTTPS to authenticated, authorized
// clients: as told, else whenever they are reachable from beyond this host.
func (o Options) metricsSecure() bool {
	if o.MetricsSecure != nil {
		return *o.MetricsSecure
	}
	return !isLoopback(o.MetricsAddress)
}

// metricsServerOptions serves metrics on loopback in plain HTTP, and elsewhere over HTTPS (a
// self-signed certificate unless one is given) to clients whose bearer token the control
// plane authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview), so
// the controller-manager's identity needs create on tokenreviews and subjectaccessreviews.
func (o Options) metricsServerOptions() (metricsserver.Options, error) {
	opts := metricsserver.Options{BindAddress: o.MetricsAddress}
	if o.MetricsAddress == "0" || !o.metricsSecure() {
		return opts, nil
	}
	if _, _, err := net.SplitHostPort(o.MetricsAddress); err != nil {
		return opts, fmt.Errorf("--metrics-bind-address %q: give host:port, for example 127.0.0.1:8080, or 0 to disable metrics", o.MetricsAddress)
	}
	opts.SecureServing = true
	opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	return opts, nil
}
