package kube

import (
	"context"
	"errors"
	"net"
	"time"

	"golang.org/x/net/http2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Busy says whether err is one an overloaded apiserver (or its etcd) gives and a later try may
// not: a server or client timeout, throttling, an internal error such as "etcdserver: request
// timed out", an unavailable server, a refused, reset or cut connection.
func Busy(err error) bool {
	if err == nil {
		return false
	}
	var netErr net.Error
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout() ||
		// The server reset the request's stream: an apiserver whose handler ran past its
		// timeout aborts it so, a DeleteCollection of thousands on a loaded member among them.
		errors.As(err, new(http2.StreamError))
}

// BusyBackoff is the wait before try n+1 (n from 0) of a call a busy server refused: 250 ms
// doubling to at most 10 s, so a blip costs a fraction of a second and a long overload
// is not hammered.
func BusyBackoff(n int) time.Duration {
	d := 250 * time.Millisecond
	for range min(n, 6) {
		d *= 2
	}
	return min(d, 10*time.Second)
}
