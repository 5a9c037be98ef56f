// Pins the traffic APIs whose CRDs the e2e suite installs in the members: Gateway API's
// HTTPRoute and Istio's VirtualService. Nothing is built from them.
module github.com/flotilla-dev/flotilla/hack/interop/traffic

go 1.26

require (
	istio.io/api v1.32.0
	sigs.k8s.io/gateway-api v1.6.3
)
